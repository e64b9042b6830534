//! Accepting TLS connections: a task accepts TCP connections and runs each handshake in a
//! task of its own under a bound, so a client that connects and never speaks (or a plain
//! HTTP/2 client) cannot hold up the others; finished handshakes are handed on in order of
//! completion. A failed handshake is logged and its connection dropped.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Connections waiting for the server to take them before the accept loop waits.
const BACKLOG: usize = 128;
/// How long a refused client is given to read the alert and close.
const LINGER: Duration = Duration::from_secs(1);

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
                let handshake = acceptor.accept(tcp).into_fallible();
                match tokio::time::timeout(timeout, handshake).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send((tls, peer)).await;
                    }
                    Ok(Err((e, tcp))) => {
                        tracing::debug!("TLS handshake with {peer} failed: {e}");
                        linger(tcp).await;
                    }
                    Err(_) => tracing::debug!("TLS handshake with {peer} took over {timeout:?}"),
                }
            });
        }
    });
    Accepted { connections, task }
}

/// Closes a connection whose handshake failed without resetting it. Under TLS 1.3 the
/// client finishes its side first and may already have sent requests when the server's
/// alert (say, certificate required) goes out; closing a socket with unread bytes sends a
/// reset, which can overtake the alert, and the client would see "connection reset"
/// instead of the reason. So: half-close, read what the client sent until it closes, for
/// a moment at most.
async fn linger(mut tcp: TcpStream) {
    let _ = tcp.shutdown().await;
    let mut sink = [0u8; 4096];
    let drain = async { while matches!(tcp.read(&mut sink).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

fn transient(e: &io::Error) -> bool {
    !matches!(
        e.kind(),
        io::ErrorKind::InvalidInput | io::ErrorKind::NotConnected | io::ErrorKind::Unsupported
    )
}
