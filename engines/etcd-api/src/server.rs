//! Running the services: [`serve`] on a listener until a shutdown signal, or [`spawn`] a
//! background server and stop it through its [`ServerHandle`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use coordbench_node::Replicator;
use etcd_client::proto::{
    PbClusterServer, PbKvServer, PbLeaseServer, PbMaintenanceServer, PbWatchServer,
};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use crate::auth::AuthService;
use crate::authority::FixAuthority;
use crate::auto_compaction;
use crate::cluster::ClusterService;
use crate::core::Core;
use crate::election::ElectionService;
use crate::kv::KvService;
use crate::lease::LeaseService;
use crate::lease_expiry;
use crate::lock::LockService;
use crate::maintenance::MaintenanceService;
use crate::options::{derive_cluster_id, MemberInfo, ServeOptions};
use crate::pb::auth::auth_server::AuthServer;
use crate::pb::election::election_server::ElectionServer;
use crate::pb::lock::lock_server::LockServer;
use crate::state_machine::KvStateMachine;
use crate::tls_incoming::TlsIncoming;
use crate::watch::WatchService;

/// Room for gRPC framing above the largest request, as etcd allows (`grpcOverheadBytes`).
const GRPC_OVERHEAD: usize = 512 * 1024;

/// How long [`ServerHandle::shutdown`] waits for open calls before aborting the server.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("server task failed: {0}")]
    Task(String),
    #[error("server did not stop within {0:?}; aborted")]
    ShutdownTimeout(Duration),
}

/// Serves etcd's v3 API for `replicator`'s member on `listener` until `shutdown` resolves.
/// Then streams (watch, keep-alive, observe) and waits (lock, campaign) end with
/// `Unavailable`, open calls finish, and the lease expiry and auto-compaction tasks stop.
pub async fn serve<R, F>(
    listener: TcpListener,
    replicator: R,
    members: Vec<MemberInfo>,
    options: ServeOptions,
    shutdown: F,
) -> Result<(), ServeError>
where
    R: Replicator<KvStateMachine>,
    F: Future<Output = ()> + Send + 'static,
{
    let token = CancellationToken::new();
    let max_request = options.max_request_bytes.saturating_add(GRPC_OVERHEAD);
    replicator.read(|sm| sm.tokens().set_ttl(options.auth_token_ttl));
    let core = Arc::new(Core {
        watches: replicator.read(|sm| sm.watches().clone()),
        cluster_id: options
            .cluster_id
            .unwrap_or_else(|| derive_cluster_id(&members)),
        replicator,
        members,
        options,
        shutdown: token.clone(),
    });
    let expiry = tokio::spawn(lease_expiry::run(core.clone()));
    let compaction = core
        .options
        .auto_compaction
        .clone()
        .map(|setting| tokio::spawn(auto_compaction::run(core.clone(), setting)));

    macro_rules! service {
        ($server:ident, $service:ident) => {
            $server::new($service { core: core.clone() })
                .max_decoding_message_size(max_request)
                .max_encoding_message_size(usize::MAX)
        };
    }
    let stop = {
        let token = token.clone();
        async move {
            shutdown.await;
            token.cancel();
        }
    };
    let tls = core.options.tls.clone();
    let router = Server::builder()
        .add_service(service!(PbKvServer, KvService))
        .add_service(service!(PbWatchServer, WatchService))
        .add_service(service!(PbLeaseServer, LeaseService))
        .add_service(service!(PbMaintenanceServer, MaintenanceService))
        .add_service(service!(PbClusterServer, ClusterService))
        .add_service(service!(AuthServer, AuthService))
        .add_service(service!(LockServer, LockService))
        .add_service(service!(ElectionServer, ElectionService));
    // Each connection is read through FixAuthority: some etcd clients send a malformed
    // :authority that etcd accepts and h2 would refuse. Over TLS, the decrypted bytes.
    let result = match tls {
        None => {
            let incoming = TcpIncoming::from(listener)
                .with_nodelay(Some(true))
                .map(|conn| conn.map(FixAuthority::new));
            router.serve_with_incoming_shutdown(incoming, stop).await
        }
        Some(config) => {
            let incoming =
                TlsIncoming::new(listener, config).map(|conn| conn.map(FixAuthority::new));
            router.serve_with_incoming_shutdown(incoming, stop).await
        }
    };
    token.cancel();
    let _ = expiry.await;
    if let Some(task) = compaction {
        let _ = task.await;
    }
    Ok(result?)
}

/// A server running in the background.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<Result<(), ServeError>>,
}

impl ServerHandle {
    /// The address it listens on (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops gracefully; aborts if open calls do not finish within a few seconds.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        self.stop.cancel();
        match tokio::time::timeout(SHUTDOWN_GRACE, &mut self.task).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(ServeError::Task(e.to_string())),
            Err(_) => {
                self.task.abort();
                Err(ServeError::ShutdownTimeout(SHUTDOWN_GRACE))
            }
        }
    }
}

/// Binds `addr` (e.g. `127.0.0.1:0`) and serves in a background task.
pub async fn spawn<R: Replicator<KvStateMachine>>(
    addr: SocketAddr,
    replicator: R,
    members: Vec<MemberInfo>,
    options: ServeOptions,
) -> Result<ServerHandle, ServeError> {
    let bind = |source| ServeError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    let stop = CancellationToken::new();
    let signal = stop.clone().cancelled_owned();
    let task = tokio::spawn(serve(listener, replicator, members, options, signal));
    Ok(ServerHandle { addr, stop, task })
}
