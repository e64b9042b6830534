//! Null-target elections: per election, a queue of candidates ordered by token. The lowest
//! token leads. When a candidate leaves, a herd-free successor is woken only if its
//! immediate predecessor left; naive candidates are woken by every departure.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::{watch, Notify};

use super::locked;
use crate::{CounterHandle, DriverError, LeaderView, LeaderWatch, LockRecipe};

struct Candidate {
    value: Vec<u8>,
    recipe: LockRecipe,
    wake: Arc<Notify>,
}

struct Election {
    candidates: BTreeMap<i64, Candidate>,
    leader: watch::Sender<Option<LeaderView>>,
}

impl Default for Election {
    fn default() -> Self {
        Election {
            candidates: BTreeMap::new(),
            leader: watch::Sender::new(None),
        }
    }
}

impl Election {
    /// Publishes the head of the queue to observers if it changed.
    fn publish(&self) {
        let head = self.candidates.iter().next().map(|(token, c)| LeaderView {
            token: *token,
            value: c.value.clone(),
        });
        self.leader.send_if_modified(|current| {
            let changed = current.as_ref().map(|v| v.token) != head.as_ref().map(|v| v.token);
            if changed {
                *current = head;
            }
            changed
        });
    }
}

/// Every election of one null coordinator.
#[derive(Default)]
pub(super) struct Elections(Mutex<HashMap<String, Election>>);

impl Elections {
    /// Queues candidate `token`. The returned candidacy withdraws it if dropped before it
    /// leads (a cancelled campaign).
    pub(super) fn enter(
        &self,
        election: &str,
        token: i64,
        value: Vec<u8>,
        recipe: LockRecipe,
    ) -> Candidacy<'_> {
        let wake = Arc::new(Notify::new());
        let mut table = locked(&self.0);
        let e = table.entry(election.to_string()).or_default();
        e.candidates.insert(
            token,
            Candidate {
                value,
                recipe,
                wake: wake.clone(),
            },
        );
        e.publish();
        Candidacy {
            elections: self,
            election: election.to_string(),
            token,
            wake,
            won: false,
        }
    }

    /// Removes candidate `token` (resigned, cancelled or expired) and wakes who must look.
    pub(super) fn withdraw(&self, election: &str, token: i64) {
        let mut table = locked(&self.0);
        let Some(e) = table.get_mut(election) else {
            return;
        };
        if e.candidates.remove(&token).is_none() {
            return;
        }
        let successor = e.candidates.range(token..).next().map(|(t, _)| *t);
        for (t, c) in &e.candidates {
            if c.recipe == LockRecipe::Naive || Some(*t) == successor {
                c.wake.notify_one();
            }
        }
        e.publish();
    }

    fn leads(&self, election: &str, token: i64) -> bool {
        let table = locked(&self.0);
        table
            .get(election)
            .and_then(|e| e.candidates.keys().next())
            .is_some_and(|head| *head == token)
    }

    pub(super) fn observe(&self, election: &str, counters: CounterHandle) -> NullLeaderWatch {
        let mut table = locked(&self.0);
        let e = table.entry(election.to_string()).or_default();
        NullLeaderWatch {
            rx: e.leader.subscribe(),
            last: None,
            counters,
        }
    }
}

/// A queued candidate.
pub(super) struct Candidacy<'a> {
    elections: &'a Elections,
    election: String,
    token: i64,
    wake: Arc<Notify>,
    won: bool,
}

impl Candidacy<'_> {
    /// Returns once this candidate heads the queue; every wake-up is a notification.
    pub(super) async fn wait_to_lead(mut self, counters: &CounterHandle) {
        while !self.elections.leads(&self.election, self.token) {
            self.wake.notified().await;
            counters.notifications(1);
        }
        self.won = true;
    }
}

impl Drop for Candidacy<'_> {
    fn drop(&mut self) {
        if !self.won {
            self.elections.withdraw(&self.election, self.token);
        }
    }
}

/// Follows one election's head.
pub(super) struct NullLeaderWatch {
    rx: watch::Receiver<Option<LeaderView>>,
    /// The leader last returned; `None` before the first call.
    last: Option<Option<i64>>,
    counters: CounterHandle,
}

#[async_trait]
impl LeaderWatch for NullLeaderWatch {
    async fn next(&mut self) -> Result<Option<LeaderView>, DriverError> {
        loop {
            let current = self.rx.borrow_and_update().clone();
            let token = current.as_ref().map(|v| v.token);
            if self.last != Some(token) {
                if self.last.is_some() {
                    self.counters.notifications(1);
                }
                self.last = Some(token);
                return Ok(current);
            }
            self.rx
                .changed()
                .await
                .map_err(|_| DriverError::Server("election went away".into()))?;
        }
    }
}
