//! etcd's `Lease` service: Grant, Revoke, KeepAlive (a replicated renew per keep-alive),
//! TimeToLive and Leases. Expiry runs apart, on the leader (`lease_expiry.rs`). With auth
//! on, as etcd: revoking needs WRITE on the lease's keys (checked at apply), TimeToLive
//! READ on them; grants and keep-alives need only a valid token.

use std::sync::Arc;

use coordbench_kv::auth::Access;
use coordbench_kv::{Command, KvError, LeaseTimeToLiveRequest, Response as KvResponse};
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

    /// Read after ReadIndex: the deadline is the leader's, the remaining time this
    /// member's view of it.
    async fn lease_time_to_live(
        &self,
        req: Request<PbLeaseTimeToLiveRequest>,
    ) -> Result<Response<PbLeaseTimeToLiveResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let req = req.into_inner();
        self.core
            .replicator
            .read_barrier()
            .await
            .map_err(ApiError::from)?;
        let q = LeaseTimeToLiveRequest {
            id: req.id,
            keys: req.keys,
        };
        let now = now_ms();
        let r = self.core.replicator.read(|sm| {
            let store = sm.store();
            store.permit_lease(at_current(&who, store).as_ref(), q.id, Access::Read)?;
            Ok::<_, ApiError>(store.lease_time_to_live(&q, now))
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

/// Serves one keep-alive stream: each request renews through the log and is answered
/// with the lease's TTL, or TTL 0 for a lease that does not exist (as etcd answers). Any
/// other error ends the stream with that status; clients open a new one.
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
        let cmd = Command::LeaseRenew {
            id,
            now_ms: now_ms(),
        };
        let answer = match core.propose(&None, cmd).await {
            Ok(KvResponse::LeaseRenew(r)) => Ok((r.header.revision, r.ttl)),
            Ok(_) => Err(mismatch("lease renew")),
            Err(ApiError::Kv(KvError::LeaseNotFound { .. })) => Ok((core.revision(), 0)),
            Err(e) => Err(Status::from(e)),
        };
        let end = answer.is_err();
        let answer = answer.map(|(revision, ttl)| PbLeaseKeepAliveResponse {
            header: Some(core.stamp().header(revision)),
            id,
            ttl,
        });
        let sent = tokio::select! {
            sent = out.send(answer) => sent.is_ok(),
            () = core.shutdown.cancelled() => false,
        };
        if !sent || end {
            return;
        }
    }
}
