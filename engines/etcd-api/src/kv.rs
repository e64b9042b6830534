//! etcd's `KV` service: Range (and RangeStream), Put, DeleteRange, Txn, Compact.

use std::pin::Pin;
use std::sync::Arc;

use coordbench_kv::{Command, Response as KvResponse};
use coordbench_node::Replicator;
use etcd_client::proto::{
    PbCompactionRequest, PbCompactionResponse, PbDeleteRequest, PbDeleteResponse, PbKvService,
    PbPutRequest, PbPutResponse, PbRangeRequest, PbRangeResponse, PbRangeStreamResponse,
    PbTxnRequest, PbTxnResponse,
};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::check;
use crate::convert;
use crate::core::Core;
use crate::error::ApiError;
use crate::options::WrongAnswer;
use crate::state_machine::KvStateMachine;

pub(crate) struct KvService<R> {
    pub core: Arc<Core<R>>,
}

type RangeStream = Pin<Box<dyn Stream<Item = Result<PbRangeStreamResponse, Status>> + Send>>;

#[tonic::async_trait]
impl<R: Replicator<KvStateMachine>> PbKvService for KvService<R> {
    async fn range(
        &self,
        req: Request<PbRangeRequest>,
    ) -> Result<Response<PbRangeResponse>, Status> {
        check::range(req.get_ref())?;
        let who = self.core.caller(req.metadata()).await?;
        let req = convert::range_request(req.into_inner());
        let resp = self.core.range(&who, req).await?;
        Ok(Response::new(convert::range_response(
            resp,
            &self.core.stamp(),
        )))
    }

    type RangeStreamStream = RangeStream;

    /// etcd 3.7's chunked Range; answered as a single chunk carrying the whole response.
    async fn range_stream(
        &self,
        req: Request<PbRangeRequest>,
    ) -> Result<Response<RangeStream>, Status> {
        check::range(req.get_ref())?;
        let who = self.core.caller(req.metadata()).await?;
        let req = convert::range_request(req.into_inner());
        let resp = self.core.range(&who, req).await?;
        let chunk = PbRangeStreamResponse {
            range_response: Some(convert::range_response(resp, &self.core.stamp())),
        };
        Ok(Response::new(Box::pin(tokio_stream::once(Ok(chunk)))))
    }

    async fn put(&self, req: Request<PbPutRequest>) -> Result<Response<PbPutResponse>, Status> {
        check::put(req.get_ref())?;
        let who = self.core.caller(req.metadata()).await?;
        let resp = self
            .core
            .put(&who, convert::put_request(req.into_inner()))
            .await?;
        let mut resp = convert::put_response(resp, &self.core.stamp());
        if self.core.options.wrong_answer == Some(WrongAnswer::PutPrevKv) {
            resp.prev_kv = None;
        }
        Ok(Response::new(resp))
    }

    async fn delete_range(
        &self,
        req: Request<PbDeleteRequest>,
    ) -> Result<Response<PbDeleteResponse>, Status> {
        check::delete(req.get_ref())?;
        let who = self.core.caller(req.metadata()).await?;
        let resp = self
            .core
            .delete(&who, convert::delete_request(req.into_inner()))
            .await?;
        Ok(Response::new(convert::delete_response(
            resp,
            &self.core.stamp(),
        )))
    }

    async fn txn(&self, req: Request<PbTxnRequest>) -> Result<Response<PbTxnResponse>, Status> {
        check::txn(req.get_ref())?;
        let who = self.core.caller(req.metadata()).await?;
        let req = convert::txn_request(req.into_inner())?;
        let resp = self.core.txn(&who, req).await?;
        Ok(Response::new(convert::txn_response(
            resp,
            &self.core.stamp(),
        )))
    }

    async fn compact(
        &self,
        req: Request<PbCompactionRequest>,
    ) -> Result<Response<PbCompactionResponse>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let cmd = Command::Compact(convert::compaction_request(req.into_inner()));
        match self.core.propose(&who, cmd).await? {
            KvResponse::Compact(r) => Ok(Response::new(PbCompactionResponse {
                header: Some(self.core.stamp().header(r.header.revision)),
            })),
            _ => Err(ApiError::Internal("unexpected output for a compact command".into()).into()),
        }
    }
}
