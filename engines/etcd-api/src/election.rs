//! etcd's v3election `Election` service: Campaign, Proclaim, Leader, Observe, Resign,
//! with etcd's semantics (see `concurrency.rs`).

use std::sync::Arc;

use coordbench_kv::{EventKind, WatchCreateRequest};
use coordbench_node::Replicator;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::concurrency::{first_created, prefix_of};
use crate::convert;
use crate::core::{Caller, Core};
use crate::error::ApiError;
use crate::pb::election::election_server::Election;
use crate::pb::{
    CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest,
    ProclaimResponse, ResignRequest, ResignResponse,
};
use crate::state_machine::KvStateMachine;

/// Observe answers buffered towards one client.
const OBSERVE_BUFFER: usize = 16;

/// etcd's error for a Proclaim or Resign without a leader key.
const ERR_MISSING_LEADER_KEY: &str = "\"leader\" field must be provided";

pub(crate) struct ElectionService<R> {
    pub core: Arc<Core<R>>,
}

fn leader_key(k: Option<LeaderKey>) -> Result<LeaderKey, Status> {
    k.ok_or_else(|| ApiError::Unknown(ERR_MISSING_LEADER_KEY.into()).into())
}

#[tonic::async_trait]
impl<R: Replicator<KvStateMachine>> Election for ElectionService<R> {
    async fn campaign(
        &self,
        req: Request<CampaignRequest>,
    ) -> Result<Response<CampaignResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let req = req.into_inner();
        let (revision, key, rev) = self
            .core
            .campaign(&who, &req.name, req.lease, &req.value)
            .await?;
        Ok(Response::new(CampaignResponse {
            header: Some(self.core.stamp().header(revision)),
            leader: Some(LeaderKey {
                name: req.name,
                key,
                rev,
                lease: req.lease,
            }),
        }))
    }

    async fn proclaim(
        &self,
        req: Request<ProclaimRequest>,
    ) -> Result<Response<ProclaimResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let req = req.into_inner();
        let leader = leader_key(req.leader)?;
        let revision = self
            .core
            .proclaim(&who, &leader.key, leader.rev, &req.value)
            .await?;
        Ok(Response::new(ProclaimResponse {
            header: Some(self.core.stamp().header(revision)),
        }))
    }

    async fn leader(
        &self,
        req: Request<LeaderRequest>,
    ) -> Result<Response<LeaderResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let (revision, kv) = self.core.leader(&who, &req.into_inner().name).await?;
        Ok(Response::new(LeaderResponse {
            header: Some(self.core.stamp().header(revision)),
            kv: Some(convert::key_value(kv)),
        }))
    }

    type ObserveStream = ReceiverStream<Result<LeaderResponse, Status>>;

    async fn observe(
        &self,
        req: Request<LeaderRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let (out, rx) = mpsc::channel(OBSERVE_BUFFER);
        let core = self.core.clone();
        let prefix = prefix_of(&req.into_inner().name);
        tokio::spawn(async move {
            let result = tokio::select! {
                r = observe(&core, &who, &prefix, &out) => r,
                () = out.closed() => Ok(()),
                () = core.shutdown.cancelled() => Err(ApiError::Node(coordbench_node::NodeError::Stopped)),
            };
            if let Err(e) = result {
                let _ = out.try_send(Err(e.into()));
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn resign(
        &self,
        req: Request<ResignRequest>,
    ) -> Result<Response<ResignResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let leader = leader_key(req.into_inner().leader)?;
        let revision = self.core.resign(&who, &leader.key, leader.rev).await?;
        Ok(Response::new(ResignResponse {
            header: Some(self.core.stamp().header(revision)),
        }))
    }
}

/// etcd's `Election.observe`: the current leader, each new value it proclaims, and after
/// its key is deleted the next leader. Ends when the client goes away.
async fn observe<R: Replicator<KvStateMachine>>(
    core: &Core<R>,
    who: &Caller,
    prefix: &[u8],
    out: &mpsc::Sender<Result<LeaderResponse, Status>>,
) -> Result<(), ApiError> {
    let send = |revision: i64, kv| {
        out.send(Ok(LeaderResponse {
            header: Some(core.stamp().header(revision)),
            kv: Some(convert::key_value(kv)),
        }))
    };
    loop {
        let r = core.range(who, first_created(prefix)).await?;
        let (revision, kv) = match r.kvs.into_iter().next() {
            Some(kv) => (r.header.revision, kv),
            None => match core.wait_put(prefix, r.header.revision).await? {
                Some(kv) => (kv.mod_revision, kv),
                None => continue,
            },
        };
        let key = kv.key.clone();
        if send(revision, kv).await.is_err() {
            return Ok(());
        }
        // Follow the leader key until it is deleted.
        let req = WatchCreateRequest {
            key,
            start_revision: revision + 1,
            ..Default::default()
        };
        let Some((mut watch, mut events)) = core.internal_watch(&req) else {
            continue;
        };
        'follow: loop {
            for ev in events {
                if ev.kind == EventKind::Delete {
                    break 'follow;
                }
                if send(ev.revision(), ev.kv).await.is_err() {
                    return Ok(());
                }
            }
            match watch.next().await {
                Some(more) => events = more,
                None => break 'follow,
            }
        }
    }
}
