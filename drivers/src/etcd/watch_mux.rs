//! One gRPC watch stream shared by all the watch handles of a session, as etcd's clientv3
//! shares one stream among a client's watchers. Thousands of config watchers then cost one
//! create request each, not an HTTP/2 stream and server task each.
//!
//! A task owns the stream: it sends create requests one at a time (the server answers
//! creates in order, so the next `created` response names the pending watch's id), routes
//! every response to its watcher's unbounded queue ([`Inbox`]), and cancels a watcher whose
//! [`Subscription`] was dropped. It always reads, so a handle that is not polled never
//! stalls the connection's flow-control window; its events wait in its queue instead.
//!
//! A queued response is reduced to its [`Change`]s, and the watchers of one key share one
//! copy of each value ([`SharedValues`]): when a generator falls behind thousands of config
//! watchers, what waits in their queues is mostly the same few values.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use etcd_client::{Client, Event, EventType, WatchOptions, WatchResponse, WatchStream};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use super::map_error;
use super::prefix_view::{Change, Entry};
use crate::{CounterHandle, DriverError};

/// A watcher's share of one response: its changes, in revision order.
type Delivery = Result<Vec<Change>, DriverError>;

/// A request to add a watcher, from the session.
struct Create {
    key: Vec<u8>,
    options: WatchOptions,
    reply: oneshot::Sender<Result<Subscription, DriverError>>,
}

/// The shared stream of one session. Dropping it ends the stream once every subscription
/// has ended too.
pub(super) struct WatchMux {
    creates: mpsc::UnboundedSender<Create>,
    task: JoinHandle<()>,
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
}

impl Inbox {
    fn state(&self) -> std::sync::MutexGuard<'_, InboxState> {
        // A panic while holding the lock leaves a valid queue; keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, delivery: Delivery) {
        self.state().queued.push_back(delivery);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.state().closed = true;
        self.ready.notify_one();
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

/// One watcher on a shared stream: its responses, in order. Dropping it cancels the watch.
pub(super) struct Subscription {
    id: i64,
    responses: Arc<Inbox>,
    cancels: mpsc::UnboundedSender<i64>,
}

impl Subscription {
    /// The changes of the next response for this watcher that carries any, in revision
    /// order. A cancel by the server, or the loss of the stream, is an error.
    pub async fn next(&mut self) -> Result<Vec<Change>, DriverError> {
        loop {
            let changes = self
                .responses
                .pop()
                .await
                .unwrap_or_else(|| Err(stream_gone()))?;
            if !changes.is_empty() {
                return Ok(changes);
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let _ = self.cancels.send(self.id);
    }
}

fn stream_gone() -> DriverError {
    DriverError::Server("the session's watch stream ended".into())
}

impl WatchMux {
    /// Opens the stream with its first watcher.
    pub async fn open(
        mut client: Client,
        counters: CounterHandle,
        key: Vec<u8>,
        options: WatchOptions,
    ) -> Result<(WatchMux, Subscription), DriverError> {
        counters.request();
        let stream = client.watch(key, Some(options)).await.map_err(map_error)?;
        let (creates, create_rx) = mpsc::unbounded_channel();
        let (cancels, cancel_rx) = mpsc::unbounded_channel();
        let (reply, created) = oneshot::channel();
        let router = Router {
            stream,
            counters,
            cancels,
            watchers: HashMap::new(),
            pending: Some(reply),
            values: SharedValues::default(),
        };
        let task = tokio::spawn(router.run(create_rx, cancel_rx));
        let first = created.await.unwrap_or_else(|_| Err(stream_gone()))?;
        Ok((WatchMux { creates, task }, first))
    }

    /// False once the stream has failed; the session then opens a new one.
    pub fn is_open(&self) -> bool {
        !self.task.is_finished()
    }

    /// Adds a watcher to the stream once the server confirms it.
    pub async fn subscribe(
        &self,
        key: Vec<u8>,
        options: WatchOptions,
    ) -> Result<Subscription, DriverError> {
        let (reply, created) = oneshot::channel();
        self.creates
            .send(Create {
                key,
                options,
                reply,
            })
            .map_err(|_| stream_gone())?;
        created.await.unwrap_or_else(|_| Err(stream_gone()))
    }
}

/// The task that owns the stream.
struct Router {
    stream: WatchStream,
    counters: CounterHandle,
    /// Handed to each new subscription, for its cancel on drop.
    cancels: mpsc::UnboundedSender<i64>,
    watchers: HashMap<i64, Arc<Inbox>>,
    /// The create request awaiting its `created` response.
    pending: Option<oneshot::Sender<Result<Subscription, DriverError>>>,
    values: SharedValues,
}

/// Each key's latest value seen on the stream, so that the events of one write, which
/// arrive once per watcher of its key, share one copy of the key and of the value.
#[derive(Default)]
struct SharedValues {
    /// By key: the mod revision of the value held, and the value.
    latest: HashMap<Bytes, (i64, Bytes)>,
}

/// Keys remembered per stream; past this the memory starts afresh (a prefix watch over a
/// large keyspace would otherwise keep a copy of every value).
const SHARED_KEYS: usize = 1024;

impl SharedValues {
    fn change(&mut self, event: &Event) -> Option<Change> {
        let kv = event.kv()?;
        if self.latest.len() >= SHARED_KEYS && !self.latest.contains_key(kv.key()) {
            self.latest.clear();
        }
        let (key, held) = match self.latest.get_key_value(kv.key()) {
            Some((key, (revision, value))) => (
                key.clone(),
                (*revision == kv.mod_revision()).then(|| value.clone()),
            ),
            None => (Bytes::copy_from_slice(kv.key()), None),
        };
        if event.event_type() == EventType::Delete {
            return Some(Change::Delete { key });
        }
        let value = held.unwrap_or_else(|| {
            let value = Bytes::copy_from_slice(kv.value());
            self.latest
                .insert(key.clone(), (kv.mod_revision(), value.clone()));
            value
        });
        let entry = Entry {
            create_rev: kv.create_revision(),
            value,
        };
        Some(Change::Put { key, entry })
    }

    fn changes(&mut self, resp: &WatchResponse) -> Vec<Change> {
        resp.events()
            .iter()
            .filter_map(|e| self.change(e))
            .collect()
    }
}

impl Router {
    async fn run(
        mut self,
        mut creates: mpsc::UnboundedReceiver<Create>,
        mut cancels: mpsc::UnboundedReceiver<i64>,
    ) {
        let mut session_gone = false;
        let failure = loop {
            if session_gone && self.watchers.is_empty() && self.pending.is_none() {
                return;
            }
            let step = tokio::select! {
                create = creates.recv(), if !session_gone && self.pending.is_none() => {
                    match create {
                        Some(create) => self.create(create).await,
                        None => {
                            session_gone = true;
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
            };
            if let Err(e) = step {
                break e;
            }
        };
        for (_, watcher) in self.watchers.drain() {
            watcher.push(Err(failure.clone()));
            watcher.close();
        }
        if let Some(reply) = self.pending.take() {
            let _ = reply.send(Err(failure));
        }
    }

    /// Sends a create request; its answer comes through [`Router::route`].
    async fn create(&mut self, create: Create) -> Result<(), DriverError> {
        self.counters.request();
        match self.stream.watch(create.key, Some(create.options)).await {
            Ok(()) => {
                self.pending = Some(create.reply);
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
        if self.watchers.remove(&id).is_some() {
            self.counters.request();
            self.stream.cancel(id).await.map_err(map_error)?;
        }
        Ok(())
    }

    fn route(&mut self, resp: WatchResponse) {
        let id = resp.watch_id();
        if resp.created() {
            let Some(reply) = self.pending.take() else {
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
            self.watchers.insert(id, inbox.clone());
            let subscription = Subscription {
                id,
                responses: inbox,
                cancels: self.cancels.clone(),
            };
            // If the caller stopped waiting, dropping the subscription cancels the watch.
            let _ = reply.send(Ok(subscription));
            return;
        }
        self.counters.notifications(resp.events().len() as u64);
        if resp.canceled() {
            if let Some(watcher) = self.watchers.remove(&id) {
                let reason = match resp.compact_revision() {
                    0 => resp.cancel_reason().to_string(),
                    rev => format!("compacted at revision {rev}"),
                };
                watcher.push(Err(DriverError::Server(format!(
                    "watch canceled by the server: {reason}"
                ))));
                watcher.close();
            }
            return;
        }
        if let Some(watcher) = self.watchers.get(&id) {
            watcher.push(Ok(self.values.changes(&resp)));
        }
    }
}

/// However the router ends (its stream failed, its task was aborted), its watchers learn
/// that nothing more will come.
impl Drop for Router {
    fn drop(&mut self) {
        for watcher in self.watchers.values() {
            watcher.close();
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

    fn value(change: Option<Change>) -> Bytes {
        match change {
            Some(Change::Put { entry, .. }) => entry.value,
            other => panic!("not a put: {other:?}"),
        }
    }

    #[test]
    fn the_watchers_of_one_write_share_its_value_and_a_new_write_gets_its_own() {
        let mut shared = SharedValues::default();
        let first = value(shared.change(&event(0, "/cfg", 5, "v5")));
        let again = value(shared.change(&event(0, "/cfg", 5, "v5")));
        assert_eq!(first.as_ptr(), again.as_ptr(), "one copy for one write");
        let next = value(shared.change(&event(0, "/cfg", 6, "v6")));
        assert_eq!(&next[..], b"v6");
        assert_ne!(first.as_ptr(), next.as_ptr());
        let other = value(shared.change(&event(0, "/other", 5, "o5")));
        assert_eq!(&other[..], b"o5", "keys are held apart");
        assert!(matches!(
            shared.change(&event(1, "/cfg", 7, "")),
            Some(Change::Delete { key }) if &key[..] == b"/cfg"
        ));
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
        inbox.push(Err(DriverError::Server("first".into())));
        inbox.push(Err(DriverError::Server("second".into())));
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
