//! One gRPC watch stream per connection, shared by the watch handles of every session on it,
//! as etcd's clientv3 shares one stream among a client's watchers. Thousands of config
//! watchers or lock waiters then cost one create request each, not an HTTP/2 stream, a
//! server task and a decoder each (a stream per session held about 5 KB of the generator's
//! heap a session at 10,000 lock contenders; RESULTS.md, "Memory at scale").
//!
//! [`SharedWatch`] is the connection's handle: it opens the stream with the first watcher,
//! and opens a fresh one after the last failed or closed. A task owns each stream ([`Router`]):
//! it sends create requests (up to [`MAX_PENDING_CREATES`] at a time; the server answers
//! creates in the order it received them, so each `created` response belongs to the oldest
//! pending create), routes every response to its watcher's unbounded queue ([`Inbox`]), and
//! cancels a watcher whose [`Subscription`] was dropped. It always reads, so a handle that is
//! not polled never stalls the connection's flow-control window; its events wait in its
//! queue instead. A stream without watchers stops taking creates after [`IDLE_LINGER`] (the
//! next watcher opens a fresh stream) and closes once those already queued are served: a
//! server stopping gracefully waits for open streams.
//!
//! A queued response is reduced to its [`Change`]s, and the watchers of one key share one
//! copy of each change ([`SharedChanges`]): the server sends a write's event once per
//! watcher, but every watcher's queue holds a pointer to the same change. When a generator
//! falls behind thousands of config watchers, what waits in their queues is then a pointer
//! per watcher per write.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Client, Event, EventType, WatchClient, WatchOptions, WatchResponse, WatchStream,
};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;

use super::map_error;
use super::prefix_view::{entry, Change};
use crate::{CounterHandle, DriverError};

/// The changes of one response, in revision order, shared by every watcher that was sent
/// the same ones.
pub(super) type Changes = Arc<[Change]>;

/// A watcher's share of one response. The error is boxed: a queue slot is then three words,
/// not eight, and errors are rare.
type Delivery = Result<Changes, Box<DriverError>>;

/// Create requests sent and not yet answered, per stream. etcd-client queues a stream's
/// requests in a channel of 100; the router waits on that channel while it sends, so it
/// keeps well below it and cancels always find room.
const MAX_PENDING_CREATES: usize = 32;
/// How long a stream stays open without watchers, so that a connection whose lock waits
/// come and go keeps one stream rather than opening one per wait.
const IDLE_LINGER: Duration = Duration::from_secs(1);

/// The answer to a create: the watcher, or why not.
type CreateReply = oneshot::Sender<Result<Subscription, DriverError>>;

/// A request to add a watcher, from a session.
struct Create {
    key: Vec<u8>,
    options: WatchOptions,
    /// The session's: its create and cancel requests count there.
    counters: CounterHandle,
    reply: CreateReply,
}

/// A connection's watch stream, shared by every session on it; opened with the first
/// watcher and again after the stream failed or closed for want of watchers. It holds the
/// stream's queue of creates, which its [`Router`] closes when it stops taking them.
#[derive(Default)]
pub(super) struct SharedWatch {
    creates: tokio::sync::Mutex<Option<mpsc::UnboundedSender<Create>>>,
}

impl SharedWatch {
    /// A watcher on `key`, counted in `counters`, once the server confirms it; a fresh
    /// stream is opened through `client` when there is none taking creates.
    pub async fn subscribe(
        &self,
        client: &Client,
        key: Vec<u8>,
        options: WatchOptions,
        counters: &CounterHandle,
    ) -> Result<Subscription, DriverError> {
        let (reply, created) = oneshot::channel();
        let create = Create {
            key,
            options,
            counters: counters.clone(),
            reply,
        };
        {
            let mut creates = self.creates.lock().await;
            // A closed queue hands the create back: it opens the next stream.
            let refused = match creates.as_ref() {
                Some(queue) => queue.send(create).err().map(|refused| refused.0),
                None => Some(create),
            };
            if let Some(create) = refused {
                *creates = Some(Router::start(client.watch_client(), create).await?);
            }
        }
        // Awaited without the lock: creates on one stream are pipelined.
        created.await.unwrap_or_else(|_| Err(stream_gone()))
    }
}

/// One watcher's queue of responses, filled by the router and emptied by its
/// [`Subscription`]. An empty one costs about 100 bytes; tokio's unbounded channel, used
/// before, allocated a 32-slot block per watcher up front (4 KB with its state): 410 MB of
/// the generator's heap at 100,000 watchers.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    ready: Notify,
}

#[derive(Default)]
struct InboxState {
    queued: VecDeque<Delivery>,
    /// The router will add nothing more.
    closed: bool,
    /// The subscription was dropped: its cancel is on its way, nobody reads this queue.
    abandoned: bool,
}

impl Inbox {
    fn state(&self) -> std::sync::MutexGuard<'_, InboxState> {
        // A panic while holding the lock leaves a valid queue; keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `delivery`, unless the subscription was dropped (its cancel is on its way).
    fn push(&self, delivery: Delivery) {
        let mut state = self.state();
        if state.abandoned {
            return;
        }
        state.queued.push_back(delivery);
        drop(state);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.state().closed = true;
        self.ready.notify_one();
    }

    fn abandon(&self) {
        let mut state = self.state();
        state.abandoned = true;
        state.queued.clear();
    }

    /// The next delivery; `None` once closed and emptied. One reader only: a push between
    /// the check and the wait leaves `notify_one`'s permit, so no wake-up is lost.
    async fn pop(&self) -> Option<Delivery> {
        loop {
            {
                let mut state = self.state();
                if let Some(delivery) = state.queued.pop_front() {
                    return Some(delivery);
                }
                if state.closed {
                    return None;
                }
            }
            self.ready.notified().await;
        }
    }
}

/// A watcher in the router's table.
struct Watcher {
    inbox: Arc<Inbox>,
    counters: CounterHandle,
}

/// One watcher on a shared stream: its responses, in order. Dropping it cancels the watch.
pub(super) struct Subscription {
    id: i64,
    responses: Arc<Inbox>,
    cancels: mpsc::UnboundedSender<i64>,
    /// The session's: events count as notifications when the watcher takes them.
    counters: CounterHandle,
}

impl Subscription {
    /// The changes of the next response for this watcher that carries any, in revision
    /// order. A cancel by the server, or the loss of the stream, is an error.
    pub async fn next(&mut self) -> Result<Changes, DriverError> {
        loop {
            let changes = match self.responses.pop().await {
                Some(delivery) => delivery.map_err(|e| *e)?,
                None => return Err(stream_gone()),
            };
            if !changes.is_empty() {
                self.counters.notifications(changes.len() as u64);
                return Ok(changes);
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.responses.abandon();
        let _ = self.cancels.send(self.id);
    }
}

fn stream_gone() -> DriverError {
    DriverError::Server("the connection's watch stream ended".into())
}

/// The task that owns the stream.
struct Router {
    stream: WatchStream,
    /// Handed to each new subscription, for its cancel on drop.
    cancels: mpsc::UnboundedSender<i64>,
    watchers: HashMap<i64, Watcher>,
    /// The create requests awaiting their `created` responses, oldest first.
    pending: VecDeque<(CreateReply, CounterHandle)>,
    changes: SharedChanges,
}

/// Each key's recent changes seen on the stream, so that the events of one write, which
/// arrive once per watcher of its key, become one shared change; and the latest batch of a
/// key's changes, which etcd sends alike to every watcher that fell behind together.
#[derive(Default)]
struct SharedChanges {
    keys: HashMap<Bytes, KeyChanges>,
    /// Single changes held over all keys.
    held: usize,
}

#[derive(Default)]
struct KeyChanges {
    /// The key's latest changes, each alone as a delivery, by mod revision (newest last).
    singles: VecDeque<(i64, Changes)>,
    /// The latest response of several of its changes, by first and last revision and count.
    batch: Option<((i64, i64, usize), Changes)>,
}

/// Changes remembered per key; a batch's older changes beyond these are copied once per
/// batch, not once per watcher.
const RECENT_PER_KEY: usize = 8;
/// Changes remembered per stream; past this the memory starts afresh (a prefix watch over a
/// large keyspace would otherwise keep a copy of every value).
const SHARED_CHANGES: usize = 4096;

impl SharedChanges {
    /// `event` as a delivery of its own: the one held for its key and revision, or a new one
    /// that is then held.
    fn single(&mut self, event: &Event) -> Option<Changes> {
        let kv = event.kv()?;
        let revision = kv.mod_revision();
        if let Some(held) = self.keys.get(kv.key()).and_then(|k| k.single(revision)) {
            return Some(held);
        }
        if self.held >= SHARED_CHANGES {
            self.keys.clear();
            self.held = 0;
        }
        let key = match self.keys.get_key_value(kv.key()) {
            Some((key, _)) => key.clone(),
            None => Bytes::copy_from_slice(kv.key()),
        };
        let change = match event.event_type() {
            EventType::Delete => Change::Delete { key: key.clone() },
            EventType::Put => Change::Put {
                key: key.clone(),
                entry: entry(kv),
            },
        };
        let held: Changes = Arc::new([change]);
        let singles = &mut self.keys.entry(key).or_default().singles;
        singles.push_back((revision, held.clone()));
        self.held += 1;
        if singles.len() > RECENT_PER_KEY {
            singles.pop_front();
            self.held -= 1;
        }
        Some(held)
    }

    /// A response's changes. One event (a config watcher's usual response) is the shared
    /// delivery itself; several events of one key are shared as a batch; others share
    /// their keys and values.
    fn changes(&mut self, resp: &WatchResponse) -> Changes {
        let events = resp.events();
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Arc::new([]);
        };
        if events.len() == 1 {
            return self.single(first).unwrap_or_else(|| Arc::new([]));
        }
        let one_key = first.kv().map(|kv| kv.key());
        let batch_key = one_key.filter(|key| {
            events
                .iter()
                .all(|e| e.kv().map(|kv| kv.key()) == Some(*key))
        });
        let revision = |e: &Event| e.kv().map_or(0, |kv| kv.mod_revision());
        let id = (revision(first), revision(last), events.len());
        if let Some(held) = batch_key
            .and_then(|key| self.keys.get(key)?.batch.as_ref())
            .filter(|(held_id, _)| *held_id == id)
        {
            return held.1.clone();
        }
        let changes: Changes = events
            .iter()
            .filter_map(|e| self.single(e))
            .map(|held| held[0].clone())
            .collect();
        if let Some(key) = batch_key {
            if let Some(k) = self.keys.get_mut(key) {
                k.batch = Some((id, changes.clone()));
            }
        }
        changes
    }
}

impl KeyChanges {
    fn single(&self, revision: i64) -> Option<Changes> {
        let (_, held) = self.singles.iter().rev().find(|(r, _)| *r == revision)?;
        Some(held.clone())
    }
}

impl Router {
    /// Opens a stream with its first watcher's create and starts its task; returns the
    /// stream's queue of further creates.
    async fn start(
        mut client: WatchClient,
        first: Create,
    ) -> Result<mpsc::UnboundedSender<Create>, DriverError> {
        first.counters.request();
        let stream = client
            .watch(first.key, Some(first.options))
            .await
            .map_err(map_error)?;
        let (creates, create_rx) = mpsc::unbounded_channel();
        let (cancels, cancel_rx) = mpsc::unbounded_channel();
        let router = Router {
            stream,
            cancels,
            watchers: HashMap::new(),
            pending: VecDeque::from([(first.reply, first.counters)]),
            changes: SharedChanges::default(),
        };
        tokio::spawn(router.run(create_rx, cancel_rx));
        Ok(creates)
    }

    async fn run(
        mut self,
        mut creates: mpsc::UnboundedReceiver<Create>,
        mut cancels: mpsc::UnboundedReceiver<i64>,
    ) {
        // No create will come any more: the queue is closed and emptied.
        let mut creates_done = false;
        // The queue was closed for want of watchers.
        let mut closing = false;
        // Armed once when the stream falls idle, not on every response.
        let linger = tokio::time::sleep(IDLE_LINGER);
        tokio::pin!(linger);
        let mut lingering = false;
        let failure = loop {
            let idle = self.watchers.is_empty() && self.pending.is_empty();
            if idle && creates_done {
                return;
            }
            if idle && !lingering {
                linger.as_mut().reset(Instant::now() + IDLE_LINGER);
            }
            lingering = idle;
            let step = tokio::select! {
                create = creates.recv(),
                    if !creates_done && self.pending.len() < MAX_PENDING_CREATES =>
                {
                    match create {
                        Some(create) => self.create(create).await,
                        None => {
                            creates_done = true;
                            Ok(())
                        }
                    }
                }
                // The router holds a sender itself, so this channel never closes.
                Some(id) = cancels.recv() => self.cancel(id).await,
                message = self.stream.message() => match message {
                    Ok(Some(resp)) => {
                        self.route(resp);
                        Ok(())
                    }
                    Ok(None) => Err(stream_gone()),
                    Err(e) => Err(map_error(e)),
                },
                // New subscribers get their create back and open a fresh stream; those
                // already queued are served here first.
                () = &mut linger, if lingering && !closing => {
                    closing = true;
                    creates.close();
                    Ok(())
                }
            };
            if let Err(e) = step {
                break e;
            }
        };
        creates.close();
        while let Ok(create) = creates.try_recv() {
            let _ = create.reply.send(Err(failure.clone()));
        }
        for (_, watcher) in self.watchers.drain() {
            watcher.inbox.push(Err(Box::new(failure.clone())));
            watcher.inbox.close();
        }
        for (reply, _) in self.pending.drain(..) {
            let _ = reply.send(Err(failure.clone()));
        }
    }

    /// Sends a create request; its answer comes through [`Router::route`].
    async fn create(&mut self, create: Create) -> Result<(), DriverError> {
        create.counters.request();
        match self.stream.watch(create.key, Some(create.options)).await {
            Ok(()) => {
                self.pending.push_back((create.reply, create.counters));
                Ok(())
            }
            Err(e) => {
                let e = map_error(e);
                let _ = create.reply.send(Err(e.clone()));
                Err(e)
            }
        }
    }

    async fn cancel(&mut self, id: i64) -> Result<(), DriverError> {
        if let Some(watcher) = self.watchers.remove(&id) {
            watcher.counters.request();
            self.stream.cancel(id).await.map_err(map_error)?;
        }
        Ok(())
    }

    fn route(&mut self, resp: WatchResponse) {
        let id = resp.watch_id();
        if resp.created() {
            let Some((reply, counters)) = self.pending.pop_front() else {
                return;
            };
            if resp.canceled() {
                let _ = reply.send(Err(DriverError::Server(format!(
                    "watch refused: {}",
                    resp.cancel_reason()
                ))));
                return;
            }
            let inbox = Arc::new(Inbox::default());
            let subscription = Subscription {
                id,
                responses: inbox.clone(),
                cancels: self.cancels.clone(),
                counters: counters.clone(),
            };
            self.watchers.insert(id, Watcher { inbox, counters });
            // If the caller stopped waiting, dropping the subscription cancels the watch.
            let _ = reply.send(Ok(subscription));
            return;
        }
        if resp.canceled() {
            if let Some(watcher) = self.watchers.remove(&id) {
                let reason = match resp.compact_revision() {
                    0 => resp.cancel_reason().to_string(),
                    rev => format!("compacted at revision {rev}"),
                };
                watcher.inbox.push(Err(Box::new(DriverError::Server(format!(
                    "watch canceled by the server: {reason}"
                )))));
                watcher.inbox.close();
            }
            return;
        }
        // Nothing for a watch whose handle was dropped (its cancel is on its way). Events
        // count as notifications only when a watcher takes them (`Subscription::next`):
        // the router reads ahead of its watchers, and a lock's wait that has ended reads
        // no more, as when it had a stream of its own that closed with it.
        if let Some(watcher) = self.watchers.get(&id) {
            watcher.inbox.push(Ok(self.changes.changes(&resp)));
        }
    }
}

/// However the router ends (its stream failed, its task was aborted), its watchers learn
/// that nothing more will come.
impl Drop for Router {
    fn drop(&mut self) {
        for watcher in self.watchers.values() {
            watcher.inbox.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_client::proto::{PbEvent, PbKeyValue};

    fn event(kind: i32, key: &str, mod_revision: i64, value: &str) -> Event {
        Event(PbEvent {
            r#type: kind,
            kv: Some(PbKeyValue {
                key: key.as_bytes().to_vec(),
                create_revision: 2,
                mod_revision,
                value: value.as_bytes().to_vec(),
                ..Default::default()
            }),
            prev_kv: None,
        })
    }

    fn response(events: Vec<Event>) -> WatchResponse {
        WatchResponse(etcd_client::proto::PbWatchResponse {
            events: events.into_iter().map(|e| e.0).collect(),
            ..Default::default()
        })
    }

    fn value(change: &Change) -> Bytes {
        match change {
            Change::Put { entry, .. } => entry.value.clone(),
            other => panic!("not a put: {other:?}"),
        }
    }

    #[test]
    fn a_dropped_subscription_s_queue_is_emptied_and_takes_nothing_more() {
        let inbox = Inbox::default();
        inbox.push(Ok(Arc::from(Vec::<Change>::new())));
        inbox.abandon();
        assert!(inbox.state().queued.is_empty());
        inbox.push(Ok(Arc::from(Vec::<Change>::new())));
        assert!(inbox.state().queued.is_empty());
    }

    #[test]
    fn the_watchers_of_one_write_share_its_change_and_a_new_write_gets_its_own() {
        let mut shared = SharedChanges::default();
        let first = shared.changes(&response(vec![event(0, "/cfg", 5, "v5")]));
        let again = shared.changes(&response(vec![event(0, "/cfg", 5, "v5")]));
        assert!(Arc::ptr_eq(&first, &again), "one change for one write");
        let next = shared.changes(&response(vec![event(0, "/cfg", 6, "v6")]));
        assert_eq!(&value(&next[0])[..], b"v6");
        assert!(!Arc::ptr_eq(&first, &next));
        let other = shared.changes(&response(vec![event(0, "/other", 5, "o5")]));
        assert_eq!(&value(&other[0])[..], b"o5", "keys are held apart");
        let both = shared.changes(&response(vec![
            event(0, "/cfg", 6, "v6"),
            event(0, "/other", 5, "o5"),
        ]));
        assert_eq!(both.len(), 2);
        assert_eq!(
            value(&both[0]).as_ptr(),
            value(&next[0]).as_ptr(),
            "values shared"
        );
        assert_eq!(value(&both[1]).as_ptr(), value(&other[0]).as_ptr());
        assert!(matches!(
            &shared.changes(&response(vec![event(1, "/cfg", 7, "")]))[..],
            [Change::Delete { key }] if &key[..] == b"/cfg"
        ));
        assert!(shared.changes(&response(vec![])).is_empty());
    }

    #[test]
    fn watchers_that_fell_behind_together_share_their_catch_up_batch() {
        let mut shared = SharedChanges::default();
        let batch = || response(vec![event(0, "/cfg", 5, "v5"), event(0, "/cfg", 6, "v6")]);
        let first = shared.changes(&batch());
        let again = shared.changes(&batch());
        assert!(Arc::ptr_eq(&first, &again), "one batch for watchers alike");
        assert_eq!(
            first.iter().map(value).collect::<Vec<_>>(),
            [Bytes::from("v5"), Bytes::from("v6")]
        );
        let later = shared.changes(&response(vec![event(0, "/cfg", 6, "v6")]));
        assert_eq!(
            value(&later[0]).as_ptr(),
            value(&first[1]).as_ptr(),
            "values shared"
        );
        let longer = shared.changes(&response(vec![
            event(0, "/cfg", 5, "v5"),
            event(0, "/cfg", 6, "v6"),
            event(0, "/cfg", 7, "v7"),
        ]));
        assert!(
            !Arc::ptr_eq(&first, &longer),
            "a different batch is its own"
        );
        assert_eq!(longer.len(), 3);
    }

    #[tokio::test]
    async fn an_inbox_delivers_in_order_then_ends_once_closed() {
        let inbox = Arc::new(Inbox::default());
        let waiter = tokio::spawn({
            let inbox = inbox.clone();
            async move {
                let mut seen = Vec::new();
                while let Some(delivery) = inbox.pop().await {
                    seen.push(delivery.err().map(|e| e.to_string()).unwrap_or_default());
                }
                seen
            }
        });
        tokio::task::yield_now().await;
        inbox.push(Err(Box::new(DriverError::Server("first".into()))));
        inbox.push(Err(Box::new(DriverError::Server("second".into()))));
        inbox.close();
        let seen = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the reader was woken")
            .expect("the reader finished");
        assert_eq!(seen.len(), 2);
        assert!(
            seen[0].contains("first") && seen[1].contains("second"),
            "{seen:?}"
        );
    }
}
