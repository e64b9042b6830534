//! `coordbench serve raft|zab`: one member of a built-in engine as a server process.
//!
//! A Raft member is the node runtime (engines/node: WAL, transport, the Raft core) carrying
//! etcd's data model (engines/kv) and serving etcd's v3 gRPC API (engines/etcd-api), so
//! etcdctl and every etcd client work against it unchanged. A Zab member is the same runtime
//! around the Zab core carrying ZooKeeper's data tree (engines/tree) and serving ZooKeeper's
//! protocol (engines/zk-api), so zkCli and ZooKeeper clients work against it. Both take the
//! same arguments ([`ServeArgs`]). `--target raft|zab` starts N of these processes (see
//! `provision::raft`, `provision::zab`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use coordbench_etcd_api::{
    serve, AutoCompaction, KvStateMachine, LeaseTiming, MemberInfo, ServeOptions,
};
use coordbench_node::disk::DiskKind as EngineDisk;
use coordbench_node::{NodeConfig, RaftNode, ZabNode};
use coordbench_zk_api::TreeStateMachine;
use tokio::net::TcpListener;

/// Options of one member of either engine.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// This member's id (1-based, one of the ids in --peers).
    #[arg(long)]
    pub id: u64,

    /// Every member's peer address, this one's included: 1=127.0.0.1:23801,2=...
    #[arg(long, value_parser = parse_member_addrs)]
    pub peers: MemberAddrs,

    /// Every member's client (etcd gRPC or ZooKeeper) address; this member listens on its
    /// own: 1=127.0.0.1:23791,...
    #[arg(long, value_parser = parse_member_addrs)]
    pub clients: MemberAddrs,

    /// Where the write-ahead log and snapshots live.
    #[arg(long)]
    pub data_dir: PathBuf,

    /// disk (fdatasync), tmpfs, nofsync, or emulated sync latency: hdd, ssd, nvme.
    #[arg(long, default_value = "disk", value_parser = parse_engine_disk)]
    pub disk: EngineDisk,

    /// Length of one tick of the consensus core.
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub tick: Duration,

    /// Heartbeat (Zab: ping) interval, in ticks.
    #[arg(long, default_value_t = 10)]
    pub heartbeat_ticks: u32,

    /// Election timeout range [min, max), in ticks (Zab: syncLimit = min, initLimit = max).
    #[arg(long, default_value_t = 100)]
    pub election_ticks_min: u32,
    #[arg(long, default_value_t = 200)]
    pub election_ticks_max: u32,

    /// Applied entries between snapshots (log compaction) at least. A snapshot is taken
    /// once this many entries were applied since the last one AND their commands add up to
    /// a quarter of the last snapshot's size, so the cost of serializing the whole state
    /// stays amortized as it grows, or once 4 times this many entries were applied, whatever
    /// the state's size (a restart replays at most that log, however long the history).
    /// raft: a snapshot is an index into the value log (no
    /// values), so it is taken far more often than etcd's --snapshot-count 100,000 and the
    /// log stays short (etcd keeps 5,000 entries after its snapshot); zab: ZooKeeper's
    /// snapCount default applies (zab's snapshots hold the whole tree).
    #[arg(long)]
    pub snapshot_every: Option<u64>,

    /// zab: ZooKeeper's tickTime; sessions are negotiated within its bounds and expire on it.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub session_tick: Duration,

    /// zab: smallest session timeout granted (default 2 x --session-tick).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub min_session_timeout: Option<Duration>,

    /// zab: largest session timeout granted (default 20 x --session-tick).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_session_timeout: Option<Duration>,

    /// zab: connections one client address may hold at once (ZooKeeper's maxClientCnxns);
    /// 0: unlimited.
    #[arg(long, default_value_t = 60)]
    pub max_client_cnxns: usize,

    /// Largest snapshot a member accepts from a peer, in bytes; a snapshot travels in chunks
    /// of at most the peer frame size and is reassembled up to this bound.
    #[arg(long, default_value_t = coordbench_node::TcpOptions::default().max_snapshot_bytes)]
    pub max_snapshot_bytes: u64,
    /// zab: refuse every request but addauth from connections that have not sent
    /// `addauth digest` (ZooKeeper's enforce.auth.enabled=true, enforce.auth.schemes=digest).
    #[arg(long)]
    pub enforce_auth: bool,

    /// Serve clients over TLS with this certificate (PEM; etcd's flag name): raft's gRPC,
    /// zab's client port (TLS only, as ZooKeeper's secureClientPort). Needs --key-file.
    #[arg(long, value_name = "PEM")]
    pub cert_file: Option<PathBuf>,

    /// The private key of --cert-file (PEM).
    #[arg(long, value_name = "PEM")]
    pub key_file: Option<PathBuf>,

    /// With --cert-file: require every client to present a certificate signed by a CA in
    /// this file (PEM), as etcd's --client-cert-auth --trusted-ca-file (ZooKeeper's
    /// ssl.clientAuth=need).
    #[arg(long, value_name = "PEM")]
    pub trusted_ca_file: Option<PathBuf>,

    /// raft: seconds a simple auth token lives after its last use (etcd's
    /// --auth-token-ttl).
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub auth_token_ttl: u64,

    /// raft: bcrypt's cost for the password hashes of UserAdd and UserChangePassword
    /// (etcd's --bcrypt-cost; 4 to 31).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(4..=31))]
    pub bcrypt_cost: u32,

    /// raft: how often the leader checkpoints, through the log, the remaining TTL of each
    /// lease whose TTL is longer than this, so that a new leader resumes it from there
    /// rather than from its full TTL (etcd's --lease-checkpoint-interval, 5 min, with
    /// checkpoints on by default since 3.6); 0s: never. A keep-alive of a lease with a
    /// checkpoint clears it through the log first, so such leases cost one log entry per
    /// interval beside the checkpoint; shorter leases none. Keep-alives are otherwise
    /// answered by the leader without a log entry, and a new leader extends every lease
    /// by one election timeout (--election-ticks-min x --tick), as etcd's does.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub lease_checkpoint_interval: Duration,

    /// raft: how --auto-compaction-retention is read (etcd's flag): periodic, a span of
    /// time; revision, a number of revisions.
    #[arg(long, default_value = "periodic", value_name = "MODE", value_parser = ["periodic", "revision"])]
    pub auto_compaction_mode: String,

    /// raft: the history the leader keeps when it compacts automatically, as etcd's flag.
    /// periodic: a duration P (30s, 5m, 1h30m) or a bare number of hours; every P (hourly
    /// when P is over an hour) the leader compacts to the revision of about P ago.
    /// revision: a number N; every 5 minutes the leader compacts to the current revision -
    /// N. 0: never (the default, as etcd's).
    #[arg(long, default_value = "0", value_name = "RETENTION")]
    pub auto_compaction_retention: String,

    /// Test-only, hidden: answer one kind of request wrongly, so that the differential
    /// tests against etcd and ZooKeeper can show they catch a wrong answer. raft:
    /// `put-prev-kv` (Put leaves out prev_kv); zab: `get-data-children` (getData's stat
    /// counts one child too many).
    #[arg(long, hide = true, value_name = "KIND")]
    pub wrong_answer: Option<String>,
}

impl ServeArgs {
    /// `--auto-compaction-mode` and `--auto-compaction-retention`, read as etcd reads them;
    /// `None` when off.
    fn auto_compaction(&self) -> anyhow::Result<Option<AutoCompaction>> {
        AutoCompaction::parse(&self.auto_compaction_mode, &self.auto_compaction_retention)
            .map_err(|e| anyhow::anyhow!("--auto-compaction-retention: {e}"))
    }

    /// The client listener's TLS configuration, if asked for.
    fn client_tls(&self) -> anyhow::Result<Option<Arc<coordbench_tls::rustls::ServerConfig>>> {
        match (&self.cert_file, &self.key_file) {
            (None, None) => {
                anyhow::ensure!(
                    self.trusted_ca_file.is_none(),
                    "--trusted-ca-file needs --cert-file and --key-file (client certificates are asked for over TLS)"
                );
                Ok(None)
            }
            (Some(cert), Some(key)) => {
                let tls = coordbench_tls::ServerTls {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: self.trusted_ca_file.clone(),
                };
                Ok(Some(coordbench_tls::server_config(&tls)?))
            }
            _ => anyhow::bail!("--cert-file and --key-file go together"),
        }
    }
}

/// `id=host:port` pairs, ordered by id.
#[derive(Debug, Clone)]
pub struct MemberAddrs(pub BTreeMap<u64, SocketAddr>);

fn parse_member_addrs(s: &str) -> Result<MemberAddrs, String> {
    let mut map = BTreeMap::new();
    for pair in s.split(',').filter(|p| !p.is_empty()) {
        let (id, addr) = pair
            .split_once('=')
            .ok_or_else(|| format!("'{pair}' is not id=host:port"))?;
        let id: u64 = id
            .parse()
            .map_err(|_| format!("'{id}' is not a member id (a positive number)"))?;
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| format!("'{addr}' is not host:port"))?;
        if id == 0 || map.insert(id, addr).is_some() {
            return Err(format!("member id {id} is zero or given twice"));
        }
    }
    if map.is_empty() {
        return Err("no members given".into());
    }
    Ok(MemberAddrs(map))
}

fn parse_engine_disk(s: &str) -> Result<EngineDisk, String> {
    EngineDisk::from_str(s).map_err(|e| e.to_string())
}

/// A checked member: its node configuration and the client address it listens on.
struct Member {
    config: NodeConfig,
    client_addr: SocketAddr,
}

/// raft's default --snapshot-every (see the option's doc).
pub const RAFT_SNAPSHOT_EVERY: u64 = 10_000;
/// zab's default --snapshot-every: ZooKeeper's snapCount.
pub const ZAB_SNAPSHOT_EVERY: u64 = 100_000;

/// The environment variable naming the level a member logs at to stderr (error, warn, info,
/// debug, trace; unset: warn, so the engines' warnings -- a client refused, a peer message
/// dropped -- are kept). Members inherit it from `coordbench run`, and their stderr is the
/// member log under the run's logs/ directory.
pub const LOG_ENV: &str = "COORDBENCH_LOG";

fn init_logging() -> anyhow::Result<()> {
    let level = std::env::var(LOG_ENV).unwrap_or_else(|_| "warn".to_string());
    let level: tracing_subscriber::filter::LevelFilter = level
        .parse()
        .map_err(|_| anyhow::anyhow!("{LOG_ENV}={level:?} is not a log level"))?;
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot start logging: {e}"))
}

fn member(args: &ServeArgs, default_snapshot_every: u64) -> anyhow::Result<Member> {
    init_logging()?;
    // The process's own start (exec, loading, the runtime) up to here; the node's
    // `recovered` line and `serving clients` below take it on from the same origin.
    tracing::info!(
        id = args.id,
        since_exec_ms = coordbench_node::since_exec::millis(),
        "starting"
    );
    let peers = &args.peers.0;
    let clients = &args.clients.0;
    anyhow::ensure!(
        peers.contains_key(&args.id),
        "--id {} is not one of the ids in --peers",
        args.id
    );
    anyhow::ensure!(
        peers.keys().eq(clients.keys()),
        "--peers and --clients must name the same member ids"
    );
    let mut config = NodeConfig::new(args.id, peers.clone(), &args.data_dir);
    config.disk = args.disk;
    config.tick_interval = args.tick;
    config.heartbeat_ticks = args.heartbeat_ticks;
    config.election_ticks_min = args.election_ticks_min;
    config.election_ticks_max = args.election_ticks_max;
    config.snapshot_every = args.snapshot_every.unwrap_or(default_snapshot_every);
    config.tcp.max_snapshot_bytes = args.max_snapshot_bytes;
    Ok(Member {
        config,
        client_addr: clients[&args.id],
    })
}

/// Binds the client port first: a taken port fails before the member joins the cluster.
async fn bind_clients(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen for clients on {addr}"))
}

/// The line saying the member is about to accept its clients, logged just before the API
/// server's accept loop takes the listener. The port was bound before the node started,
/// so a client could connect earlier (the kernel queues the connection), but its requests
/// are read only from here on.
fn log_serving(id: u64, addr: SocketAddr) {
    tracing::info!(
        id,
        client = %addr,
        since_exec_ms = coordbench_node::since_exec::millis(),
        "serving clients"
    );
}

/// Runs a Raft member until SIGINT or SIGTERM, then stops it cleanly (the WAL is synced).
pub async fn run_raft(args: ServeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.enforce_auth,
        "--enforce-auth applies only to serve zab (raft has etcd's auth: enable it through its Auth API, as etcdctl auth enable does)"
    );
    let tls = args.client_tls()?;
    let auto_compaction = args.auto_compaction()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let Member {
        config,
        client_addr,
    } = member(&args, RAFT_SNAPSHOT_EVERY)?;
    let clients = &args.clients.0;
    let members = args
        .peers
        .0
        .iter()
        .map(|(&id, peer)| MemberInfo {
            id,
            name: format!("m{id}"),
            peer_urls: vec![format!("http://{peer}")],
            client_urls: vec![format!("{scheme}://{}", clients[&id])],
        })
        .collect();
    let listener = bind_clients(client_addr).await?;
    let values = args.data_dir.join("values");
    let began = Instant::now();
    let state_machine = KvStateMachine::with_value_dir(&values)
        .with_context(|| format!("cannot open the value log in {}", values.display()))?
        .with_lease_timing(lease_timing(&args));
    // Part of the start before the node's own phases (its `recovered` line).
    tracing::info!(
        id = args.id,
        value_log_ms = began.elapsed().as_micros() as f64 / 1000.0,
        "opened value log"
    );
    let (handle, node) = RaftNode::start(config, state_machine)
        .await
        .with_context(|| format!("cannot start raft member {}", args.id))?;
    let stop =
        coordbench_lab::signals::stop_on_signals().context("cannot install signal handlers")?;
    let options = ServeOptions {
        tls,
        auth_token_ttl: Duration::from_secs(args.auth_token_ttl.max(1)),
        bcrypt_cost: args.bcrypt_cost,
        wrong_answer: wrong_answer(&args)?,
        auto_compaction,
        ..ServeOptions::default()
    };
    log_serving(args.id, client_addr);
    let served = serve(listener, handle, members, options, async move {
        stop.cancelled().await
    })
    .await;
    let stopped = node.stop().await;
    served.context("etcd API server failed")?;
    stopped.context("raft member did not stop cleanly")?;
    Ok(())
}

/// The engine's test-only wrong answer (`--wrong-answer`), if asked for.
fn wrong_answer<W: FromStr<Err = String>>(args: &ServeArgs) -> anyhow::Result<Option<W>> {
    args.wrong_answer
        .as_deref()
        .map(W::from_str)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--wrong-answer: {e}"))
}

/// How a raft member times leases: checkpoints every --lease-checkpoint-interval, and a
/// new leader's extension of one election timeout (etcd's).
fn lease_timing(args: &ServeArgs) -> LeaseTiming {
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    LeaseTiming {
        promote_extension_ms: millis(args.tick.saturating_mul(args.election_ticks_min)),
        checkpoint_interval_ms: millis(args.lease_checkpoint_interval),
    }
}

/// Runs a Zab member until SIGINT or SIGTERM, then stops it cleanly (the WAL is synced).
pub async fn run_zab(args: ServeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.session_tick.is_zero(),
        "--session-tick must be greater than zero"
    );
    anyhow::ensure!(
        args.auto_compaction()?.is_none(),
        "--auto-compaction-retention applies only to serve raft (etcd's history compaction; ZooKeeper keeps no history)"
    );
    // ZooKeeper's protocol negotiates no application protocol over TLS.
    let tls = args
        .client_tls()?
        .map(|config| coordbench_tls::server_without_alpn(&config));
    let Member {
        config,
        client_addr,
    } = member(&args, ZAB_SNAPSHOT_EVERY)?;
    let options = coordbench_zk_api::ServeOptions {
        server_id: args.id,
        cluster_size: args.peers.0.len(),
        tick_time: args.session_tick,
        min_session_timeout: args.min_session_timeout,
        max_session_timeout: args.max_session_timeout,
        max_client_cnxns: args.max_client_cnxns,
        enforce_auth: args.enforce_auth,
        tls,
        wrong_answer: wrong_answer(&args)?,
        ..Default::default()
    };
    let listener = bind_clients(client_addr).await?;
    let (handle, node) = ZabNode::start(config, TreeStateMachine::new())
        .await
        .with_context(|| format!("cannot start zab member {}", args.id))?;
    let stop =
        coordbench_lab::signals::stop_on_signals().context("cannot install signal handlers")?;
    log_serving(args.id, client_addr);
    let served =
        coordbench_zk_api::serve(
            listener,
            handle,
            options,
            async move { stop.cancelled().await },
        )
        .await;
    let stopped = node.stop().await;
    served.context("ZooKeeper protocol server failed")?;
    stopped.context("zab member did not stop cleanly")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_lists_parse_and_refuse_what_they_cannot_use() {
        let m = parse_member_addrs("1=127.0.0.1:1001,2=127.0.0.1:1002").unwrap();
        assert_eq!(m.0.len(), 2);
        for bad in [
            "",
            "1=nohost",
            "x=127.0.0.1:1",
            "0=127.0.0.1:1",
            "1=127.0.0.1:1,1=127.0.0.1:2",
        ] {
            assert!(parse_member_addrs(bad).is_err(), "{bad}");
        }
    }
}
