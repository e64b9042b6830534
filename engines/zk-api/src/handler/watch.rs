//! Watch requests: setWatches (a reconnecting client's watches, with the events it
//! missed), addWatch (persistent watches), removeWatches and checkWatches. Each runs inside
//! `Replicator::read`, so no event falls between the state it saw and its registration.

use coordbench_node::Replicator;
use coordbench_tree::{code, TreeError, WatchKind, WatchSet};

use super::read::readable;
use super::{err, ok, ConnCtx, Flow};
use crate::proto::{xid, PathMode, SetWatches};
use crate::reply::ReplyBody;
use crate::state_machine::TreeStateMachine;

/// Watch kinds named by a removeWatches / checkWatches type.
fn watcher_kinds(kind: i32) -> Option<&'static [WatchKind]> {
    Some(match kind {
        1 => &[WatchKind::Child],
        2 => &[WatchKind::Data],
        3 => &[
            WatchKind::Data,
            WatchKind::Child,
            WatchKind::Persistent,
            WatchKind::PersistentRecursive,
        ],
        4 => &[WatchKind::Persistent],
        5 => &[WatchKind::PersistentRecursive],
        _ => return None,
    })
}

impl<R: Replicator<TreeStateMachine>> ConnCtx<R> {
    /// setWatches(2), answered on its reserved xid.
    pub(super) async fn set_watches(&self, sw: SetWatches) -> Flow {
        let set = WatchSet {
            data: sw.data,
            exist: sw.exist,
            child: sw.child,
            persistent: sw.persistent,
            persistent_recursive: sw.persistent_recursive,
        };
        let rel = sw.relative_zxid;
        // Missed events are queued inside the read, before this reply.
        self.read(xid::SET_WATCHES, move |sm, id| {
            sm.router().resume(sm.tree(), id, rel, &set);
            ok(ReplyBody::Empty)
        })
        .await
    }

    pub(super) async fn add_watch(&self, x: i32, PathMode { path, mode }: PathMode) -> Flow {
        // ZooKeeper checks READ on an existing node; a missing one may be watched.
        if let Some(e) = self.unreadable_existing(&path) {
            return self.read(x, move |_, _| err(&e)).await;
        }
        let kind = match mode {
            0 => WatchKind::Persistent,
            1 => WatchKind::PersistentRecursive,
            _ => {
                return self
                    .read(x, |_, _| (code::BAD_ARGUMENTS, ReplyBody::Empty))
                    .await
            }
        };
        self.read(x, move |sm, id| {
            sm.router().add_watch(&path, kind, id);
            // ZooKeeper answers addWatch with ErrorResponse(0), which its Java client
            // reads (an empty body is an EOF there, and the connection is dropped).
            ok(ReplyBody::Int(0))
        })
        .await
    }

    /// removeWatches (`remove`) or checkWatches: NO_WATCHER unless this connection has a
    /// watch on `path` of a kind the watcher type names.
    pub(super) async fn remove_or_check_watches(&self, x: i32, r: PathMode, remove: bool) -> Flow {
        let Some(kinds) = watcher_kinds(r.mode) else {
            return self
                .read(x, |_, _| (code::BAD_ARGUMENTS, ReplyBody::Empty))
                .await;
        };
        self.read(x, move |sm, id| {
            let found = if remove {
                sm.router().remove_watches(&r.path, kinds, id)
            } else {
                sm.router().has_watches(&r.path, kinds, id)
            };
            if found {
                ok(ReplyBody::Empty)
            } else {
                (code::NO_WATCHER, ReplyBody::Empty)
            }
        })
        .await
    }

    /// NoAuth if `path` exists and this connection may not read it.
    fn unreadable_existing(&self, path: &str) -> Option<TreeError> {
        let ids = self.ids();
        match self.core.replicator.read(|sm| readable(sm, path, &ids)) {
            Err(TreeError::NoAuth) => Some(TreeError::NoAuth),
            _ => None,
        }
    }
}
