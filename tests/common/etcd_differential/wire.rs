//! The raw gRPC client of the etcd differential: etcd-client's generated request and reply
//! messages (`etcd_client::proto`), sent with tonic's generic client to the method paths
//! of etcd's services, so nothing stands between a test's request and the server. The
//! watch request messages are the only ones etcd-client does not export: they are written
//! out here with prost's derive (field numbers as in etcd's rpc.proto), as
//! engines/etcd-api/src/pb.rs does for the lock and election requests.

use std::time::Duration;

use futures::channel::mpsc;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::{Status, Streaming};

/// Bound on one call: a server that does not answer is a difference, not a hung test.
pub const CALL_BOUND: Duration = Duration::from_secs(10);

/// Method paths of etcd's v3 services.
pub mod path {
    pub const RANGE: &str = "/etcdserverpb.KV/Range";
    pub const PUT: &str = "/etcdserverpb.KV/Put";
    pub const DELETE_RANGE: &str = "/etcdserverpb.KV/DeleteRange";
    pub const TXN: &str = "/etcdserverpb.KV/Txn";
    pub const COMPACT: &str = "/etcdserverpb.KV/Compact";
    pub const LEASE_GRANT: &str = "/etcdserverpb.Lease/LeaseGrant";
    pub const LEASE_REVOKE: &str = "/etcdserverpb.Lease/LeaseRevoke";
    pub const LEASE_KEEP_ALIVE: &str = "/etcdserverpb.Lease/LeaseKeepAlive";
    pub const LEASE_TIME_TO_LIVE: &str = "/etcdserverpb.Lease/LeaseTimeToLive";
    pub const LEASE_LEASES: &str = "/etcdserverpb.Lease/LeaseLeases";
    pub const WATCH: &str = "/etcdserverpb.Watch/Watch";
}

/// etcdserverpb.WatchRequest.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct WatchRequest {
    #[prost(oneof = "WatchRequestUnion", tags = "1, 2, 3")]
    pub request_union: Option<WatchRequestUnion>,
}

#[derive(Clone, PartialEq, ::prost::Oneof)]
pub enum WatchRequestUnion {
    #[prost(message, tag = "1")]
    Create(WatchCreateRequest),
    #[prost(message, tag = "2")]
    Cancel(WatchCancelRequest),
    #[prost(message, tag = "3")]
    Progress(WatchProgressRequest),
}

/// etcdserverpb.WatchCreateRequest (`filters` are FilterType values: 0 NOPUT, 1 NODELETE).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct WatchCreateRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub start_revision: i64,
    #[prost(bool, tag = "4")]
    pub progress_notify: bool,
    #[prost(int32, repeated, tag = "5")]
    pub filters: Vec<i32>,
    #[prost(bool, tag = "6")]
    pub prev_kv: bool,
    #[prost(int64, tag = "7")]
    pub watch_id: i64,
    #[prost(bool, tag = "8")]
    pub fragment: bool,
}

/// etcdserverpb.WatchCancelRequest.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct WatchCancelRequest {
    #[prost(int64, tag = "1")]
    pub watch_id: i64,
}

/// etcdserverpb.WatchProgressRequest (no fields).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct WatchProgressRequest {}

/// One connection to a server.
#[derive(Clone)]
pub struct Wire {
    grpc: Grpc<Channel>,
}

impl Wire {
    /// Connects to `endpoint` (`http://host:port`).
    pub async fn connect(endpoint: &str) -> Wire {
        let channel = Endpoint::from_shared(endpoint.to_string())
            .expect("an endpoint URL")
            .connect_timeout(CALL_BOUND)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connecting to {endpoint}: {e}"));
        Wire {
            grpc: Grpc::new(channel),
        }
    }

    /// One unary call; a call that outlives [`CALL_BOUND`] is a `DeadlineExceeded`.
    pub async fn unary<Q, A>(&mut self, method: &'static str, req: Q) -> Result<A, Status>
    where
        Q: prost::Message + Send + Sync + 'static,
        A: prost::Message + Default + Send + Sync + 'static,
    {
        let grpc = &mut self.grpc;
        let call = async {
            ready(grpc).await?;
            let codec = tonic_prost::ProstCodec::<Q, A>::default();
            grpc.unary(
                tonic::Request::new(req),
                PathAndQuery::from_static(method),
                codec,
            )
            .await
        };
        bounded(call).await.map(tonic::Response::into_inner)
    }

    /// Opens a bidirectional stream whose requests are sent through the returned sender.
    /// `first` goes out before the call is awaited: etcd sends the stream's headers with
    /// its first answer.
    pub async fn stream<Q, A>(
        &mut self,
        method: &'static str,
        first: Q,
    ) -> Result<(mpsc::UnboundedSender<Q>, Streaming<A>), Status>
    where
        Q: prost::Message + Send + Sync + 'static,
        A: prost::Message + Default + Send + Sync + 'static,
    {
        let (tx, rx) = mpsc::unbounded();
        tx.unbounded_send(first).expect("receiver held");
        let grpc = &mut self.grpc;
        let call = async {
            ready(grpc).await?;
            let codec = tonic_prost::ProstCodec::<Q, A>::default();
            grpc.streaming(
                tonic::Request::new(rx),
                PathAndQuery::from_static(method),
                codec,
            )
            .await
        };
        bounded(call).await.map(|s| (tx, s.into_inner()))
    }
}

/// Waits until the channel can take a call.
async fn ready(grpc: &mut Grpc<Channel>) -> Result<(), Status> {
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("not ready: {e}")))
}

/// `call`, or a `DeadlineExceeded` once it outlives [`CALL_BOUND`].
async fn bounded<T>(
    call: impl std::future::Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    tokio::time::timeout(CALL_BOUND, call)
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("no answer (test's bound)")))
}
