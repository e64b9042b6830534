//! The session's one-shot watches, keyed by server path and kind, as ZooKeeper's own client
//! keeps them: a watch is registered when the reply that set it arrives (so before any
//! notification that follows it on the connection), fires once, and survives reconnects
//! (the session re-sends them in SetWatches).
//!
//! Which watches an event fires follows the server's own rule: created and data-changed
//! fire data and exists watches; deleted fires data, exists and child watches;
//! children-changed fires child watches.

use std::collections::HashMap;

use tokio::sync::oneshot;

use super::{EventType, SessionState, WatchedEvent};

/// What a watch was set by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum WatchKind {
    /// getData on an existing node.
    Data,
    /// exists on a missing node (exists on an existing node sets a data watch).
    Exist,
    /// getChildren.
    Child,
}

/// A watch's sender, and the path to report (without the chroot).
struct Waiter {
    client_path: String,
    fire: oneshot::Sender<WatchedEvent>,
}

#[derive(Default)]
pub(super) struct Watches {
    by_path: HashMap<(String, WatchKind), Vec<Waiter>>,
}

impl Watches {
    pub(super) fn add(
        &mut self,
        server_path: String,
        kind: WatchKind,
        client_path: String,
        fire: oneshot::Sender<WatchedEvent>,
    ) {
        // Waiters whose receiver is gone (a cancelled wait) are dropped as we pass.
        let waiters = self.by_path.entry((server_path, kind)).or_default();
        waiters.retain(|w| !w.fire.is_closed());
        waiters.push(Waiter { client_path, fire });
    }

    /// Fires (and removes) the watches `event_type` on `server_path` triggers.
    pub(super) fn fire(&mut self, server_path: &str, event_type: EventType) {
        let kinds: &[WatchKind] = match event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                &[WatchKind::Data, WatchKind::Exist]
            }
            EventType::NodeDeleted => &[WatchKind::Data, WatchKind::Exist, WatchKind::Child],
            EventType::NodeChildrenChanged => &[WatchKind::Child],
            EventType::Session => &[],
        };
        for kind in kinds {
            if let Some(waiters) = self.by_path.remove(&(server_path.to_string(), *kind)) {
                for w in waiters {
                    let _ = w.fire.send(WatchedEvent {
                        event_type,
                        session_state: SessionState::Connected,
                        path: w.client_path,
                    });
                }
            }
        }
    }

    /// Ends every watch with a session event (expired or closed).
    pub(super) fn end_all(&mut self, state: SessionState) {
        for (_, waiters) in self.by_path.drain() {
            for w in waiters {
                let _ = w.fire.send(WatchedEvent {
                    event_type: EventType::Session,
                    session_state: state,
                    path: w.client_path,
                });
            }
        }
    }

    /// The server paths to re-register after a reconnect: (data, exist, child). Paths whose
    /// every waiter gave up are forgotten first.
    pub(super) fn paths(&mut self) -> (Vec<String>, Vec<String>, Vec<String>) {
        self.by_path.retain(|_, ws| {
            ws.retain(|w| !w.fire.is_closed());
            !ws.is_empty()
        });
        let (mut data, mut exist, mut child) = (Vec::new(), Vec::new(), Vec::new());
        for (path, kind) in self.by_path.keys() {
            match kind {
                WatchKind::Data => data.push(path.clone()),
                WatchKind::Exist => exist.push(path.clone()),
                WatchKind::Child => child.push(path.clone()),
            }
        }
        (data, exist, child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(w: &mut Watches, path: &str, kind: WatchKind) -> oneshot::Receiver<WatchedEvent> {
        let (tx, rx) = oneshot::channel();
        w.add(path.into(), kind, path.into(), tx);
        rx
    }

    #[test]
    fn events_fire_the_kinds_the_server_names() {
        let mut w = Watches::default();
        let mut data = watch(&mut w, "/a", WatchKind::Data);
        let mut child = watch(&mut w, "/a", WatchKind::Child);
        w.fire("/a", EventType::NodeDataChanged);
        assert_eq!(
            data.try_recv().unwrap().event_type,
            EventType::NodeDataChanged
        );
        assert!(
            child.try_recv().is_err(),
            "a data change does not fire child watches"
        );
        w.fire("/a", EventType::NodeDeleted);
        assert_eq!(child.try_recv().unwrap().event_type, EventType::NodeDeleted);
        assert_eq!(w.paths(), (vec![], vec![], vec![]), "watches fire once");
    }

    #[test]
    fn abandoned_waiters_are_not_re_registered() {
        let mut w = Watches::default();
        drop(watch(&mut w, "/gone", WatchKind::Exist));
        let _kept = watch(&mut w, "/kept", WatchKind::Exist);
        assert_eq!(w.paths().1, vec!["/kept".to_string()]);
        w.end_all(SessionState::Expired);
        assert_eq!(w.paths(), (vec![], vec![], vec![]));
    }
}
