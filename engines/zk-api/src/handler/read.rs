//! Reads, answered from this member's tree inside `Replicator::read`: exists, getData,
//! getChildren(2), getACL, multiRead, getEphemerals, getAllChildrenNumber, and `sync`
//! (a read behind a barrier). READ is checked against the connection's ids; exists,
//! getData and getChildren may set a one-shot watch in the same read.

use coordbench_node::Replicator;
use coordbench_tree::acl::perm;
use coordbench_tree::{Acl, DataTree, Id, TreeError, WatchKind};

use super::{err, ok, ConnCtx, Flow};
use crate::options::WrongAnswer;
use crate::proto::PathWatch;
use crate::reply::{ReadResult, ReplyBody};
use crate::request::ReadOp;
use crate::router::ConnId;
use crate::state_machine::TreeStateMachine;

/// READ on an existing `path` for `ids` (NoNode first, as getData answers).
pub(super) fn readable(sm: &TreeStateMachine, path: &str, ids: &[Id]) -> Result<(), TreeError> {
    sm.tree().check_perm(path, perm::READ, ids)
}

/// `get` of `r.path` once READ is checked for `ids`; the `kind` watch `r` asks for is
/// set only when the read succeeds (exists sets its watch on a missing node too).
fn watched_read<'t, T>(
    sm: &'t TreeStateMachine,
    conn: ConnId,
    ids: &[Id],
    r: &PathWatch,
    kind: WatchKind,
    get: impl FnOnce(&'t DataTree, &str) -> Result<T, TreeError>,
) -> Result<T, TreeError> {
    let value = readable(sm, &r.path, ids).and_then(|()| get(sm.tree(), &r.path))?;
    if r.watch {
        sm.router().add_watch(&r.path, kind, conn);
    }
    Ok(value)
}

/// What getACL shows a reader without ADMIN: digest hashes masked, as ZooKeeper 3.8 does.
fn redacted(acl: Vec<Acl>) -> Vec<Acl> {
    acl.into_iter()
        .map(|mut a| {
            if a.scheme == "digest" {
                if let Some((user, _)) = a.id.split_once(':') {
                    a.id = format!("{user}:x");
                }
            }
            a
        })
        .collect()
}

impl<R: Replicator<TreeStateMachine>> ConnCtx<R> {
    pub(super) async fn exists(&self, x: i32, r: PathWatch) -> Flow {
        self.read(x, move |sm, id| {
            // exists sets a watch whether or not the node exists.
            if r.watch {
                sm.router().add_watch(&r.path, WatchKind::Data, id);
            }
            match sm.tree().stat(&r.path) {
                Some(stat) => ok(ReplyBody::Stat(stat)),
                None => err(&TreeError::NoNode),
            }
        })
        .await
    }

    pub(super) async fn get_data(&self, x: i32, r: PathWatch) -> Flow {
        let ids = self.ids();
        let wrong = self.core.options.wrong_answer == Some(WrongAnswer::GetDataChildren);
        self.read(x, move |sm, id| {
            match watched_read(sm, id, &ids, &r, WatchKind::Data, DataTree::get_data) {
                Ok((data, mut stat)) => {
                    // Test-only: see WrongAnswer.
                    stat.num_children += i32::from(wrong);
                    ok(ReplyBody::Data {
                        data: data.map(<[u8]>::to_vec),
                        stat,
                    })
                }
                Err(e) => err(&e),
            }
        })
        .await
    }

    /// getChildren, or getChildren2 (`with_stat`).
    pub(super) async fn get_children(&self, x: i32, r: PathWatch, with_stat: bool) -> Flow {
        let ids = self.ids();
        self.read(x, move |sm, id| {
            match watched_read(sm, id, &ids, &r, WatchKind::Child, DataTree::children) {
                Ok((children, stat)) => ok(if with_stat {
                    ReplyBody::Children2 { children, stat }
                } else {
                    ReplyBody::Strings(children)
                }),
                Err(e) => err(&e),
            }
        })
        .await
    }

    pub(super) async fn get_acl(&self, x: i32, path: String) -> Flow {
        let ids = self.ids();
        self.read(x, move |sm, _| {
            let t = sm.tree();
            match t
                .check_perm(&path, perm::READ | perm::ADMIN, &ids)
                .and_then(|()| t.acl(&path))
            {
                Ok((acl, stat)) => {
                    let admin = t.check_perm(&path, perm::ADMIN, &ids).is_ok();
                    let acl = if admin { acl } else { redacted(acl) };
                    ok(ReplyBody::Acl { acl, stat })
                }
                Err(e) => err(&e),
            }
        })
        .await
    }

    pub(super) async fn sync(&self, x: i32, path: String) -> Flow {
        if let Err(e) = self.core.replicator.read_barrier().await {
            return self.unavailable(&e.into());
        }
        self.read(x, move |_, _| ok(ReplyBody::Path(path))).await
    }

    /// multiRead: every op answered, a failed one with its error, from one state.
    pub(super) async fn multi_read(&self, x: i32, ops: Vec<ReadOp>) -> Flow {
        let ids = self.ids();
        self.read(x, move |sm, _| {
            let t = sm.tree();
            let results = ops
                .iter()
                .map(|o| match o {
                    ReadOp::GetData(p) => {
                        match readable(sm, p, &ids).and_then(|()| t.get_data(p)) {
                            Ok((data, stat)) => ReadResult::Data {
                                data: data.map(<[u8]>::to_vec),
                                stat,
                            },
                            Err(e) => ReadResult::Error(e.code()),
                        }
                    }
                    ReadOp::GetChildren(p) => {
                        match readable(sm, p, &ids).and_then(|()| t.children(p)) {
                            Ok((c, _)) => ReadResult::Children(c),
                            Err(e) => ReadResult::Error(e.code()),
                        }
                    }
                })
                .collect();
            ok(ReplyBody::MultiRead(results))
        })
        .await
    }

    /// getEphemerals: this session's ephemeral nodes under `prefix`.
    pub(super) async fn get_ephemerals(&self, x: i32, prefix: String) -> Flow {
        let session = self.session;
        self.read(x, move |sm, _| {
            ok(ReplyBody::Strings(sm.tree().ephemerals(session, &prefix)))
        })
        .await
    }

    pub(super) async fn get_all_children_number(&self, x: i32, path: String) -> Flow {
        let ids = self.ids();
        self.read(x, move |sm, _| {
            match readable(sm, &path, &ids).and_then(|()| sm.tree().descendant_count(&path)) {
                Ok(n) => ok(ReplyBody::Int(i32::try_from(n).unwrap_or(i32::MAX))),
                Err(e) => err(&e),
            }
        })
        .await
    }
}
