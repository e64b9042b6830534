//! Serving one request of a connection: reads locally, writes through `propose`.
//!
//! Reads (and watch registrations) run inside `Replicator::read`, and their reply is queued
//! there too, through a slot reserved beforehand: so a reply never overtakes the
//! notification of an event its data already reflects, and no event falls between a read
//! and the watch it sets. Reads are sequentially consistent: one connection talks to one
//! member, whose state only moves forward, and a reconnect is refused by a member that is
//! behind the zxid the client has seen. `sync` waits for this member to apply everything
//! committed before it (a read barrier). Writes are proposed and answered from this
//! member's own apply, at the command's zxid.

use std::net::SocketAddr;
use std::sync::Arc;

use coordbench_node::{NodeError, Replicator};
use coordbench_tree::acl::perm;
use coordbench_tree::{
    code, Command, CreateMode, Id, MultiOutcome, Op, OpResult, Response, TreeError, WatchKind,
    WatchSet,
};
use tokio::sync::mpsc;

use crate::auth::ConnAuth;
use crate::core::{now_ms, Core, ProposeError};
use crate::proto::{op, xid, AuthPacket, CreateRequest, PathMode, RequestHeader};
use crate::reply::{reply_frame, MultiResult, ReadResult, ReplyBody};
use crate::request::{MultiOp, ReadOp, Request};
use crate::router::ConnId;
use crate::state_machine::TreeStateMachine;
use crate::wire_acl;

/// What the connection does after a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    /// Close the connection (closeSession answered, or the member cannot serve: the client
    /// sees a connection loss and retries, here or elsewhere).
    Close,
}

/// One connection's view of the server.
pub(crate) struct ConnCtx<R> {
    pub core: Arc<Core<R>>,
    pub id: ConnId,
    pub session: i64,
    pub peer: SocketAddr,
    pub tx: mpsc::Sender<Vec<u8>>,
    /// The ids this connection proved (addauth), for ACL checks; the router holds it too,
    /// for watch notifications.
    pub auth: Arc<ConnAuth>,
}

type Reply = (i32, ReplyBody);

fn ok(body: ReplyBody) -> Reply {
    (code::OK, body)
}

fn err(e: &TreeError) -> Reply {
    (e.code(), ReplyBody::Empty)
}

/// The tree op of a create request (alone or `in_multi`) by a session holding `ids`;
/// `Err` is the code to answer with (MARSHALLING_ERROR fails a whole multi, see
/// [`wire_acl`]).
fn create_op(request_op: i32, req: &CreateRequest, ids: &[Id], in_multi: bool) -> Result<Op, i32> {
    let mode = CreateMode::from_flags(req.flags).ok_or(code::BAD_ARGUMENTS)?;
    // TTL modes come only with createTTL, and createTTL only with them; but ZooKeeper
    // reads a multi's createTTL of another mode as a plain create (its TTL dropped), and
    // fails on a TTL mode in a multi's other creates (the record is not a TTL request).
    if mode.is_ttl() != (request_op == op::CREATE_TTL) {
        match (in_multi, mode.is_ttl()) {
            (true, false) => {}
            (true, true) => return Err(code::MARSHALLING_ERROR),
            (false, _) => return Err(code::BAD_ARGUMENTS),
        }
    }
    let op = Op::Create {
        path: req.path.clone(),
        data: req.data.clone(),
        mode,
        ttl_ms: if mode.is_ttl() {
            req.ttl.unwrap_or(0)
        } else {
            0
        },
        acl: wire_acl::tree_acl(&req.acl),
    };
    // ZooKeeper validates the path and TTL before it looks at the ACL.
    if op.validate().is_ok() && wire_acl::zookeeper_throws(&req.acl, ids) {
        return Err(code::MARSHALLING_ERROR);
    }
    Ok(op)
}

/// What getACL shows a reader without ADMIN: digest hashes masked, as ZooKeeper 3.8 does.
fn redacted(acl: Vec<coordbench_tree::Acl>) -> Vec<coordbench_tree::Acl> {
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

fn create_body(request_op: i32, path: String, stat: coordbench_tree::Stat) -> ReplyBody {
    if request_op == op::CREATE {
        ReplyBody::Path(path)
    } else {
        ReplyBody::Create2 { path, stat }
    }
}

/// READ on an existing `path` for `ids` (NoNode first, as getData answers).
fn readable(sm: &TreeStateMachine, path: &str, ids: &[Id]) -> Result<(), TreeError> {
    sm.tree().check_perm(path, perm::READ, ids)
}

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

/// Multi results as ZooKeeper reports an abort: OK before the failed op, its error, then
/// RUNTIME_INCONSISTENCY.
fn aborted(len: usize, index: usize, code: i32) -> Vec<MultiResult> {
    (0..len)
        .map(|i| {
            MultiResult::Error(match i.cmp(&index) {
                std::cmp::Ordering::Less => code::OK,
                std::cmp::Ordering::Equal => code,
                std::cmp::Ordering::Greater => code::RUNTIME_INCONSISTENCY,
            })
        })
        .collect()
}

impl<R: Replicator<TreeStateMachine>> ConnCtx<R> {
    /// The ids requests of this connection act as (its ip, its digests).
    fn ids(&self) -> Vec<Id> {
        self.auth.ids(&self.peer)
    }

    pub async fn handle(&self, header: RequestHeader, req: Request) -> Flow {
        let x = header.xid;
        let unauthenticated = self.core.options.enforce_auth && !self.auth.authenticated();
        if unauthenticated && !matches!(req, Request::Auth(_)) {
            // As ZooKeeper with enforce.auth.enabled: answer, then close the connection.
            let _ = self
                .read(x, |_, _| {
                    (code::SESSION_CLOSED_REQUIRE_AUTH, ReplyBody::Empty)
                })
                .await;
            return Flow::Close;
        }
        match req {
            Request::Ping => self.read(xid::PING, |_, _| ok(ReplyBody::Empty)).await,
            Request::Auth(packet) => self.add_auth(x, &packet).await,
            Request::WhoAmI => {
                let who = self
                    .ids()
                    .into_iter()
                    .map(|i| match i.id.split_once(':') {
                        Some((user, _)) if i.scheme == "digest" => (i.scheme, user.to_string()),
                        _ => (i.scheme, i.id),
                    })
                    .collect();
                self.read(x, |_, _| ok(ReplyBody::WhoAmI(who))).await
            }
            Request::CloseSession => {
                let cmd = Command::CloseSession {
                    session: self.session,
                };
                // Otherwise the apply's end of the session closes this connection first and
                // the client sees it dropped instead of its reply.
                self.core.router.closing(self.id);
                match self.core.propose(&cmd).await {
                    Ok(a) => {
                        let _ = self
                            .send(reply_frame(x, a.zxid, code::OK, &ReplyBody::Empty))
                            .await;
                    }
                    Err(e) => tracing::debug!(error = %e, "closeSession failed"),
                }
                Flow::Close
            }
            Request::Create { op: o, req } => match create_op(o, &req, &self.ids(), false) {
                Ok(tree_op) => {
                    self.write(x, tree_op, |r| match r {
                        OpResult::Create { path, stat } => create_body(o, path, stat),
                        _ => ReplyBody::Empty,
                    })
                    .await
                }
                Err(c) => self.read(x, move |_, _| (c, ReplyBody::Empty)).await,
            },
            Request::Delete(r) => {
                let o = Op::Delete {
                    path: r.path,
                    version: r.version,
                };
                self.write(x, o, |_| ReplyBody::Empty).await
            }
            Request::SetData(r) => {
                let o = Op::SetData {
                    path: r.path,
                    data: r.data,
                    version: r.version,
                };
                self.write(x, o, |r| match r {
                    OpResult::SetData { stat } => ReplyBody::Stat(stat),
                    _ => ReplyBody::Empty,
                })
                .await
            }
            Request::Check(r) => {
                let o = Op::Check {
                    path: r.path,
                    version: r.version,
                };
                self.write(x, o, |_| ReplyBody::Empty).await
            }
            Request::SetAcl(r) => {
                let o = Op::SetAcl {
                    path: r.path,
                    acl: wire_acl::tree_acl(&r.acl),
                    version: r.version,
                };
                // ZooKeeper validates the path before it looks at the ACL.
                if o.validate().is_ok() && wire_acl::zookeeper_throws(&r.acl, &self.ids()) {
                    let c = code::MARSHALLING_ERROR;
                    return self.read(x, move |_, _| (c, ReplyBody::Empty)).await;
                }
                self.write(x, o, |r| match r {
                    OpResult::SetAcl { stat } => ReplyBody::Stat(stat),
                    _ => ReplyBody::Empty,
                })
                .await
            }
            Request::Multi(ops) => self.multi(x, ops).await,
            Request::Exists(r) => {
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
            Request::GetData(r) => {
                let ids = self.ids();
                self.read(x, move |sm, id| {
                    match readable(sm, &r.path, &ids).and_then(|()| sm.tree().get_data(&r.path)) {
                        Ok((data, stat)) => {
                            if r.watch {
                                sm.router().add_watch(&r.path, WatchKind::Data, id);
                            }
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
            Request::GetChildren { req: r, with_stat } => {
                let ids = self.ids();
                self.read(x, move |sm, id| {
                    match readable(sm, &r.path, &ids).and_then(|()| sm.tree().children(&r.path)) {
                        Ok((children, stat)) => {
                            if r.watch {
                                sm.router().add_watch(&r.path, WatchKind::Child, id);
                            }
                            ok(if with_stat {
                                ReplyBody::Children2 { children, stat }
                            } else {
                                ReplyBody::Strings(children)
                            })
                        }
                        Err(e) => err(&e),
                    }
                })
                .await
            }
            Request::GetAcl(path) => {
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
            Request::Sync(path) => {
                if let Err(e) = self.core.replicator.read_barrier().await {
                    return self.unavailable(&e.into());
                }
                self.read(x, move |_, _| ok(ReplyBody::Path(path))).await
            }
            Request::MultiRead(ops) => {
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
            Request::SetWatches(sw) => {
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
            Request::AddWatch(PathMode { path, mode }) => {
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
                    ok(ReplyBody::Empty)
                })
                .await
            }
            Request::RemoveWatches(r) | Request::CheckWatches(r)
                if watcher_kinds(r.mode).is_none() =>
            {
                self.read(x, |_, _| (code::BAD_ARGUMENTS, ReplyBody::Empty))
                    .await
            }
            Request::RemoveWatches(PathMode { path, mode }) => {
                let kinds = watcher_kinds(mode).unwrap_or(&[]);
                self.read(x, move |sm, id| {
                    if sm.router().remove_watches(&path, kinds, id) {
                        ok(ReplyBody::Empty)
                    } else {
                        (code::NO_WATCHER, ReplyBody::Empty)
                    }
                })
                .await
            }
            Request::CheckWatches(PathMode { path, mode }) => {
                let kinds = watcher_kinds(mode).unwrap_or(&[]);
                self.read(x, move |sm, id| {
                    if sm.router().has_watches(&path, kinds, id) {
                        ok(ReplyBody::Empty)
                    } else {
                        (code::NO_WATCHER, ReplyBody::Empty)
                    }
                })
                .await
            }
            Request::GetEphemerals(prefix) => {
                let session = self.session;
                self.read(x, move |sm, _| {
                    ok(ReplyBody::Strings(sm.tree().ephemerals(session, &prefix)))
                })
                .await
            }
            Request::GetAllChildrenNumber(path) => {
                let ids = self.ids();
                self.read(x, move |sm, _| {
                    match readable(sm, &path, &ids).and_then(|()| sm.tree().descendant_count(&path))
                    {
                        Ok(n) => ok(ReplyBody::Int(i32::try_from(n).unwrap_or(i32::MAX))),
                        Err(e) => err(&e),
                    }
                })
                .await
            }
            Request::Unsupported(o) => {
                let c = if o == op::RECONFIG {
                    code::RECONFIG_DISABLED
                } else {
                    code::UNIMPLEMENTED
                };
                let flow = self.read(x, move |_, _| (c, ReplyBody::Empty)).await;
                // ZooKeeper answers an op code it does not know at all, then closes the
                // connection (its UnimplementedRequestProcessor); ones it knows but this
                // server does not serve leave the connection open.
                if [op::RECONFIG, op::DELETE_CONTAINER, op::SASL].contains(&o) {
                    flow
                } else {
                    tracing::debug!(peer = %self.peer, op = o, "unknown op code; closing");
                    Flow::Close
                }
            }
        }
    }

    /// addauth, answered on the request's xid (Java clients send -4); a failed one is
    /// answered AUTH_FAILED and the connection closed, as ZooKeeper does.
    async fn add_auth(&self, x: i32, packet: &AuthPacket) -> Flow {
        match self.auth.add(&packet.scheme, &packet.auth) {
            Ok(()) => self.read(x, |_, _| ok(ReplyBody::Empty)).await,
            Err(e) => {
                tracing::info!(peer = %self.peer, error = %e, "addauth failed; closing");
                let _ = self
                    .read(x, |_, _| (code::AUTH_FAILED, ReplyBody::Empty))
                    .await;
                Flow::Close
            }
        }
    }

    /// NoAuth if `path` exists and this connection may not read it.
    fn unreadable_existing(&self, path: &str) -> Option<TreeError> {
        let ids = self.ids();
        match self.core.replicator.read(|sm| readable(sm, path, &ids)) {
            Err(TreeError::NoAuth) => Some(TreeError::NoAuth),
            _ => None,
        }
    }

    /// Queues a reply computed from the local state, atomically with respect to applies.
    async fn read(&self, xid: i32, f: impl FnOnce(&TreeStateMachine, ConnId) -> Reply) -> Flow {
        let Ok(permit) = self.tx.reserve().await else {
            return Flow::Close;
        };
        self.core.replicator.read(|sm| {
            let (code, body) = f(sm, self.id);
            permit.send(reply_frame(xid, sm.tree().last_zxid(), code, &body));
        });
        Flow::Continue
    }

    async fn send(&self, frame: Vec<u8>) -> Flow {
        if self.tx.send(frame).await.is_err() {
            return Flow::Close;
        }
        Flow::Continue
    }

    /// Proposes one write of this session and answers from its apply.
    async fn write(&self, xid: i32, op: Op, render: impl FnOnce(OpResult) -> ReplyBody) -> Flow {
        if let Err(e) = op.validate() {
            return self.read(xid, move |_, _| err(&e)).await;
        }
        let cmd = Command::Write {
            session: self.session,
            now_ms: now_ms(),
            op,
            auth: self.ids(),
        };
        let applied = match self.core.propose(&cmd).await {
            Ok(a) => a,
            Err(e) => return self.reject_or_close(xid, &e).await,
        };
        let (code, body) = match applied.result {
            Ok(Response::Op(r)) => ok(render(r)),
            Ok(_) => (code::SYSTEM_ERROR, ReplyBody::Empty),
            Err(e) => err(&e),
        };
        self.send(reply_frame(xid, applied.zxid, code, &body)).await
    }

    async fn multi(&self, xid: i32, ops: Vec<MultiOp>) -> Flow {
        let mut tree_ops = Vec::with_capacity(ops.len());
        let ids = self.ids();
        for (i, o) in ops.iter().enumerate() {
            let converted = match o {
                MultiOp::Create { op: c, req } => create_op(*c, req, &ids, true),
                MultiOp::Delete(r) => Ok(Op::Delete {
                    path: r.path.clone(),
                    version: r.version,
                }),
                MultiOp::SetData(r) => Ok(Op::SetData {
                    path: r.path.clone(),
                    data: r.data.clone(),
                    version: r.version,
                }),
                MultiOp::Check(r) => Ok(Op::Check {
                    path: r.path.clone(),
                    version: r.version,
                }),
            };
            match converted {
                Ok(t) => tree_ops.push(t),
                // ZooKeeper fails the whole multi on an exception that is no
                // KeeperException (see create_op), if no earlier op failed first.
                Err(c) if c == code::MARSHALLING_ERROR => tree_ops.push(Op::Refuse {
                    error: TreeError::Marshalling,
                }),
                Err(c) => {
                    let body = ReplyBody::Multi(aborted(ops.len(), i, c));
                    return self.read(xid, move |_, _| ok(body)).await;
                }
            }
        }
        let n = tree_ops.len();
        // ZooKeeper's server reads every create of a multi as Op.create, whose result
        // shape follows the mode, not the op code: a Stat only for containers and TTL
        // nodes (create2's and plain create's alike).
        let with_stat: Vec<bool> = tree_ops
            .iter()
            .map(|o| matches!(o, Op::Create { mode, .. } if *mode == CreateMode::Container || mode.is_ttl()))
            .collect();
        let cmd = Command::Multi {
            session: self.session,
            now_ms: now_ms(),
            ops: tree_ops,
            auth: self.ids(),
        };
        let applied = match self.core.propose(&cmd).await {
            Ok(a) => a,
            Err(e) => return self.reject_or_close(xid, &e).await,
        };
        let (code, body) = match applied.result {
            Ok(Response::Multi(MultiOutcome::Committed(results))) => {
                let results = results
                    .into_iter()
                    .zip(with_stat)
                    .map(|(r, with_stat)| match r {
                        OpResult::Create { path, .. } if !with_stat => MultiResult::Create(path),
                        OpResult::Create { path, stat } => MultiResult::Create2 { path, stat },
                        OpResult::Delete => MultiResult::Delete,
                        OpResult::SetData { stat } => MultiResult::SetData(stat),
                        OpResult::Check => MultiResult::Check,
                        // A multi carries no setACL (the decoder refuses it).
                        OpResult::SetAcl { stat } => MultiResult::SetData(stat),
                    })
                    .collect();
                ok(ReplyBody::Multi(results))
            }
            Ok(Response::Multi(MultiOutcome::Aborted {
                error: TreeError::Marshalling,
                ..
            })) => (code::MARSHALLING_ERROR, ReplyBody::Empty),
            Ok(Response::Multi(MultiOutcome::Aborted { index, error })) => {
                ok(ReplyBody::Multi(aborted(n, index, error.code())))
            }
            Ok(_) => (code::SYSTEM_ERROR, ReplyBody::Empty),
            Err(e) => err(&e),
        };
        self.send(reply_frame(xid, applied.zxid, code, &body)).await
    }

    /// A refused proposal (too large, malformed) is answered; anything else means this
    /// member cannot serve now, and the client must see a connection loss.
    async fn reject_or_close(&self, xid: i32, e: &ProposeError) -> Flow {
        match e {
            ProposeError::Node(NodeError::Rejected(m)) => {
                tracing::debug!(reason = %m, "proposal rejected");
                self.read(xid, |_, _| (code::BAD_ARGUMENTS, ReplyBody::Empty))
                    .await
            }
            other => self.unavailable(other),
        }
    }

    fn unavailable(&self, e: &ProposeError) -> Flow {
        tracing::debug!(error = %e, session = self.session, "closing connection: member cannot serve");
        Flow::Close
    }
}
