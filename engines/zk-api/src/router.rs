//! [`Router`]: this member's client connections, their watches, and the delivery of each
//! applied command's watch events to them, without ever making apply wait.
//!
//! Each connection registers an outbound queue (bounded) that its writer task drains; its
//! replies go through the same queue, so a notification queued during an apply precedes
//! every reply computed after that apply (ZooKeeper's rule that a client sees the event
//! before the new data). Apply calls [`Router::dispatch`], which `try_send`s one
//! notification per triggered watcher, in zxid order. A connection whose queue is full is
//! closed and its watches dropped: the client reconnects and re-sets its watches, and
//! SetWatches fires what it missed. Connections of sessions that ended (closed or expired)
//! are closed too, so their clients learn of the expiry when they reconnect.
//!
//! A watcher is told of an event only if its connection's ids have READ in the event's ACL
//! ([`coordbench_tree::WatchEvent::acl`]), as ZooKeeper checks at delivery; a one-shot
//! watch that fired for a connection without it is gone all the same.
//!
//! Watch registration must run inside `Replicator::read` (between applies) so that no event
//! falls between a read and its watch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use coordbench_tree::acl::{perm, permits};
use coordbench_tree::{Applied, DataTree, Id, WatchKind, WatchManager, WatchSet};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::reply::notification_frame;

/// A connection's id on this member.
pub type ConnId = u64;

/// The ids a connection holds now (its address, its addauth digests), for ACL checks.
pub type ConnIds = Arc<dyn Fn() -> Vec<Id> + Send + Sync>;

struct Conn {
    session: i64,
    tx: mpsc::Sender<Vec<u8>>,
    close: CancellationToken,
    ids: ConnIds,
}

#[derive(Default)]
struct Inner {
    next_id: ConnId,
    conns: BTreeMap<ConnId, Conn>,
    by_session: BTreeMap<i64, BTreeSet<ConnId>>,
    watches: WatchManager<ConnId>,
}

impl Inner {
    fn close(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get(&id) {
            c.close.cancel();
        }
        self.watches.remove_watcher(id);
    }
}

#[derive(Default)]
pub struct Router {
    inner: Mutex<Inner>,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // Every update is one call that leaves the maps consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Router {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a connection of `session` holding `ids`; any other connection of the same
    /// session on this member is closed (the session moved, as ZooKeeper closes the older
    /// connection).
    pub fn register(
        &self,
        session: i64,
        tx: mpsc::Sender<Vec<u8>>,
        close: CancellationToken,
        ids: ConnIds,
    ) -> ConnId {
        let mut g = lock(&self.inner);
        let id = g.next_id;
        g.next_id += 1;
        let older: Vec<ConnId> = g
            .by_session
            .get(&session)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for old in older {
            g.close(old);
        }
        g.conns.insert(
            id,
            Conn {
                session,
                tx,
                close,
                ids,
            },
        );
        g.by_session.entry(session).or_default().insert(id);
        id
    }

    /// Takes a connection out of its session's set, so the end of the session (its own
    /// closeSession) does not close it before the reply is written: ZooKeeper answers a
    /// closeSession, then closes the connection.
    pub fn closing(&self, id: ConnId) {
        let mut g = lock(&self.inner);
        let Some(session) = g.conns.get(&id).map(|c| c.session) else {
            return;
        };
        if let Some(set) = g.by_session.get_mut(&session) {
            set.remove(&id);
            if set.is_empty() {
                g.by_session.remove(&session);
            }
        }
    }

    /// Removes a connection and its watches.
    pub fn unregister(&self, id: ConnId) {
        let mut g = lock(&self.inner);
        g.watches.remove_watcher(id);
        if let Some(c) = g.conns.remove(&id) {
            if let Some(set) = g.by_session.get_mut(&c.session) {
                set.remove(&id);
                if set.is_empty() {
                    g.by_session.remove(&c.session);
                }
            }
        }
    }

    /// Routes the events of one apply and closes the connections of ended sessions
    /// (called by the state machine; never blocks).
    pub fn dispatch(&self, applied: &Applied) {
        if applied.events.is_empty() && applied.ended_sessions.is_empty() {
            return;
        }
        let mut g = lock(&self.inner);
        for event in &applied.events {
            let fired = g.watches.trigger(event);
            if fired.is_empty() {
                continue;
            }
            let frame = notification_frame(event);
            for id in fired {
                let full = g.conns.get(&id).is_some_and(|c| {
                    permits(&event.acl, perm::READ, &(c.ids)())
                        && c.tx.try_send(frame.clone()).is_err()
                });
                if full {
                    tracing::debug!(conn = id, "notification queue full; closing connection");
                    g.close(id);
                }
            }
        }
        self.close_sessions_locked(&mut g, &applied.ended_sessions);
    }

    /// Closes the connections of these sessions on this member.
    pub fn close_sessions(&self, sessions: &[i64]) {
        let mut g = lock(&self.inner);
        self.close_sessions_locked(&mut g, sessions);
    }

    fn close_sessions_locked(&self, g: &mut Inner, sessions: &[i64]) {
        for s in sessions {
            let ids: Vec<ConnId> = g
                .by_session
                .get(s)
                .map(|set| set.iter().copied().collect())
                .unwrap_or_default();
            for id in ids {
                g.close(id);
            }
        }
    }

    /// Closes every connection (after a snapshot restore, which may skip events: clients
    /// reconnect and SetWatches catches them up).
    pub fn close_all(&self) {
        let mut g = lock(&self.inner);
        let ids: Vec<ConnId> = g.conns.keys().copied().collect();
        for id in ids {
            g.close(id);
        }
    }

    pub fn add_watch(&self, path: &str, kind: WatchKind, id: ConnId) {
        lock(&self.inner).watches.add(path, kind, id);
    }

    /// Removes `kinds` of watches on `path`; false if there was none of them.
    pub fn remove_watches(&self, path: &str, kinds: &[WatchKind], id: ConnId) -> bool {
        let mut g = lock(&self.inner);
        let mut any = false;
        for k in kinds {
            any |= g.watches.remove(path, *k, id);
        }
        any
    }

    pub fn has_watches(&self, path: &str, kinds: &[WatchKind], id: ConnId) -> bool {
        let g = lock(&self.inner);
        kinds.iter().any(|k| g.watches.contains(path, *k, id))
    }

    /// SetWatches: re-registers and queues the notifications of what changed since
    /// `rel_zxid`. False if the queue overflowed (the connection is then closed).
    pub fn resume(&self, tree: &DataTree, id: ConnId, rel_zxid: i64, set: &WatchSet) -> bool {
        let mut g = lock(&self.inner);
        let missed = g.watches.resume(tree, id, rel_zxid, set);
        let Some(tx) = g.conns.get(&id).map(|c| c.tx.clone()) else {
            return false;
        };
        for event in &missed {
            if tx.try_send(notification_frame(event)).is_err() {
                g.close(id);
                return false;
            }
        }
        true
    }

    pub fn connection_count(&self) -> usize {
        lock(&self.inner).conns.len()
    }

    pub fn watch_count(&self) -> usize {
        lock(&self.inner).watches.len()
    }

    pub fn watched_paths(&self) -> usize {
        lock(&self.inner).watches.path_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_tree::{EventType, WatchEvent};

    fn applied(events: Vec<WatchEvent>, ended: Vec<i64>) -> Applied {
        Applied {
            zxid: 9,
            result: Ok(coordbench_tree::Response::Touched { missing: vec![] }),
            events,
            ended_sessions: ended,
        }
    }

    fn anyone() -> ConnIds {
        Arc::new(Vec::new)
    }

    fn changed(path: &str) -> WatchEvent {
        WatchEvent {
            kind: EventType::NodeDataChanged,
            path: path.into(),
            zxid: 9,
            acl: Vec::new(),
        }
    }

    #[test]
    fn a_full_queue_closes_its_connection_only() {
        let router = Router::new();
        let (slow_tx, _slow_rx) = mpsc::channel(1);
        let (fast_tx, mut fast_rx) = mpsc::channel(8);
        let (slow_close, fast_close) = (CancellationToken::new(), CancellationToken::new());
        let slow = router.register(1, slow_tx.clone(), slow_close.clone(), anyone());
        let fast = router.register(2, fast_tx, fast_close.clone(), anyone());
        for id in [slow, fast] {
            router.add_watch("/a", WatchKind::Persistent, id);
        }
        slow_tx.try_send(vec![0]).unwrap(); // the slow client's queue is now full
        router.dispatch(&applied(vec![changed("/a")], vec![]));
        assert!(slow_close.is_cancelled());
        assert!(!fast_close.is_cancelled());
        assert_eq!(
            router.watch_count(),
            1,
            "the closed connection's watches are gone"
        );
        assert!(
            fast_rx.try_recv().is_ok(),
            "the other connection got its notification"
        );
        router.unregister(slow);
        assert_eq!(router.connection_count(), 1);
    }

    #[test]
    fn ended_sessions_and_moves_close_connections() {
        let router = Router::new();
        let (tx, _rx) = mpsc::channel(8);
        let first = CancellationToken::new();
        router.register(7, tx.clone(), first.clone(), anyone());
        let second = CancellationToken::new();
        router.register(7, tx.clone(), second.clone(), anyone());
        assert!(
            first.is_cancelled(),
            "the session moved to the new connection"
        );
        router.dispatch(&applied(vec![], vec![7]));
        assert!(second.is_cancelled(), "the session ended");
    }
}
