//! etcd's v3lock `Lock` service (what etcd-client's `LockClient` calls): Lock waits for
//! ownership of `<name>/<lease>`, Unlock deletes the key. See `concurrency.rs`.

use std::sync::Arc;

use coordbench_node::Replicator;
use tonic::{Request, Response, Status};

use crate::core::Core;
use crate::pb::lock::lock_server::Lock;
use crate::pb::{LockRequest, LockResponse, UnlockRequest, UnlockResponse};
use crate::state_machine::KvStateMachine;

pub(crate) struct LockService<R> {
    pub core: Arc<Core<R>>,
}

#[tonic::async_trait]
impl<R: Replicator<KvStateMachine>> Lock for LockService<R> {
    async fn lock(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let req = req.into_inner();
        let (revision, key) = self.core.lock(&who, &req.name, req.lease).await?;
        Ok(Response::new(LockResponse {
            header: Some(self.core.stamp().header(revision)),
            key,
        }))
    }

    async fn unlock(
        &self,
        req: Request<UnlockRequest>,
    ) -> Result<Response<UnlockResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let revision = self.core.unlock(&who, &req.into_inner().key).await?;
        Ok(Response::new(UnlockResponse {
            header: Some(self.core.stamp().header(revision)),
        }))
    }
}
