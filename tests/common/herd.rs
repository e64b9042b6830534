//! The herd-effect measurement shared by the lock and election bodies: queue waiters behind
//! a holder, release once, and count the notifications each waiter received for it. A
//! [`Queue`] says how to join (lock, campaign) and leave (unlock, resign).

use std::sync::Arc;
use std::time::Duration;

use coordbench_drivers::{Coordinator, DriverError, Leadership, LockGuard, LockRecipe, Session};
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::{open_session, within, LONG_TTL};

/// Something sessions queue for, one holder at a time.
pub trait Queue: Clone + Send + Sync + 'static {
    type Held: Send + 'static;
    /// Blocks until `s` holds.
    fn join<'a>(&'a self, s: &'a mut dyn Session)
        -> BoxFuture<'a, Result<Self::Held, DriverError>>;
    /// Releases what `s` holds.
    fn leave<'a>(
        &'a self,
        s: &'a mut dyn Session,
        held: Self::Held,
    ) -> BoxFuture<'a, Result<(), DriverError>>;
}

/// A lock, taken with a recipe.
#[derive(Clone)]
pub struct LockQueue {
    pub name: String,
    pub recipe: LockRecipe,
}

impl Queue for LockQueue {
    type Held = LockGuard;
    fn join<'a>(&'a self, s: &'a mut dyn Session) -> BoxFuture<'a, Result<LockGuard, DriverError>> {
        s.lock(&self.name, self.recipe)
    }
    fn leave<'a>(
        &'a self,
        s: &'a mut dyn Session,
        held: LockGuard,
    ) -> BoxFuture<'a, Result<(), DriverError>> {
        s.unlock(held)
    }
}

/// An election, campaigned in with a recipe.
#[derive(Clone)]
pub struct ElectionQueue {
    pub name: String,
    pub recipe: LockRecipe,
}

impl Queue for ElectionQueue {
    type Held = Leadership;
    fn join<'a>(
        &'a self,
        s: &'a mut dyn Session,
    ) -> BoxFuture<'a, Result<Leadership, DriverError>> {
        s.campaign(&self.name, b"candidate", self.recipe)
    }
    fn leave<'a>(
        &'a self,
        s: &'a mut dyn Session,
        held: Leadership,
    ) -> BoxFuture<'a, Result<(), DriverError>> {
        s.resign(held)
    }
}

/// Notifications each waiter received between the holder's release and the end of the
/// measurement, and which waiter got the queue next.
#[derive(Debug)]
pub struct HerdOutcome {
    pub notified: Vec<u64>,
    pub next: usize,
}

/// Queues `waiters` sessions (clients `0..waiters`) one at a time behind a holder (client
/// 100), releases the holder once, and counts what every waiter was notified of. Asserts
/// that nobody gets the queue while the holder holds and that exactly one waiter gets it.
pub async fn one_release<Q: Queue>(
    c: Arc<dyn Coordinator>,
    queue: Q,
    waiters: usize,
) -> HerdOutcome {
    let bound = Duration::from_secs(5);
    let mut holder = open_session(c.as_ref(), 100, LONG_TTL).await;
    let held = within(bound, "the holder's join", queue.join(holder.as_mut()))
        .await
        .expect("the holder joins");

    let (acquired_tx, mut acquired_rx) = mpsc::unbounded_channel::<usize>();
    let mut tasks = Vec::new();
    for w in 0..waiters {
        let mut s = open_session(c.as_ref(), w, LONG_TTL).await;
        let before = s.counters();
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let acquired_tx = acquired_tx.clone();
        let queue = queue.clone();
        let task = tokio::spawn(async move {
            // Wait until told to stop; dropping join() abandons the attempt without
            // releasing anything (sessions close only after every waiter's counters are
            // read, so no release cascades down the queue meanwhile).
            let held = tokio::select! {
                r = queue.join(s.as_mut()) => Some(r.expect("a waiter's join")),
                _ = &mut stop_rx => None,
            };
            if held.is_some() {
                let _ = acquired_tx.send(w);
                let _ = stop_rx.await;
            }
            (s, held, before)
        });
        tasks.push((stop_tx, task));
        // Queue in order, one at a time.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every waiter has sent its requests and is now only waiting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        acquired_rx.try_recv().is_err(),
        "a waiter got the queue while the holder holds"
    );

    within(
        bound,
        "the holder's release",
        queue.leave(holder.as_mut(), held),
    )
    .await
    .expect("the holder releases");
    let next = within(bound, "the next holder's grant", acquired_rx.recv())
        .await
        .expect("a waiter gets the queue");
    // Let every notification the release caused arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(acquired_rx.try_recv().is_err(), "two waiters hold at once");

    // Stop the waiters still waiting first, then the new holder, and read every waiter's
    // counters before anything is released or closed.
    let mut order: Vec<usize> = (0..waiters).filter(|&w| w != next).collect();
    order.push(next);
    let mut tasks: Vec<_> = tasks.into_iter().map(Some).collect();
    let mut ended = Vec::new();
    for w in order {
        let (stop, task) = tasks[w].take().expect("each waiter once");
        let _ = stop.send(());
        let (s, held, before) = within(bound, "a waiter's end", task)
            .await
            .expect("waiter task");
        ended.push((w, s, held, before));
    }
    ended.sort_by_key(|e| e.0);
    let notified: Vec<u64> = ended
        .iter()
        .map(|(_, s, _, before)| s.counters().notifications - before.notifications)
        .collect();
    for (w, mut s, held, _) in ended {
        assert_eq!(held.is_some(), w == next, "waiter {w}");
        if let Some(h) = held {
            queue
                .leave(s.as_mut(), h)
                .await
                .expect("the next holder releases");
        }
        s.close().await.expect("close waiter");
    }
    holder.close().await.expect("close holder");
    HerdOutcome { notified, next }
}

/// Naive: every waiter was woken. Herd-free: the next holder was, and nobody else.
pub fn assert_herd_matches(recipe: LockRecipe, outcome: &HerdOutcome) {
    let HerdOutcome { notified, next } = outcome;
    match recipe {
        LockRecipe::Naive => assert!(
            notified.iter().all(|&n| n >= 1),
            "naive: some waiter was not woken: {notified:?}"
        ),
        LockRecipe::HerdFree => {
            assert!(
                notified[*next] >= 1,
                "herd-free: the next holder was not notified: {notified:?}"
            );
            assert!(
                notified
                    .iter()
                    .enumerate()
                    .all(|(w, &n)| w == *next || n == 0),
                "herd-free: waiters other than {next} were woken: {notified:?}"
            );
        }
        other => panic!("{other:?} is not a coordination-service recipe"),
    }
}
