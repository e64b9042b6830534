//! etcd's `Cluster` service: MemberList from the configured members; membership changes
//! answer Unimplemented (coordbench clusters are static).

use std::sync::Arc;

use coordbench_node::Replicator;
use etcd_client::proto::{
    PbClusterService, PbMember, PbMemberAddRequest, PbMemberAddResponse, PbMemberListRequest,
    PbMemberListResponse, PbMemberPromoteRequest, PbMemberPromoteResponse, PbMemberRemoveRequest,
    PbMemberRemoveResponse, PbMemberUpdateRequest, PbMemberUpdateResponse,
};
use tonic::{Request, Response, Status};

use crate::core::Core;
use crate::state_machine::KvStateMachine;

pub(crate) struct ClusterService<R> {
    pub core: Arc<Core<R>>,
}

fn static_membership() -> Status {
    Status::unimplemented("etcdserver: membership changes are not supported by coordbench")
}

#[tonic::async_trait]
impl<R: Replicator<KvStateMachine>> PbClusterService for ClusterService<R> {
    async fn member_add(
        &self,
        _: Request<PbMemberAddRequest>,
    ) -> Result<Response<PbMemberAddResponse>, Status> {
        Err(static_membership())
    }

    async fn member_remove(
        &self,
        _: Request<PbMemberRemoveRequest>,
    ) -> Result<Response<PbMemberRemoveResponse>, Status> {
        Err(static_membership())
    }

    async fn member_update(
        &self,
        _: Request<PbMemberUpdateRequest>,
    ) -> Result<Response<PbMemberUpdateResponse>, Status> {
        Err(static_membership())
    }

    async fn member_list(
        &self,
        _: Request<PbMemberListRequest>,
    ) -> Result<Response<PbMemberListResponse>, Status> {
        let members = self
            .core
            .members
            .iter()
            .map(|m| PbMember {
                id: m.id,
                name: m.name.clone(),
                peer_ur_ls: m.peer_urls.clone(),
                client_ur_ls: m.client_urls.clone(),
                is_learner: false,
            })
            .collect();
        Ok(Response::new(PbMemberListResponse {
            header: Some(self.core.stamp().header(self.core.revision())),
            members,
        }))
    }

    async fn member_promote(
        &self,
        _: Request<PbMemberPromoteRequest>,
    ) -> Result<Response<PbMemberPromoteResponse>, Status> {
        Err(static_membership())
    }
}
