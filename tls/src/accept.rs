//! Accepting TLS connections: a task accepts TCP connections and runs each handshake in a
//! task of its own under a bound, so a client that connects and never speaks (or a plain
//! HTTP/2 client) cannot hold up the others; finished handshakes are handed on in order of
//! completion. A failed handshake is logged and its connection dropped.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Connections waiting for the server to take them before the accept loop waits.
const BACKLOG: usize = 128;

/// The handshaken connections of one listener; dropping it stops accepting.
pub struct Accepted {
    /// Each connection with its peer's address.
    pub connections: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    task: JoinHandle<()>,
}

impl Drop for Accepted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Accepts on `listener` and handshakes with `config`, each handshake bounded by `timeout`.
/// Must be called inside a tokio runtime.
pub fn accept(listener: TcpListener, config: Arc<ServerConfig>, timeout: Duration) -> Accepted {
    let (tx, connections) = mpsc::channel(BACKLOG);
    let acceptor = TlsAcceptor::from(config);
    let task = tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) if transient(&e) => {
                    // Out of descriptors and the like: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => {
                    tracing::error!("TLS listener stopped accepting: {e}");
                    return;
                }
            };
            // Requests are small and latency-bound: no Nagle delay.
            let _ = tcp.set_nodelay(true);
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send((tls, peer)).await;
                    }
                    Ok(Err(e)) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
                    Err(_) => tracing::debug!("TLS handshake with {peer} took over {timeout:?}"),
                }
            });
        }
    });
    Accepted { connections, task }
}

fn transient(e: &io::Error) -> bool {
    !matches!(
        e.kind(),
        io::ErrorKind::InvalidInput | io::ErrorKind::NotConnected | io::ErrorKind::Unsupported
    )
}
