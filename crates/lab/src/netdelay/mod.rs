//! A userspace TCP proxy that delays traffic between cluster members (and optionally
//! between clients and members), since `tc netem` is not available where coordbench runs,
//! and that can cut links between members (partitions).
//!
//! Each [`Route`] is one listener on 127.0.0.1 forwarding to one upstream address; every
//! byte that crosses it, in either direction, is held for the one-way delay (plus jitter)
//! before it is written on, in order ([`pipe`]). Launchers point members at route
//! listeners instead of each other (etcd's peer URLs, ZooKeeper's server.N lines, the
//! engines' `--peers`). A route knows the members at its ends ([`Ends`]), so a cut link
//! ([`Proxy::set_link_up`], [`links`]) stalls exactly the connections between those two
//! members: their bytes stop flowing but stay queued and the connections stay open, new
//! connections across the link are accepted but not connected on, and once the link is
//! restored everything queued flows on, as after a real partition when TCP retransmits.
//!
//! The proxy runs on the tokio runtime of the coordbench process for the life of the
//! cluster; [`Proxy::stop`] (also on drop) closes every listener and connection.

mod dialer;
mod links;
mod pipe;
mod zk_election;

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use dialer::{Dialer, MemberPids};
pub use links::{Gate, Link, Links};

/// One-way delay and jitter added per direction: `5ms` or `5ms,1ms` (each byte is held
/// for the delay plus a uniform draw from ±jitter, never less than zero, never overtaking
/// earlier bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct NetDelay {
    #[serde(serialize_with = "as_micros")]
    pub delay: Duration,
    #[serde(serialize_with = "as_micros")]
    pub jitter: Duration,
}

fn as_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

impl FromStr for NetDelay {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse = |part: &str| {
            coordbench_results::parse::parse_duration(part)
                .map_err(|e| format!("'{part}': {e}; e.g. 5ms or 5ms,1ms"))
        };
        let (delay, jitter) = match s.split_once(',') {
            Some((d, j)) => (parse(d)?, parse(j)?),
            None => (parse(s)?, Duration::ZERO),
        };
        if jitter > delay {
            return Err(format!(
                "jitter {jitter:?} exceeds the delay {delay:?}; a byte cannot arrive before it was sent"
            ));
        }
        if delay > Duration::from_secs(10) {
            return Err("a network delay above 10s would stall every protocol; use less".into());
        }
        Ok(NetDelay { delay, jitter })
    }
}

impl fmt::Display for NetDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}us", self.delay.as_micros())?;
        if !self.jitter.is_zero() {
            write!(f, ",{}us", self.jitter.as_micros())?;
        }
        Ok(())
    }
}

/// Who is at the two ends of a route's connections, which decides the link they stall on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ends {
    /// Member `from` dials member `to` (a route per link: ZooKeeper, the engines).
    Link { from: usize, to: usize },
    /// Any member dials member `to` (a route per destination: etcd). Each connection's
    /// dialer is the member process holding its other end ([`dialer`]).
    AnyTo(usize),
    /// Clients to a member: never cut, so a partitioned member keeps its clients.
    Client,
}

/// What a route does to the first bytes of each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Nothing: every byte is forwarded as it is.
    Plain,
    /// ZooKeeper's election port: the dialer's own address in its handshake becomes the
    /// route of the reverse link ([`zk_election`]), so a connection back goes through the
    /// proxy too. Needs [`Ends::Link`].
    ZooKeeperElection,
}

/// One listener and where it forwards to.
#[derive(Debug)]
pub struct Route {
    /// E.g. `m1->m2` or `client->m1`.
    pub name: String,
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
    pub ends: Ends,
}

/// Every route of one cluster, the cut links and the tasks serving them.
#[derive(Debug)]
pub struct Proxy {
    delay: NetDelay,
    routes: Vec<Route>,
    links: Links,
    pids: MemberPids,
    /// Connections on [`Ends::AnyTo`] routes whose dialer was no member (never cut).
    unattributed: Arc<AtomicU64>,
    /// [`Handshake::ZooKeeperElection`] routes by link, for the reverse of each.
    election_routes: ElectionRoutes,
    cancel: CancellationToken,
    listeners: Vec<JoinHandle<()>>,
}

type ElectionRoutes = Arc<std::sync::Mutex<std::collections::HashMap<Link, SocketAddr>>>;

/// What one route's connections share.
#[derive(Clone)]
struct RouteContext {
    listen: SocketAddr,
    upstream: SocketAddr,
    ends: Ends,
    handshake: Handshake,
    delay: NetDelay,
    links: Links,
    pids: MemberPids,
    unattributed: Arc<AtomicU64>,
    election_routes: ElectionRoutes,
    cancel: CancellationToken,
}

impl Proxy {
    pub fn new(delay: NetDelay) -> Proxy {
        Proxy {
            delay,
            routes: Vec::new(),
            links: Links::default(),
            pids: MemberPids::default(),
            unattributed: Arc::new(AtomicU64::new(0)),
            election_routes: ElectionRoutes::default(),
            cancel: CancellationToken::new(),
            listeners: Vec::new(),
        }
    }

    pub fn delay(&self) -> NetDelay {
        self.delay
    }

    /// Opens a listener on 127.0.0.1 (a free port) that forwards to `upstream` with the
    /// delay; returns its address. Must be called inside a tokio runtime.
    pub async fn add_route(
        &mut self,
        name: impl Into<String>,
        upstream: SocketAddr,
        ends: Ends,
    ) -> std::io::Result<SocketAddr> {
        self.add_route_with(name, upstream, ends, Handshake::Plain)
            .await
    }

    /// [`add_route`](Self::add_route) for a protocol whose first bytes the proxy must
    /// adapt ([`Handshake`]).
    pub async fn add_route_with(
        &mut self,
        name: impl Into<String>,
        upstream: SocketAddr,
        ends: Ends,
        handshake: Handshake,
    ) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let listen = listener.local_addr()?;
        if let (Handshake::ZooKeeperElection, Ends::Link { from, to }) = (handshake, ends) {
            self.election_routes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert((from, to), listen);
        }
        let context = RouteContext {
            listen,
            upstream,
            ends,
            handshake,
            delay: self.delay,
            links: self.links.clone(),
            pids: self.pids.clone(),
            unattributed: self.unattributed.clone(),
            election_routes: self.election_routes.clone(),
            cancel: self.cancel.clone(),
        };
        self.listeners.push(tokio::spawn(serve(listener, context)));
        self.routes.push(Route {
            name: name.into(),
            listen,
            upstream,
            ends,
        });
        Ok(listen)
    }

    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// Records that member `member` now runs as `pid` (for [`Ends::AnyTo`] routes).
    pub fn set_member_pid(&self, member: usize, pid: u32) {
        self.pids.set(member, pid);
    }

    /// Cuts (`false`) or restores (`true`) the link from member `from` to member `to`:
    /// while cut, the connections `from` dialed to `to` stall (see the module doc).
    pub fn set_link_up(&self, from: usize, to: usize, up: bool) {
        self.links.set(from, to, up);
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.links.heal();
    }

    /// The links cut now.
    pub fn cut_links(&self) -> std::collections::BTreeSet<Link> {
        self.links.cut()
    }

    /// Connections on routes shared by all dialers whose dialer was not found among the
    /// members (they are never cut); 0 when every member connection was attributed.
    pub fn unattributed(&self) -> u64 {
        self.unattributed.load(Ordering::Relaxed)
    }

    /// Closes every listener and connection. Idempotent; needs no runtime.
    pub fn stop(&mut self) {
        self.cancel.cancel();
        for task in self.listeners.drain(..) {
            task.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Accepts on one route until cancelled; each connection is forwarded by its own task.
async fn serve(listener: TcpListener, route: RouteContext) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = route.cancel.cancelled() => return,
        };
        let Ok((inbound, peer)) = accepted else {
            // Out of descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let route = route.clone();
        tokio::spawn(async move {
            let cancel = route.cancel.clone();
            tokio::select! {
                _ = connection(inbound, peer, route) => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}

/// How long a connection whose upstream refuses is held while the proxy tries again.
/// The dialer's connect succeeded already (the proxy accepted it), so a refusal can only
/// reach it as a close after the fact, which protocols treat as a broken connection, not
/// as "not listening yet": ZooKeeper's followers dial the new leader's quorum port as the
/// leader opens it, and one that sees its connection close goes back to electing.
const UPSTREAM_WAIT: Duration = Duration::from_secs(1);
const UPSTREAM_RETRY: Duration = Duration::from_millis(10);

async fn connect_upstream(upstream: SocketAddr) -> Option<TcpStream> {
    let deadline = tokio::time::Instant::now() + UPSTREAM_WAIT;
    loop {
        match TcpStream::connect(upstream).await {
            Ok(s) => return Some(s),
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(UPSTREAM_RETRY).await;
            }
            Err(_) => return None,
        }
    }
}

/// One accepted connection: find its link, wait while the link is cut (the dialer's bytes
/// wait unread, as behind a SYN that is not answered yet), then connect and forward.
async fn connection(mut inbound: TcpStream, peer: SocketAddr, route: RouteContext) {
    let mut gate = match route.ends {
        Ends::Link { from, to } => route.links.gate((from, to)),
        Ends::AnyTo(to) => {
            let (pids, listen) = (route.pids.clone(), route.listen);
            let dialer = tokio::task::spawn_blocking(move || pids.dialer_of(peer, listen))
                .await
                .unwrap_or(Dialer::Gone);
            match dialer {
                Dialer::Member(from) => route.links.gate((from, to)),
                // Its dialer closed it already (or died, killed): nothing to forward it to.
                Dialer::Gone => return,
                Dialer::Stranger => {
                    route.unattributed.fetch_add(1, Ordering::Relaxed);
                    Gate::open()
                }
            }
        }
        Ends::Client => Gate::open(),
    };
    let first = match first_bytes(&mut inbound, &route).await {
        Ok(first) => first,
        Err(_) => return, // the dialer went away or broke the protocol: close
    };
    gate.wait_up().await;
    let Some(mut outbound) = connect_upstream(route.upstream).await else {
        return; // the member is down: the dialer sees the connection close
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    if !first.is_empty() {
        gate.wait_up().await;
        if tokio::io::AsyncWriteExt::write_all(&mut outbound, &first)
            .await
            .is_err()
        {
            return;
        }
    }
    pipe::forward(inbound, outbound, route.delay, &gate).await;
}

/// What a route's [`Handshake`] sends upstream before forwarding the rest as it is.
async fn first_bytes(inbound: &mut TcpStream, route: &RouteContext) -> std::io::Result<Vec<u8>> {
    let (Handshake::ZooKeeperElection, Ends::Link { from, to }) = (route.handshake, route.ends)
    else {
        return Ok(Vec::new());
    };
    let back = route
        .election_routes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&(to, from))
        .copied();
    match back {
        Some(back) => zk_election::rewrite_handshake(inbound, back).await,
        None => Ok(Vec::new()), // no reverse route: nothing better to name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn net_delay_parses_delay_and_optional_jitter() {
        let d: NetDelay = "5ms".parse().unwrap();
        assert_eq!(
            (d.delay, d.jitter),
            (Duration::from_millis(5), Duration::ZERO)
        );
        let d: NetDelay = "5ms,1ms".parse().unwrap();
        assert_eq!(d.jitter, Duration::from_millis(1));
        // A bare number is milliseconds, as in every timing option.
        let d: NetDelay = "5,1".parse().unwrap();
        assert_eq!(
            (d.delay, d.jitter),
            (Duration::from_millis(5), Duration::from_millis(1))
        );
        for bad in ["", "1ms,2ms", "fast", "1h", "5x"] {
            let err = bad.parse::<NetDelay>().unwrap_err();
            assert!(!err.contains('\n'), "{bad}: {err}");
        }
    }

    /// An echo server on 127.0.0.1 that counts the connections it accepted.
    async fn echo_server() -> (SocketAddr, Arc<AtomicU64>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = conn.read(&mut buf).await {
                        if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    /// Reads what arrives within `wait`: `None` if the connection closed.
    async fn read_for(conn: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
                Err(_) => return Some(got),
                Ok(Ok(0)) | Ok(Err(_)) => return None,
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Reads until `len` bytes arrived (`Some`), the peer closed (`None`), or `bound`
    /// passed (`Some` with what arrived).
    async fn read_until(conn: &mut TcpStream, len: usize, bound: Duration) -> Option<Vec<u8>> {
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + bound;
        let mut buf = [0u8; 1024];
        while got.len() < len {
            match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
                Err(_) => break,
                Ok(Ok(0)) | Ok(Err(_)) => return None,
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            }
        }
        Some(got)
    }

    #[tokio::test]
    async fn a_cut_link_stalls_its_bytes_and_new_connections_until_healed_in_order() {
        let (upstream, accepted) = echo_server().await;
        let mut proxy = Proxy::new(NetDelay::default());
        let route = proxy
            .add_route("m1->m2", upstream, Ends::Link { from: 0, to: 1 })
            .await
            .unwrap();
        let mut open = TcpStream::connect(route).await.unwrap();
        open.write_all(b"a").await.unwrap();
        let quiet = Duration::from_millis(300);
        assert_eq!(read_for(&mut open, quiet).await.as_deref(), Some(&b"a"[..]));

        // The reverse link is another link: cutting it leaves this one flowing.
        proxy.set_link_up(1, 0, false);
        open.write_all(b"b").await.unwrap();
        assert_eq!(read_for(&mut open, quiet).await.as_deref(), Some(&b"b"[..]));

        proxy.set_link_up(0, 1, false);
        for chunk in [&b"cd"[..], b"e", b"fgh"] {
            open.write_all(chunk).await.unwrap();
        }
        let stalled = read_for(&mut open, quiet).await;
        assert_eq!(
            stalled.as_deref(),
            Some(&b""[..]),
            "bytes crossed a cut link, or it closed"
        );
        let mut late = TcpStream::connect(route)
            .await
            .expect("a new connection is accepted");
        late.write_all(b"late").await.unwrap();
        assert_eq!(read_for(&mut late, quiet).await.as_deref(), Some(&b""[..]));
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "connected upstream across a cut"
        );

        proxy.heal();
        assert!(proxy.cut_links().is_empty());
        assert_eq!(
            read_for(&mut open, quiet).await.as_deref(),
            Some(&b"cdefgh"[..]),
            "what was sent during the cut arrives after the heal, in order"
        );
        assert_eq!(
            read_for(&mut late, quiet).await.as_deref(),
            Some(&b"late"[..])
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        proxy.stop();
    }

    #[tokio::test]
    async fn client_routes_and_unknown_dialers_are_never_cut() {
        let (upstream, _) = echo_server().await;
        let mut proxy = Proxy::new(NetDelay::default());
        let client = proxy
            .add_route("client->m1", upstream, Ends::Client)
            .await
            .unwrap();
        let shared = proxy
            .add_route("->m1", upstream, Ends::AnyTo(0))
            .await
            .unwrap();
        for from in 0..3 {
            proxy.set_link_up(from, 0, false);
        }
        for addr in [client, shared] {
            let mut conn = TcpStream::connect(addr).await.unwrap();
            conn.write_all(b"x").await.unwrap();
            // The shared route looks for the dialer among the members for a while first
            // (at least PID_WAIT; far longer on a loaded machine, where each look-up's scan
            // of /proc is slow), so wait for the echo rather than for a fixed time.
            let got = read_until(&mut conn, 1, dialer::PID_WAIT * 50).await;
            assert_eq!(got.as_deref(), Some(&b"x"[..]), "{addr}");
        }
        // This test process is no member: the shared route could not attribute it.
        assert_eq!(proxy.unattributed(), 1);
    }

    #[tokio::test]
    async fn a_shared_route_stalls_the_link_of_the_member_that_dialed() {
        let (upstream, _) = echo_server().await;
        let mut proxy = Proxy::new(NetDelay::default());
        let shared = proxy
            .add_route("->m3", upstream, Ends::AnyTo(2))
            .await
            .unwrap();
        // This process plays member 1 (index 0).
        proxy.set_member_pid(0, std::process::id());
        proxy.set_link_up(1, 2, false);
        let mut conn = TcpStream::connect(shared).await.unwrap();
        conn.write_all(b"1").await.unwrap();
        let quiet = Duration::from_millis(300);
        assert_eq!(read_for(&mut conn, quiet).await.as_deref(), Some(&b"1"[..]));
        proxy.set_link_up(0, 2, false);
        conn.write_all(b"2").await.unwrap();
        assert_eq!(read_for(&mut conn, quiet).await.as_deref(), Some(&b""[..]));
        proxy.heal();
        assert_eq!(read_for(&mut conn, quiet).await.as_deref(), Some(&b"2"[..]));
        assert_eq!(proxy.unattributed(), 0);
    }
}
