//! [`Core`]: what every service of a member shares (replicator, identity, options, watch
//! fan-out, shutdown signal) and the request paths they all use: propose a command, read
//! serializably or linearizably, wait on the watch fan-out.

use std::future::Future;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use coordbench_kv::txn;
use coordbench_kv::{
    Command, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest,
    RangeResponse, RequestOp, Response, TxnRequest, TxnResponse,
};
use coordbench_node::{NodeError, Replicator};
use tokio_util::sync::CancellationToken;

use crate::convert::Stamp;
use crate::error::ApiError;
use crate::fanout::WatchFanout;
use crate::options::{MemberInfo, ServeOptions};
use crate::state_machine::KvStateMachine;

pub(crate) struct Core<R> {
    pub replicator: R,
    pub cluster_id: u64,
    pub members: Vec<MemberInfo>,
    pub options: ServeOptions,
    pub watches: Arc<WatchFanout>,
    /// Cancelled when the server shuts down: ends streams and waits.
    pub shutdown: CancellationToken,
}

/// Milliseconds on this member's wall clock: the time lease commands carry. Wall time (not
/// a per-process monotonic clock) so that members in other processes roughly agree when
/// they compute a lease's remaining TTL from the leader's deadline.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn mismatch(what: &str) -> ApiError {
    ApiError::Internal(format!("unexpected output for a {what} command"))
}

/// etcd serves a read-only txn without ReadIndex only when every op is a serializable range.
fn serializable(t: &TxnRequest) -> bool {
    t.success
        .iter()
        .chain(&t.failure)
        .all(|op| matches!(op, RequestOp::Range(r) if r.serializable))
}

impl<R: Replicator<KvStateMachine>> Core<R> {
    /// Header fields of this member as of now.
    pub fn stamp(&self) -> Stamp {
        let st = self.replicator.status();
        Stamp {
            cluster_id: self.cluster_id,
            member_id: st.id,
            raft_term: st.term,
        }
    }

    /// Runs `f` unless the server shuts down first.
    pub async fn until_shutdown<T>(&self, f: impl Future<Output = T>) -> Result<T, ApiError> {
        tokio::select! {
            t = f => Ok(t),
            () = self.shutdown.cancelled() => Err(ApiError::Node(NodeError::Stopped)),
        }
    }

    /// Validates, size-checks and replicates a command; returns its successful response.
    pub async fn propose(&self, cmd: Command) -> Result<Response, ApiError> {
        cmd.validate()?;
        let bytes = cmd.encode();
        if bytes.len() > self.options.max_request_bytes {
            return Err(ApiError::TooLarge);
        }
        let applied = self.replicator.propose(bytes).await??;
        Ok(applied.result?)
    }

    /// Current store revision (a local read).
    pub fn revision(&self) -> i64 {
        self.replicator.read(|sm| sm.store().revision())
    }

    pub async fn range(&self, req: RangeRequest) -> Result<RangeResponse, ApiError> {
        txn::validate_range(&req)?;
        if !req.serializable {
            self.replicator.read_barrier().await?;
        }
        Ok(self.replicator.read(|sm| sm.store().range(&req))?)
    }

    pub async fn put(&self, req: PutRequest) -> Result<PutResponse, ApiError> {
        match self.propose(Command::Put(req)).await? {
            Response::Put(r) => Ok(r),
            _ => Err(mismatch("put")),
        }
    }

    pub async fn delete(&self, req: DeleteRangeRequest) -> Result<DeleteRangeResponse, ApiError> {
        match self.propose(Command::DeleteRange(req)).await? {
            Response::DeleteRange(r) => Ok(r),
            _ => Err(mismatch("delete")),
        }
    }

    /// A txn without writes is served locally (after ReadIndex unless all serializable);
    /// others go through the log.
    pub async fn txn(&self, req: TxnRequest) -> Result<TxnResponse, ApiError> {
        if txn::is_read_only(&req) {
            txn::validate_txn(&req)?;
            if !serializable(&req) {
                self.replicator.read_barrier().await?;
            }
            return Ok(self.replicator.read(|sm| sm.store().txn_read_only(&req))?);
        }
        match self.propose(Command::Txn(req)).await? {
            Response::Txn(r) => Ok(r),
            _ => Err(mismatch("txn")),
        }
    }
}
