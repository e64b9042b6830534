//! Watch fan-out: routes the events of every apply to this member's watch streams without
//! ever making apply wait.
//!
//! Each watch stream (a gRPC `Watch` call, or an internal waiter of the Lock and Election
//! services) registers a [`Subscriber`]: its own [`WatchHub`] (watch ids are per stream, as
//! in etcd) and a bounded channel of batches. Apply calls [`WatchFanout::dispatch`], which
//! asks every hub for its deliveries and `try_send`s them. When a stream's channel is full,
//! the watchers that had events in that batch are removed from its hub and reported to the
//! stream out of band (a list plus a `Notify`) as canceled: a slow consumer loses those
//! watchers and must re-watch from the last revision it saw; it never blocks the log.
//!
//! Watch creation must run inside `Replicator::read` (between applies): then each watcher
//! sees every matching event exactly once, in its replay or live, in revision order.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use coordbench_kv::{Event, KvStore, WatchCreateRequest, WatchDelivery, WatchError, WatchHub};
use tokio::sync::{mpsc, Notify};

/// Why a slow watcher was canceled (no etcd counterpart: etcd buffers instead).
pub const OVERFLOW_REASON: &str =
    "etcdserver: watcher too slow: watch stream buffer overflowed, events were dropped";

/// The events of one apply for one stream, grouped by watcher.
pub type Batch = Vec<WatchDelivery>;

/// A watcher the fan-out canceled on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canceled {
    pub watch_id: i64,
    /// Nonzero when the watcher could not resume because history was compacted.
    pub compact_revision: i64,
    pub reason: String,
}

/// Outcome of [`Subscriber::create`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// Registered; send `replay` (history up to the current revision) before live events.
    Watching { watch_id: i64, replay: Vec<Event> },
    /// `start_revision` is compacted: etcd reports the watch created, then canceled with
    /// `compact_revision`. The watcher keeps its id, receiving nothing, until canceled.
    Compacted {
        watch_id: i64,
        compact_revision: i64,
    },
    /// Refused (duplicate id, empty range): etcd answers created + canceled with the
    /// reason, under no watcher's id (-1).
    Refused { reason: String },
}

#[derive(Default)]
pub struct WatchFanout {
    inner: Mutex<Streams>,
}

#[derive(Default)]
struct Streams {
    next_id: u64,
    streams: BTreeMap<u64, Stream>,
}

struct Stream {
    hub: WatchHub,
    /// Each live watcher's create request, to re-create it after a snapshot restore.
    requests: BTreeMap<i64, WatchCreateRequest>,
    tx: mpsc::Sender<Batch>,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    canceled: Mutex<Vec<Canceled>>,
    notify: Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent data (every update is one call).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Stream {
    /// Cancels the watchers whose batch could not be queued.
    fn overflow(&mut self, batch: &Batch) {
        let mut canceled = lock(&self.shared.canceled);
        for d in batch {
            if self.hub.cancel(d.watch_id) {
                self.requests.remove(&d.watch_id);
                canceled.push(Canceled {
                    watch_id: d.watch_id,
                    compact_revision: 0,
                    reason: OVERFLOW_REASON.to_string(),
                });
            }
        }
        drop(canceled);
        self.shared.notify.notify_one();
    }

    fn send(&mut self, batch: Batch) {
        if batch.is_empty() {
            return;
        }
        if let Err(e) = self.tx.try_send(batch) {
            let batch = match e {
                mpsc::error::TrySendError::Full(b) | mpsc::error::TrySendError::Closed(b) => b,
            };
            self.overflow(&batch);
        }
    }
}

impl WatchFanout {
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a stream whose channel holds up to `capacity` batches.
    pub fn register(self: &Arc<Self>, capacity: usize) -> Subscriber {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let shared = Arc::new(Shared::default());
        let mut g = lock(&self.inner);
        let id = g.next_id;
        g.next_id += 1;
        g.streams.insert(
            id,
            Stream {
                hub: WatchHub::new(),
                requests: BTreeMap::new(),
                tx,
                shared: shared.clone(),
            },
        );
        Subscriber {
            id,
            fanout: self.clone(),
            rx,
            shared,
        }
    }

    /// Routes the events of one apply (called by the state machine, under its lock).
    pub fn dispatch(&self, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        let mut g = lock(&self.inner);
        for s in g.streams.values_mut() {
            let batch = s.hub.dispatch(events);
            s.send(batch);
        }
    }

    /// After a snapshot restore, re-creates every watcher from the revision it had reached,
    /// replaying what the snapshot skipped (or canceling it if that is compacted).
    pub fn resync(&self, store: &KvStore) {
        let mut g = lock(&self.inner);
        for s in g.streams.values_mut() {
            let old = std::mem::take(&mut s.hub);
            let requests = std::mem::take(&mut s.requests);
            let mut batch = Batch::new();
            let mut canceled = Vec::new();
            // Ascending ids: an auto-assigned id 0 comes first and gets id 0 again.
            for (id, req) in requests {
                let mut again = req.clone();
                again.watch_id = id;
                if let Some(done) = old.progress_revision(id) {
                    again.start_revision = done + 1;
                }
                match s.hub.create(store, &again) {
                    Ok(c) => {
                        s.requests.insert(c.watch_id, req);
                        if !c.replay.is_empty() {
                            batch.push(WatchDelivery {
                                watch_id: c.watch_id,
                                events: c.replay,
                            });
                        }
                    }
                    Err(e) => canceled.push(Canceled {
                        watch_id: id,
                        compact_revision: match e {
                            WatchError::Compacted { compact_revision } => compact_revision,
                            WatchError::DuplicateId { .. } | WatchError::EmptyRange => 0,
                        },
                        reason: e.to_string(),
                    }),
                }
            }
            if !canceled.is_empty() {
                lock(&s.shared.canceled).extend(canceled);
                s.shared.notify.notify_one();
            }
            s.send(batch);
        }
    }

    /// Number of registered streams (for tests and status).
    pub fn streams(&self) -> usize {
        lock(&self.inner).streams.len()
    }
}

/// One stream's end of the fan-out; unregisters on drop.
pub struct Subscriber {
    id: u64,
    fanout: Arc<WatchFanout>,
    rx: mpsc::Receiver<Batch>,
    shared: Arc<Shared>,
}

impl Subscriber {
    /// Registers a watcher. Call inside `Replicator::read` with the member's store.
    pub fn create(&self, store: &KvStore, req: &WatchCreateRequest) -> Created {
        let mut g = lock(&self.fanout.inner);
        let Some(s) = g.streams.get_mut(&self.id) else {
            return Created::Refused {
                reason: "etcdserver: watch stream closed".to_string(),
            };
        };
        match s.hub.create(store, req) {
            Ok(c) => {
                s.requests.insert(c.watch_id, req.clone());
                Created::Watching {
                    watch_id: c.watch_id,
                    replay: c.replay,
                }
            }
            Err(WatchError::Compacted { compact_revision }) => {
                // As etcd: the watcher keeps its id until the client cancels it, and never
                // receives anything (its start revision is never reached).
                let dead = WatchCreateRequest {
                    start_revision: i64::MAX,
                    ..req.clone()
                };
                match s.hub.create(store, &dead) {
                    Ok(c) => {
                        s.requests.insert(c.watch_id, dead);
                        Created::Compacted {
                            watch_id: c.watch_id,
                            compact_revision,
                        }
                    }
                    Err(e) => Created::Refused {
                        reason: e.to_string(),
                    },
                }
            }
            Err(e @ (WatchError::DuplicateId { .. } | WatchError::EmptyRange)) => {
                Created::Refused {
                    reason: e.to_string(),
                }
            }
        }
    }

    /// Removes a watcher; false if this stream has none with that id.
    pub fn cancel(&self, watch_id: i64) -> bool {
        let mut g = lock(&self.fanout.inner);
        let Some(s) = g.streams.get_mut(&self.id) else {
            return false;
        };
        s.requests.remove(&watch_id);
        s.hub.cancel(watch_id)
    }

    /// The next batch (cancel-safe). `None` only if the fan-out dropped this stream.
    pub async fn recv(&mut self) -> Option<Batch> {
        self.rx.recv().await
    }

    /// A batch already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<Batch> {
        self.rx.try_recv().ok()
    }

    /// A handle that resolves when the fan-out cancels watchers of this stream; separate
    /// from the subscriber so a task can wait on it while also receiving batches.
    pub fn cancel_signal(&self) -> CancelSignal {
        CancelSignal(self.shared.clone())
    }

    /// The watchers the fan-out canceled since the last call.
    pub fn take_canceled(&self) -> Vec<Canceled> {
        std::mem::take(&mut *lock(&self.shared.canceled))
    }
}

/// See [`Subscriber::cancel_signal`].
pub struct CancelSignal(Arc<Shared>);

impl CancelSignal {
    /// Resolves once per cancellation report (cancel-safe: a report made while nobody
    /// waits is kept for the next call).
    pub async fn wait(&self) {
        self.0.notify.notified().await;
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        lock(&self.fanout.inner).streams.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_kv::{Command, PutRequest};

    fn put(store: &mut KvStore, index: u64, key: &[u8]) -> Vec<Event> {
        let cmd = Command::Put(PutRequest {
            key: key.to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        });
        store.apply(index, &cmd).events
    }

    fn watch(key: &[u8]) -> WatchCreateRequest {
        WatchCreateRequest {
            key: key.to_vec(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn slow_watcher_is_canceled_not_waited_for() {
        let fanout = Arc::new(WatchFanout::new());
        let mut store = KvStore::new();
        let mut slow = fanout.register(2);
        let mut fast = fanout.register(64);
        assert!(matches!(
            slow.create(&store, &watch(b"a")),
            Created::Watching { watch_id: 0, .. }
        ));
        assert!(matches!(
            slow.create(&store, &watch(b"b")),
            Created::Watching { watch_id: 1, .. }
        ));
        assert!(matches!(
            fast.create(&store, &watch(b"a")),
            Created::Watching { .. }
        ));
        for i in 1..=5 {
            let events = put(&mut store, i, b"a");
            fanout.dispatch(&events);
        }
        // The slow stream got two batches, then lost watcher 0; watcher 1 still works.
        assert_eq!(
            slow.take_canceled()
                .iter()
                .map(|c| c.watch_id)
                .collect::<Vec<_>>(),
            vec![0]
        );
        assert!(slow.try_recv().is_some() && slow.try_recv().is_some());
        let events = put(&mut store, 6, b"b");
        fanout.dispatch(&events);
        let b = slow.try_recv().expect("b's event queued after the drain");
        assert_eq!(b[0].watch_id, 1);
        assert!(!slow.cancel(0) && slow.cancel(1));
        let mut n = 0;
        while fast.try_recv().is_some() {
            n += 1;
        }
        assert_eq!(n, 5);
        drop(slow);
        assert_eq!(fanout.streams(), 1);
    }

    #[test]
    fn compacted_start_keeps_its_id_until_canceled() {
        let fanout = Arc::new(WatchFanout::new());
        let mut store = KvStore::new();
        for i in 1..=3 {
            put(&mut store, i, b"k");
        }
        store.apply(
            4,
            &Command::Compact(coordbench_kv::CompactionRequest {
                revision: 3,
                physical: false,
            }),
        );
        let mut sub = fanout.register(4);
        let req = WatchCreateRequest {
            start_revision: 2,
            ..watch(b"k")
        };
        assert_eq!(
            sub.create(&store, &req),
            Created::Compacted {
                watch_id: 0,
                compact_revision: 3
            }
        );
        assert!(matches!(
            sub.create(&store, &watch(b"k")),
            Created::Watching { watch_id: 1, .. }
        ));
        let dup = WatchCreateRequest {
            watch_id: 1,
            ..watch(b"k")
        };
        assert!(matches!(sub.create(&store, &dup), Created::Refused { .. }));
        let events = put(&mut store, 5, b"k");
        fanout.dispatch(&events);
        let b = sub.try_recv().expect("watcher 1's event");
        assert_eq!(b.iter().map(|d| d.watch_id).collect::<Vec<_>>(), vec![1]);
        assert!(
            sub.cancel(0),
            "the compacted watcher holds id 0 until canceled"
        );
    }

    #[test]
    fn resync_replays_what_a_restore_skipped() {
        let fanout = Arc::new(WatchFanout::new());
        let mut leader = KvStore::new();
        let mut follower = KvStore::new();
        let mut sub = fanout.register(8);
        assert!(matches!(
            sub.create(&follower, &watch(b"k")),
            Created::Watching { .. }
        ));
        for i in 1..=3 {
            put(&mut leader, i, b"k");
        }
        follower.restore(&leader.snapshot()).unwrap();
        fanout.resync(&follower);
        let b = sub.try_recv().expect("replay after restore");
        assert_eq!(
            b[0].events.iter().map(Event::revision).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        let events = put(&mut follower, 4, b"k");
        fanout.dispatch(&events);
        assert_eq!(sub.try_recv().expect("live")[0].events[0].revision(), 5);
    }
}
