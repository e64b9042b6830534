//! etcd's `Lease` service: Grant, Revoke, KeepAlive, TimeToLive and Leases. A keep-alive
//! is answered by the leader from its lease clock, without a log entry (a follower forwards
//! it, see [`coordbench_kv::lease_clock`]); TimeToLive answers with the leader's remaining
//! time. Expiry and checkpoints run apart, on the leader (`lease_expiry.rs`). With auth on,
//! as etcd: revoking needs WRITE on the lease's keys (checked at apply), TimeToLive READ
//! on them; grants and keep-alives need only a valid token.

use std::sync::Arc;

use coordbench_kv::auth::Access;
use coordbench_kv::{
    Command, KvError, LeaseAnswer, LeaseCheckpoint, LeaseQuery, LeaseTimeToLiveRequest,
    Response as KvResponse,
};
use coordbench_node::Replicator;
use etcd_client::proto::{
    PbLeaseGrantRequest, PbLeaseGrantResponse, PbLeaseKeepAliveRequest, PbLeaseKeepAliveResponse,
    PbLeaseLeasesRequest, PbLeaseLeasesResponse, PbLeaseRevokeRequest, PbLeaseRevokeResponse,
    PbLeaseService, PbLeaseStatus, PbLeaseTimeToLiveRequest, PbLeaseTimeToLiveResponse,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::core::{at_current, now_ms, Core};
use crate::error::ApiError;
use crate::state_machine::KvStateMachine;

/// Keep-alive answers buffered towards one client.
const KEEPALIVE_BUFFER: usize = 16;

pub(crate) struct LeaseService<R> {
    pub core: Arc<Core<R>>,
}

fn mismatch(what: &str) -> Status {
    ApiError::Internal(format!("unexpected output for a {what} command")).into()
}

#[tonic::async_trait]
impl<R: Replicator<KvStateMachine>> PbLeaseService for LeaseService<R> {
    /// Id 0 lets the state machine pick a free id (derived from the log index, so the same
    /// on every replica); TTLs below the configured minimum are raised to it, as etcd does.
    async fn lease_grant(
        &self,
        req: Request<PbLeaseGrantRequest>,
    ) -> Result<Response<PbLeaseGrantResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let req = req.into_inner();
        let cmd = Command::LeaseGrant {
            id: req.id,
            ttl: req.ttl.max(self.core.options.min_lease_ttl_secs),
            now_ms: now_ms(),
        };
        match self.core.propose(&who, cmd).await? {
            KvResponse::LeaseGrant(r) => Ok(Response::new(PbLeaseGrantResponse {
                header: Some(self.core.stamp().header(r.header.revision)),
                id: r.id,
                ttl: r.ttl,
                error: r.error,
            })),
            _ => Err(mismatch("lease grant")),
        }
    }

    async fn lease_revoke(
        &self,
        req: Request<PbLeaseRevokeRequest>,
    ) -> Result<Response<PbLeaseRevokeResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let cmd = Command::LeaseRevoke {
            id: req.into_inner().id,
        };
        match self.core.propose(&who, cmd).await? {
            KvResponse::LeaseRevoke(r) => Ok(Response::new(PbLeaseRevokeResponse {
                header: Some(self.core.stamp().header(r.header.revision)),
            })),
            _ => Err(mismatch("lease revoke")),
        }
    }

    type LeaseKeepAliveStream = ReceiverStream<Result<PbLeaseKeepAliveResponse, Status>>;

    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<PbLeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        self.core.caller(req.metadata()).await?;
        let (out, rx) = mpsc::channel(KEEPALIVE_BUFFER);
        tokio::spawn(keep_alive(self.core.clone(), req.into_inner(), out));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    /// The remaining time is the leader's; the rest is read here after a read barrier.
    async fn lease_time_to_live(
        &self,
        req: Request<PbLeaseTimeToLiveRequest>,
    ) -> Result<Response<PbLeaseTimeToLiveResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let req = req.into_inner();
        let remaining = match self
            .core
            .ask_leases(&LeaseQuery::TimeToLive { id: req.id })
            .await?
        {
            LeaseAnswer::TimeToLive { remaining_secs } => remaining_secs,
            _ => return Err(mismatch("lease time-to-live query")),
        };
        self.core
            .replicator
            .read_barrier()
            .await
            .map_err(ApiError::from)?;
        let q = LeaseTimeToLiveRequest {
            id: req.id,
            keys: req.keys,
        };
        let r = self.core.replicator.read(|sm| {
            let store = sm.store();
            store.permit_lease(at_current(&who, store).as_ref(), q.id, Access::Read)?;
            Ok::<_, ApiError>(store.lease_time_to_live(&q, remaining))
        })?;
        Ok(Response::new(PbLeaseTimeToLiveResponse {
            header: Some(self.core.stamp().header(r.header.revision)),
            id: r.id,
            ttl: r.ttl,
            granted_ttl: r.granted_ttl,
            keys: r.keys,
        }))
    }

    async fn lease_leases(
        &self,
        req: Request<PbLeaseLeasesRequest>,
    ) -> Result<Response<PbLeaseLeasesResponse>, Status> {
        self.core
            .replicator
            .read_barrier()
            .await
            .map_err(ApiError::from)?;
        self.core.caller(req.metadata()).await?;
        let r = self.core.replicator.read(|sm| sm.store().lease_leases());
        Ok(Response::new(PbLeaseLeasesResponse {
            header: Some(self.core.stamp().header(r.header.revision)),
            leases: r
                .leases
                .into_iter()
                .map(|l| PbLeaseStatus { id: l.id })
                .collect(),
        }))
    }
}

/// Rounds of clearing a lease's checkpoint before a renewal gives up (one is the rule; more
/// only while the leader's own checkpoint of the lease is on its way).
const CLEAR_ROUNDS: usize = 8;

/// Renews lease `id` at the leader: its TTL, or 0 for a lease that does not exist or has
/// expired (as etcd answers). A lease with a checkpointed remaining TTL has it cleared
/// through the log first (etcd's rule), so that no later leader resumes from it.
async fn renew<R: Replicator<KvStateMachine>>(core: &Core<R>, id: i64) -> Result<i64, Status> {
    for _ in 0..CLEAR_ROUNDS {
        match core.ask_leases(&LeaseQuery::Renew { id }).await? {
            LeaseAnswer::Renewed { ttl } => return Ok(ttl),
            LeaseAnswer::NotFound | LeaseAnswer::Expired => return Ok(0),
            LeaseAnswer::ClearCheckpoint => {
                let checkpoints = vec![LeaseCheckpoint {
                    id,
                    remaining_ms: 0,
                }];
                match core
                    .propose(&None, Command::LeaseCheckpoint { checkpoints })
                    .await
                {
                    Ok(_) | Err(ApiError::Kv(KvError::LeaseNotFound { .. })) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            _ => return Err(mismatch("lease renew query")),
        }
    }
    Err(Status::unavailable(
        "etcdserver: lease checkpoint still pending, retry the keep-alive",
    ))
}

/// Serves one keep-alive stream: each request is renewed at the leader and answered with
/// the lease's TTL (0: gone). Any error ends the stream with that status; clients open a
/// new one.
async fn keep_alive<R: Replicator<KvStateMachine>>(
    core: Arc<Core<R>>,
    mut input: Streaming<PbLeaseKeepAliveRequest>,
    out: mpsc::Sender<Result<PbLeaseKeepAliveResponse, Status>>,
) {
    loop {
        let id = tokio::select! {
            () = core.shutdown.cancelled() => {
                let _ = out.try_send(Err(Status::unavailable("etcdserver: server stopped")));
                return;
            }
            () = out.closed() => return,
            m = input.message() => match m {
                Ok(Some(m)) => m.id,
                Ok(None) | Err(_) => return,
            },
        };
        let answer = renew(&core, id).await.map(|ttl| PbLeaseKeepAliveResponse {
            header: Some(core.stamp().header(core.revision())),
            id,
            ttl,
        });
        let end = answer.is_err();
        let sent = tokio::select! {
            sent = out.send(answer) => sent.is_ok(),
            () = core.shutdown.cancelled() => false,
        };
        if !sent || end {
            return;
        }
    }
}
