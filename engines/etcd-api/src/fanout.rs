//! Watch fan-out: routes the events of every apply to this member's watch streams without
//! ever making apply wait.
//!
//! Each watch stream (a gRPC `Watch` call, or an internal waiter of the Lock and Election
//! services) registers a [`Subscriber`]: its own [`WatchHub`] (watch ids are per stream, as
//! in etcd) and a queue of batches bounded by the deliveries it holds. Apply calls
//! [`WatchFanout::dispatch`], which asks every hub for its deliveries and queues them
//! without waiting. When a stream's queue is full, the watchers that had events in that
//! batch are set aside, as etcd moves a slow watcher out of its synced group: each is paused
//! in the hub at the first revision it was not sent, and the stream is told out of band (a
//! list plus a `Notify`). The stream sends what it had queued, then takes each watcher back
//! ([`Subscriber::resume`]): the history replay fills the gap, in order, and the watcher is
//! live again. A slow consumer never
//! blocks the log, and what waits for it is bounded by the queue plus one replay at a time,
//! not by how far it has fallen behind.
//!
//! Watch creation must run inside `Replicator::read` (between applies): then each watcher
//! sees every matching event exactly once, in its replay or live, in revision order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use coordbench_kv::{Event, KvStore, WatchCreateRequest, WatchDelivery, WatchError, WatchHub};
use tokio::sync::{mpsc, Notify};

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
    tx: mpsc::UnboundedSender<Batch>,
    /// Most deliveries queued at once; a batch into an empty queue is always taken.
    capacity: usize,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    canceled: Mutex<Vec<Canceled>>,
    /// Ids of the watchers set aside (paused in the hub) as too slow.
    behind: Mutex<Vec<i64>>,
    notify: Notify,
    /// Deliveries in the queue now.
    queued: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent data (every update is one call).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Stream {
    /// Sets aside the watchers whose batch could not be queued, each to resume from the
    /// first revision of its part of that batch.
    fn overflow(&mut self, batch: Batch) {
        let mut behind = lock(&self.shared.behind);
        for d in batch {
            let Some(first) = d.events.first().map(Event::revision) else {
                continue;
            };
            if self.hub.pause(d.watch_id, first) {
                behind.push(d.watch_id);
            }
        }
        drop(behind);
        self.shared.notify.notify_one();
    }

    fn send(&mut self, batch: Batch) {
        if batch.is_empty() {
            return;
        }
        let queued = self.shared.queued.load(Ordering::Acquire);
        if queued > 0 && queued + batch.len() > self.capacity {
            self.overflow(batch);
            return;
        }
        let len = batch.len();
        self.shared.queued.fetch_add(len, Ordering::AcqRel);
        if self.tx.send(batch).is_err() {
            // The subscriber is gone; it unregisters itself on drop.
            self.shared.queued.fetch_sub(len, Ordering::AcqRel);
        }
    }
}

impl WatchFanout {
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a stream whose queue holds up to `capacity` deliveries (one watcher's events
    /// of one apply each).
    pub fn register(self: &Arc<Self>, capacity: usize) -> Subscriber {
        let (tx, rx) = mpsc::unbounded_channel();
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
                capacity: capacity.max(1),
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
            for (id, req) in requests {
                let mut again = req.clone();
                if let Some(done) = old.progress_revision(id) {
                    again.start_revision = done + 1;
                }
                match s.hub.create_with_id(store, &again, id) {
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
    rx: mpsc::UnboundedReceiver<Batch>,
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

    /// Takes back a watcher set aside as too slow ([`Subscriber::take_behind`]): the
    /// history it missed, then live events. Call inside `Replicator::read`, after sending
    /// what was queued before it was set aside. `Compacted` if that history is gone (the
    /// watcher keeps its id, receiving nothing, until canceled).
    pub fn resume(&self, store: &KvStore, watch_id: i64) -> Created {
        let mut g = lock(&self.fanout.inner);
        let Some(s) = g.streams.get_mut(&self.id) else {
            return Created::Refused {
                reason: "etcdserver: watch stream closed".to_string(),
            };
        };
        match s.hub.resume(store, watch_id) {
            Ok(replay) => Created::Watching { watch_id, replay },
            Err(WatchError::Compacted { compact_revision }) => Created::Compacted {
                watch_id,
                compact_revision,
            },
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
        let batch = self.rx.recv().await?;
        self.taken(&batch);
        Some(batch)
    }

    /// A batch already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<Batch> {
        let batch = self.rx.try_recv().ok()?;
        self.taken(&batch);
        Some(batch)
    }

    /// Batches queued now: those a drain must send before resuming watchers set aside.
    pub fn queued_batches(&self) -> usize {
        self.rx.len()
    }

    fn taken(&self, batch: &Batch) {
        self.shared.queued.fetch_sub(batch.len(), Ordering::AcqRel);
    }

    /// A handle that resolves when the fan-out cancels or sets aside watchers of this
    /// stream; separate from the subscriber so a task can wait on it while also receiving
    /// batches.
    pub fn cancel_signal(&self) -> CancelSignal {
        CancelSignal(self.shared.clone())
    }

    /// The watchers the fan-out canceled since the last call.
    pub fn take_canceled(&self) -> Vec<Canceled> {
        std::mem::take(&mut *lock(&self.shared.canceled))
    }

    /// The watchers set aside as too slow since the last call, to [`Subscriber::resume`].
    pub fn take_behind(&self) -> Vec<i64> {
        std::mem::take(&mut *lock(&self.shared.behind))
    }

    /// Whether any watcher is set aside and not yet taken back.
    pub fn has_behind(&self) -> bool {
        !lock(&self.shared.behind).is_empty()
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

    fn revisions(batch: &Batch, watch_id: i64) -> Vec<i64> {
        batch
            .iter()
            .filter(|d| d.watch_id == watch_id)
            .flat_map(|d| d.events.iter().map(Event::revision))
            .collect()
    }

    #[test]
    fn slow_watcher_is_set_aside_then_resumed_from_what_it_missed() {
        let fanout = Arc::new(WatchFanout::new());
        let mut store = KvStore::new();
        // Two deliveries queued at most.
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
        // Revisions 2 and 3 were queued; at 4 watcher 0 was set aside, not canceled.
        assert_eq!(slow.take_behind(), vec![0]);
        assert!(slow.take_canceled().is_empty());
        assert!(!slow.has_behind(), "taken");
        let queued: Vec<i64> = std::iter::from_fn(|| slow.try_recv())
            .flat_map(|b| revisions(&b, 0))
            .collect();
        assert_eq!(queued, vec![2, 3]);
        // Set aside, it gets nothing live; watcher 1 still does.
        let events = put(&mut store, 6, b"b");
        fanout.dispatch(&events);
        let b = slow.try_recv().expect("b's event");
        assert_eq!(b.iter().map(|d| d.watch_id).collect::<Vec<_>>(), vec![1]);
        fanout.dispatch(&put(&mut store, 7, b"a"));
        assert!(slow.try_recv().is_none(), "nothing live while set aside");
        // Resumed: the missed history (4 to 6, and 8), then live events again.
        match slow.resume(&store, 0) {
            Created::Watching {
                watch_id: 0,
                replay,
            } => assert_eq!(
                replay.iter().map(Event::revision).collect::<Vec<_>>(),
                vec![4, 5, 6, 8]
            ),
            other => panic!("resume: {other:?}"),
        }
        fanout.dispatch(&put(&mut store, 8, b"a"));
        assert_eq!(revisions(&slow.try_recv().expect("live"), 0), vec![9]);
        // The fast stream was never held up.
        let fast_revs: Vec<i64> = std::iter::from_fn(|| fast.try_recv())
            .flat_map(|b| b.into_iter().flat_map(|d| d.events))
            .map(|e| e.revision())
            .collect();
        assert_eq!(fast_revs, vec![2, 3, 4, 5, 6, 8, 9]);
        assert!(slow.cancel(0) && slow.cancel(1));
        drop(slow);
        assert_eq!(fanout.streams(), 1);
    }

    #[test]
    fn a_watcher_set_aside_past_a_compaction_is_canceled_with_its_revision() {
        let fanout = Arc::new(WatchFanout::new());
        let mut store = KvStore::new();
        let mut sub = fanout.register(1);
        assert!(matches!(
            sub.create(&store, &watch(b"k")),
            Created::Watching { watch_id: 0, .. }
        ));
        for i in 1..=3 {
            fanout.dispatch(&put(&mut store, i, b"k"));
        }
        assert_eq!(sub.take_behind(), vec![0]);
        store.apply(
            4,
            &Command::Compact(coordbench_kv::CompactionRequest {
                revision: 4,
                physical: false,
            }),
        );
        assert_eq!(
            sub.resume(&store, 0),
            Created::Compacted {
                watch_id: 0,
                compact_revision: 4
            }
        );
        assert!(sub.try_recv().is_some(), "revision 2, queued before");
        fanout.dispatch(&put(&mut store, 5, b"k"));
        assert!(sub.try_recv().is_none(), "a compacted watcher gets nothing");
        assert!(sub.cancel(0), "it holds id 0 until canceled");
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
