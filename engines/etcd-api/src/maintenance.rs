//! etcd's `Maintenance` service: Status (and Alarm's GET, which has nothing to report);
//! the rest answers Unimplemented.

use std::pin::Pin;
use std::sync::Arc;

use coordbench_node::Replicator;
use etcd_client::proto::{
    PbAlarmRequest, PbAlarmResponse, PbDefragmentRequest, PbDefragmentResponse, PbDowngradeRequest,
    PbDowngradeResponse, PbHashKvRequest, PbHashKvResponse, PbHashRequest, PbHashResponse,
    PbMaintenanceService, PbMoveLeaderRequest, PbMoveLeaderResponse, PbSnapshotRequest,
    PbSnapshotResponse, PbStatusRequest, PbStatusResponse,
};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::core::Core;
use crate::state_machine::KvStateMachine;

/// etcd's `AlarmRequest.AlarmAction.GET`.
const ALARM_GET: i32 = 0;

pub(crate) struct MaintenanceService<R> {
    pub core: Arc<Core<R>>,
}

fn unsupported(what: &str) -> Status {
    Status::unimplemented(format!("etcdserver: {what} is not supported by coordbench"))
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<PbSnapshotResponse, Status>> + Send>>;

#[tonic::async_trait]
impl<R: Replicator<KvStateMachine>> PbMaintenanceService for MaintenanceService<R> {
    async fn alarm(
        &self,
        req: Request<PbAlarmRequest>,
    ) -> Result<Response<PbAlarmResponse>, Status> {
        if req.into_inner().action != ALARM_GET {
            return Err(unsupported("raising or clearing alarms"));
        }
        Ok(Response::new(PbAlarmResponse {
            header: Some(self.core.stamp().header(self.core.revision())),
            alarms: Vec::new(),
        }))
    }

    async fn status(
        &self,
        _req: Request<PbStatusRequest>,
    ) -> Result<Response<PbStatusResponse>, Status> {
        let st = self.core.replicator.status();
        let (revision, db_size) = self
            .core
            .replicator
            .read(|sm| (sm.store().revision(), sm.db_size()));
        let db_size = i64::try_from(db_size).unwrap_or(i64::MAX);
        let leader = st.leader.unwrap_or(0);
        Ok(Response::new(PbStatusResponse {
            header: Some(self.core.stamp().header(revision)),
            version: self.core.options.version.clone(),
            db_size,
            leader,
            raft_index: st.commit_index,
            raft_term: st.term,
            raft_applied_index: st.applied_index,
            // etcd reports a missing leader here rather than failing the call.
            errors: if leader == 0 {
                vec!["etcdserver: no leader".to_string()]
            } else {
                Vec::new()
            },
            db_size_in_use: db_size,
            is_learner: false,
            ..Default::default()
        }))
    }

    async fn defragment(
        &self,
        _req: Request<PbDefragmentRequest>,
    ) -> Result<Response<PbDefragmentResponse>, Status> {
        Err(unsupported("Defragment"))
    }

    async fn hash(&self, _req: Request<PbHashRequest>) -> Result<Response<PbHashResponse>, Status> {
        Err(unsupported("Hash"))
    }

    async fn hash_kv(
        &self,
        _req: Request<PbHashKvRequest>,
    ) -> Result<Response<PbHashKvResponse>, Status> {
        Err(unsupported("HashKV"))
    }

    type SnapshotStream = SnapshotStream;

    async fn snapshot(
        &self,
        _req: Request<PbSnapshotRequest>,
    ) -> Result<Response<SnapshotStream>, Status> {
        Err(unsupported("Snapshot"))
    }

    async fn move_leader(
        &self,
        _req: Request<PbMoveLeaderRequest>,
    ) -> Result<Response<PbMoveLeaderResponse>, Status> {
        Err(unsupported("MoveLeader"))
    }

    async fn downgrade(
        &self,
        _req: Request<PbDowngradeRequest>,
    ) -> Result<Response<PbDowngradeResponse>, Status> {
        Err(unsupported("Downgrade"))
    }
}
