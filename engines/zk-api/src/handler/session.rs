//! The session's own requests: proving an identity (addauth), asking for it (whoAmI) and
//! ending the session (closeSession).

use coordbench_node::Replicator;
use coordbench_tree::{code, Command};

use super::{ok, ConnCtx, Flow};
use crate::proto::AuthPacket;
use crate::reply::{reply_frame, ReplyBody};
use crate::state_machine::TreeStateMachine;

impl<R: Replicator<TreeStateMachine>> ConnCtx<R> {
    /// addauth, answered on the request's xid (Java clients send -4); a failed one is
    /// answered AUTH_FAILED and the connection closed, as ZooKeeper does.
    pub(super) async fn add_auth(&self, x: i32, packet: &AuthPacket) -> Flow {
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

    /// whoAmI: this connection's ids, a digest's password hash left out.
    pub(super) async fn who_am_i(&self, x: i32) -> Flow {
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

    /// closeSession: proposed, answered from its apply, then the connection is closed
    /// whether or not it committed.
    pub(super) async fn close_session(&self, x: i32) -> Flow {
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
}
