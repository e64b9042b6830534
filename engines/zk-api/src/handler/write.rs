//! Writes: create (all four op codes), delete, setData, check, setACL and multi. Each
//! becomes a tree op, is proposed with the connection's ids (the tree checks ACLs at
//! apply) and is answered from this member's own apply, at the command's zxid. What
//! ZooKeeper refuses before proposing (bad arguments, an ACL it would throw on) is
//! answered at once, from the local state.

use coordbench_node::{NodeError, Replicator};
use coordbench_tree::{
    code, Command, CreateMode, Id, MultiOutcome, Op, OpResult, Response, Stat, TreeError,
};

use super::{err, ok, ConnCtx, Flow};
use crate::core::{now_ms, ProposeError};
use crate::proto::{op, CreateRequest, PathVersion, SetAclRequest, SetDataRequest};
use crate::reply::{reply_frame, MultiResult, ReplyBody};
use crate::request::MultiOp;
use crate::state_machine::TreeStateMachine;
use crate::wire_acl;

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

fn create_body(request_op: i32, path: String, stat: Stat) -> ReplyBody {
    if request_op == op::CREATE {
        ReplyBody::Path(path)
    } else {
        ReplyBody::Create2 { path, stat }
    }
}

// The tree ops of the other requests a multi may carry as well.

fn delete_op(r: PathVersion) -> Op {
    Op::Delete {
        path: r.path,
        version: r.version,
    }
}

fn set_data_op(r: SetDataRequest) -> Op {
    Op::SetData {
        path: r.path,
        data: r.data,
        version: r.version,
    }
}

fn check_op(r: PathVersion) -> Op {
    Op::Check {
        path: r.path,
        version: r.version,
    }
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

/// A committed multi's results; `with_stat` (one per op) says which creates report a Stat.
fn committed(results: Vec<OpResult>, with_stat: Vec<bool>) -> Vec<MultiResult> {
    results
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
        .collect()
}

impl<R: Replicator<TreeStateMachine>> ConnCtx<R> {
    /// create, create2, createContainer or createTTL (`o`).
    pub(super) async fn create(&self, x: i32, o: i32, req: &CreateRequest) -> Flow {
        match create_op(o, req, &self.ids(), false) {
            Ok(tree_op) => {
                self.write(x, tree_op, |r| match r {
                    OpResult::Create { path, stat } => create_body(o, path, stat),
                    _ => ReplyBody::Empty,
                })
                .await
            }
            Err(c) => self.read(x, move |_, _| (c, ReplyBody::Empty)).await,
        }
    }

    pub(super) async fn delete(&self, x: i32, r: PathVersion) -> Flow {
        self.write(x, delete_op(r), |_| ReplyBody::Empty).await
    }

    pub(super) async fn set_data(&self, x: i32, r: SetDataRequest) -> Flow {
        self.write(x, set_data_op(r), |r| match r {
            OpResult::SetData { stat } => ReplyBody::Stat(stat),
            _ => ReplyBody::Empty,
        })
        .await
    }

    pub(super) async fn check(&self, x: i32, r: PathVersion) -> Flow {
        self.write(x, check_op(r), |_| ReplyBody::Empty).await
    }

    pub(super) async fn set_acl(&self, x: i32, r: SetAclRequest) -> Flow {
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

    pub(super) async fn multi(&self, xid: i32, ops: Vec<MultiOp>) -> Flow {
        let len = ops.len();
        let mut tree_ops = Vec::with_capacity(len);
        let ids = self.ids();
        for (i, o) in ops.into_iter().enumerate() {
            let converted = match o {
                MultiOp::Create { op: c, req } => create_op(c, &req, &ids, true),
                MultiOp::Delete(r) => Ok(delete_op(r)),
                MultiOp::SetData(r) => Ok(set_data_op(r)),
                MultiOp::Check(r) => Ok(check_op(r)),
            };
            match converted {
                Ok(t) => tree_ops.push(t),
                // ZooKeeper fails the whole multi on an exception that is no
                // KeeperException (see create_op), if no earlier op failed first.
                Err(c) if c == code::MARSHALLING_ERROR => tree_ops.push(Op::Refuse {
                    error: TreeError::Marshalling,
                }),
                Err(c) => {
                    let body = ReplyBody::Multi(aborted(len, i, c));
                    return self.read(xid, move |_, _| ok(body)).await;
                }
            }
        }
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
                ok(ReplyBody::Multi(committed(results, with_stat)))
            }
            Ok(Response::Multi(MultiOutcome::Aborted {
                error: TreeError::Marshalling,
                ..
            })) => (code::MARSHALLING_ERROR, ReplyBody::Empty),
            Ok(Response::Multi(MultiOutcome::Aborted { index, error })) => {
                ok(ReplyBody::Multi(aborted(len, index, error.code())))
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
}
