//! One etcd endpoint's HTTP/2 connection: dialled with a timeout, kept alive with HTTP/2
//! pings, and redialled shortly after it breaks (a killed or restarted member), while the
//! transport sends through the others. Over TLS (`https://` endpoints) the dial also runs
//! the TLS handshake, and a refused certificate is told as what to fix
//! ([`coordbench_tls::describe`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use coordbench_tls::rustls::pki_types::ServerName;
use coordbench_tls::rustls::ClientConfig;
use coordbench_tls::tokio_rustls::TlsConnector;
use h2::client::{Connection, SendRequest};
use h2::{Ping, PingPong};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tonic::Status;

use super::io::{BatchingIo, Stream, TlsFailure};

/// Pause between a broken connection and the next dial, and between failed dials.
pub(super) const REDIAL: Duration = Duration::from_millis(250);
/// HTTP/2 windows as hyper's client sets them (tonic's transport): large enough that a
/// watch stream's burst of events never waits for a window update.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;

/// How connections are made and watched.
#[derive(Debug, Clone)]
pub struct Dialing {
    /// Bound on TCP connect plus the HTTP/2 handshake.
    pub connect_timeout: Duration,
    /// A ping is sent this long after the previous pong...
    pub keepalive_interval: Duration,
    /// ...and the connection counts as dead when its pong takes longer than this.
    pub keepalive_timeout: Duration,
    /// TLS for `https://` endpoints; `None`: plain HTTP/2 (`http://`).
    pub tls: Option<Arc<ClientConfig>>,
}

pub(super) type Conn = Connection<BatchingIo, Bytes>;

/// One endpoint: its address, its current connection's request handle (none while it is
/// down), and the calls waiting on it, which the transport balances by.
pub(super) struct Endpoint {
    authority: Authority,
    /// `https` over TLS, else `http`: what requests carry as `:scheme`.
    scheme: Scheme,
    sender: Mutex<Option<SendRequest<Bytes>>>,
    up: AtomicBool,
    in_flight: AtomicUsize,
    /// Calls sent here since the transport started (what [`super::EndpointView`] shows).
    calls: AtomicU64,
}

impl Endpoint {
    pub(super) fn new(authority: Authority, tls: bool) -> Self {
        Endpoint {
            authority,
            scheme: if tls { Scheme::HTTPS } else { Scheme::HTTP },
            sender: Mutex::new(None),
            up: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
        }
    }

    pub(super) fn address(&self) -> &str {
        self.authority.as_str()
    }

    pub(super) fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    pub(super) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    pub(super) fn load(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// A request handle on the live connection, if there is one.
    pub(super) fn sender(&self) -> Option<SendRequest<Bytes>> {
        self.sender.lock().ok()?.clone()
    }

    /// Counts a call against this endpoint until the guard is dropped.
    pub(super) fn start_call(&self) -> CallGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        CallGuard(&self.in_flight)
    }

    /// `path` on this endpoint: h2 takes `:scheme` and `:authority` from the URI.
    pub(super) fn uri(&self, path: Option<PathAndQuery>) -> Result<Uri, Status> {
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = path;
        Uri::from_parts(parts).map_err(|e| Status::internal(format!("request URI: {e}")))
    }

    pub(super) fn set(&self, sender: Option<SendRequest<Bytes>>) {
        self.up.store(sender.is_some(), Ordering::Relaxed);
        if let Ok(mut slot) = self.sender.lock() {
            *slot = sender;
        }
    }
}

pub(super) struct CallGuard<'a>(&'a AtomicUsize);

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A dialled connection: its request handle, the connection to drive, and its pings.
pub(super) struct Dialled {
    pub(super) sender: SendRequest<Bytes>,
    conn: Conn,
    pings: PingPong,
}

/// TCP connect, the TLS handshake when configured, HTTP/2 handshake and a first ping
/// answered, within the connect timeout. Waiting for the pong, as gRPC's clients wait for
/// the server's preface, makes a listener that accepts but never speaks HTTP/2 (a stopped
/// member) count as down; over TLS 1.3 it is also when a refused client certificate shows
/// (the server's alert arrives after the client's side of the handshake is done).
pub(super) async fn dial(address: &str, dialing: &Dialing) -> Result<Dialled, String> {
    let connect = async {
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| e.to_string())?;
        // Requests are small and latency-bound: no Nagle delay.
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (stream, client_auth) = match &dialing.tls {
            None => (Stream::Plain(tcp), None),
            Some(config) => {
                let (config, seen) = coordbench_tls::noting_client_auth(config);
                let tls = tls_handshake(tcp, address, &config).await?;
                (Stream::Tls(Box::new(tls)), Some(seen))
            }
        };
        let failure = TlsFailure::default();
        let h2_detail = |what: &str, e: &h2::Error| {
            tls_reason(e, &failure)
                .or_else(|| {
                    client_auth
                        .as_ref()
                        .and_then(coordbench_tls::describe_after_handshake)
                })
                .unwrap_or_else(|| format!("{what}: {e}"))
        };
        let (sender, mut conn) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .handshake(BatchingIo::new(stream, failure.clone()))
            .await
            .map_err(|e| h2_detail("http/2 handshake", &e))?;
        let mut pings = conn
            .ping_pong()
            .ok_or_else(|| "http/2 pings unavailable".to_string())?;
        tokio::select! {
            closed = &mut conn => {
                return Err(match closed {
                    Ok(()) => client_auth
                        .as_ref()
                        .and_then(coordbench_tls::describe_after_handshake)
                        .unwrap_or_else(|| "connection closed during the handshake".to_string()),
                    Err(e) => h2_detail("http/2", &e),
                });
            }
            pong = pings.ping(Ping::opaque()) => pong.map_err(|e| h2_detail("http/2 ping", &e))?,
        };
        Ok(Dialled {
            sender,
            conn,
            pings,
        })
    };
    tokio::time::timeout(dialing.connect_timeout, connect)
        .await
        .map_err(|_| format!("no HTTP/2 answer within {:?}", dialing.connect_timeout))?
}

/// The client's TLS handshake; the server is verified as the endpoint's host (an IP address
/// or a DNS name).
async fn tls_handshake(
    tcp: TcpStream,
    address: &str,
    config: &Arc<ClientConfig>,
) -> Result<coordbench_tls::tokio_rustls::client::TlsStream<TcpStream>, String> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| format!("TLS: {host} is not a server name ({e})"))?;
    TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| coordbench_tls::describe(&e).unwrap_or_else(|| format!("TLS handshake: {e}")))
}

/// The TLS reason an h2 error had, when a TLS alert or record broke the connection.
fn tls_reason(e: &h2::Error, tls: &TlsFailure) -> Option<String> {
    tls.get()
        .cloned()
        .or_else(|| e.get_io().and_then(coordbench_tls::describe))
}

/// Runs `endpoint`'s connections for as long as the transport lives (it aborts this task):
/// drives the current one until it breaks, then redials every [`REDIAL`]. `connected` is
/// told of every new connection, so calls waiting for any endpoint to come up go on.
pub(super) async fn supervise(
    endpoint: Arc<Endpoint>,
    mut dialled: Option<Dialled>,
    dialing: Dialing,
    connected: Arc<Notify>,
) {
    loop {
        if let Some(d) = dialled.take() {
            endpoint.set(Some(d.sender));
            connected.notify_waiters();
            drive(d.conn, d.pings, &dialing).await;
            endpoint.set(None);
        }
        tokio::time::sleep(REDIAL).await;
        dialled = dial(endpoint.address(), &dialing).await.ok();
    }
}

/// Drives one connection until the socket closes, the connection fails, or a keep-alive
/// ping goes unanswered (a paused or partitioned member). Dropping it fails its calls.
async fn drive(conn: Conn, mut pings: PingPong, dialing: &Dialing) {
    let keepalive = async {
        loop {
            tokio::time::sleep(dialing.keepalive_interval).await;
            let pong = tokio::time::timeout(dialing.keepalive_timeout, pings.ping(Ping::opaque()));
            if !matches!(pong.await, Ok(Ok(_))) {
                return;
            }
        }
    };
    tokio::select! {
        _ = conn => {}
        () = keepalive => {}
    }
}
