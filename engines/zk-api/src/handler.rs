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
//!
//! [`ConnCtx::handle`] dispatches a request to its family's module: `read` (the tree's
//! data, children, ACLs and counts, and `sync`), `write` (the proposed ops and multi),
//! `watch` (registering, resuming, removing and checking watches) and `session` (addauth,
//! whoAmI, closeSession). This module keeps what they share: queuing a reply, and closing
//! the connection when the member cannot serve.

mod read;
mod session;
mod watch;
mod write;

use std::net::SocketAddr;
use std::sync::Arc;

use coordbench_node::Replicator;
use coordbench_tree::{code, Id, TreeError};
use tokio::sync::mpsc;

use crate::auth::ConnAuth;
use crate::core::{Core, ProposeError};
use crate::proto::{op, xid, RequestHeader};
use crate::reply::{reply_frame, ReplyBody};
use crate::request::Request;
use crate::router::ConnId;
use crate::state_machine::TreeStateMachine;

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
            Request::WhoAmI => self.who_am_i(x).await,
            Request::CloseSession => self.close_session(x).await,

            Request::Create { op: o, req } => self.create(x, o, &req).await,
            Request::Delete(r) => self.delete(x, r).await,
            Request::SetData(r) => self.set_data(x, r).await,
            Request::Check(r) => self.check(x, r).await,
            Request::SetAcl(r) => self.set_acl(x, r).await,
            Request::Multi(ops) => self.multi(x, ops).await,

            Request::Exists(r) => self.exists(x, r).await,
            Request::GetData(r) => self.get_data(x, r).await,
            Request::GetChildren { req: r, with_stat } => self.get_children(x, r, with_stat).await,
            Request::GetAcl(path) => self.get_acl(x, path).await,
            Request::Sync(path) => self.sync(x, path).await,
            Request::MultiRead(ops) => self.multi_read(x, ops).await,
            Request::GetEphemerals(prefix) => self.get_ephemerals(x, prefix).await,
            Request::GetAllChildrenNumber(path) => self.get_all_children_number(x, path).await,

            Request::SetWatches(sw) => self.set_watches(sw).await,
            Request::AddWatch(r) => self.add_watch(x, r).await,
            Request::RemoveWatches(r) => self.remove_or_check_watches(x, r, true).await,
            Request::CheckWatches(r) => self.remove_or_check_watches(x, r, false).await,

            Request::Unsupported(o) => self.unsupported(x, o).await,
        }
    }

    /// An op code this server does not serve: reconfig (answered as by a ZooKeeper with
    /// reconfiguration disabled), or one it does not know.
    async fn unsupported(&self, x: i32, o: i32) -> Flow {
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

    fn unavailable(&self, e: &ProposeError) -> Flow {
        tracing::debug!(error = %e, session = self.session, "closing connection: member cannot serve");
        Flow::Close
    }
}
