//! Running the server: [`serve`] on a listener until a shutdown signal, or [`spawn`] a
//! background server and stop it through its [`ServerHandle`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use coordbench_node::Replicator;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::client_cap::ClientCap;
use crate::conn;
use crate::core::Core;
use crate::leader;
use crate::options::ServeOptions;
use crate::sessions;
use crate::state_machine::TreeStateMachine;

/// How long shutdown waits for connections and tasks before aborting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("server task failed: {0}")]
    Task(String),
    #[error("server did not stop within {0:?}; aborted")]
    ShutdownTimeout(Duration),
}

/// Serves ZooKeeper's client protocol for `replicator`'s member on `listener` until
/// `shutdown` resolves; then every connection is closed and the background tasks (session
/// touches, the leader's expiry and container checks) stop.
pub async fn serve<R, F>(
    listener: TcpListener,
    replicator: R,
    options: ServeOptions,
    shutdown: F,
) -> Result<(), ServeError>
where
    R: Replicator<TreeStateMachine>,
    F: Future<Output = ()> + Send + 'static,
{
    let token = CancellationToken::new();
    let cap = ClientCap::new(options.max_client_cnxns);
    let core = Arc::new(Core::new(replicator, options, token.clone()));
    let mut tasks = JoinSet::new();
    tasks.spawn(sessions::run_touches(core.clone()));
    tasks.spawn(leader::run(core.clone()));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match cap.admit(peer.ip()) {
                    Some(slot) => {
                        let core = core.clone();
                        tasks.spawn(async move {
                            conn::serve(core, stream, peer).await;
                            drop(slot);
                        });
                    }
                    // Dropping the stream closes it, as ZooKeeper does.
                    None => tracing::warn!(
                        "Too many connections from /{} - max is {}",
                        peer.ip(),
                        cap.max()
                    ),
                },
                Err(e) => {
                    // Out of descriptors and the like: back off rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            // Reap finished connections so the set does not grow without bound.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    token.cancel();
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
        return Err(ServeError::ShutdownTimeout(SHUTDOWN_GRACE));
    }
    Ok(())
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

    /// Stops gracefully; aborts what does not finish within a few seconds.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        self.stop.cancel();
        match tokio::time::timeout(SHUTDOWN_GRACE * 2, &mut self.task).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(ServeError::Task(e.to_string())),
            Err(_) => {
                self.task.abort();
                Err(ServeError::ShutdownTimeout(SHUTDOWN_GRACE * 2))
            }
        }
    }
}

/// Binds `addr` (e.g. `127.0.0.1:0`) and serves in a background task.
pub async fn spawn<R: Replicator<TreeStateMachine>>(
    addr: SocketAddr,
    replicator: R,
    options: ServeOptions,
) -> Result<ServerHandle, ServeError> {
    let bind = |source| ServeError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    let stop = CancellationToken::new();
    let signal = stop.clone().cancelled_owned();
    let task = tokio::spawn(serve(listener, replicator, options, signal));
    Ok(ServerHandle { addr, stop, task })
}
