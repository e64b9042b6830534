//! The command line: `coordbench run` and its options.
//!
//! Parsing only turns text into typed values (durations, enums, numbers > 0); whether a
//! combination makes sense is decided in [`crate::config`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::provision::DiskKind;

#[derive(Debug, Parser)]
#[command(
    name = "coordbench",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("COORDBENCH_GIT_COMMIT"), ")"),
    about = "Benchmarks coordination services: locks, leader election, service discovery and \
             config watches on etcd, ZooKeeper and built-in engines",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one workload against one target and write its results.
    Run(RunArgs),
    /// Search, in open loop, for the highest --rate that meets every --slo for a whole
    /// window, on one cluster; writes capacity.json and summary.csv.
    Capacity(crate::capacity::CapacityArgs),
    /// Run every point of a sweep spec (targets × axis values × repeats), then report.
    Sweep(SweepArgs),
    /// Write charts and report.md for a sweep directory (or any directory with a
    /// summary.csv).
    Report(ReportArgs),
    /// Judge a candidate's results against a baseline's, point by point, beyond noise.
    Compare(CompareArgs),
    /// Run a baseline and a candidate interleaved, compare them, and fail on breached
    /// thresholds (exit 3).
    Gate(GateArgs),
    /// Merge the run directories of a sharded run's shards into one run directory.
    Merge(crate::merge::MergeArgs),
    /// Install a real server at a version (etcd from the Go module proxy, ZooKeeper from
    /// Maven Central) into the cache, or list what is installed (--list).
    Install(crate::install::InstallArgs),
    /// Run one member of a built-in engine (what --target raft|zab starts N of).
    #[command(subcommand)]
    Serve(ServeCommand),
    /// Simulate a whole cluster of a built-in core (no sockets, disks or wall clock).
    #[command(subcommand)]
    Simulate(crate::simulate::args::SimulateCommand),
}

#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// The sweep spec (TOML; see workloads/*.toml).
    pub spec: PathBuf,

    /// Sweep directory; rerunning into it skips complete points (default:
    /// results/<UTC time>-sweep-<spec name>/).
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Use the spec's [quick] overrides (a variant that finishes in minutes).
    #[arg(long)]
    pub quick: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A sweep directory: summary.csv, and a directory per point with its latency.hlog.
    pub dir: PathBuf,

    /// Today's load (ops/s of the searched workload) for the capacity section's "what N×
    /// the load would need" (default: the first configuration's max rate).
    #[arg(long, value_parser = parse_rate)]
    pub load: Option<f64>,

    /// Keys held today, for the same paragraph's memory per member.
    #[arg(long, value_name = "N")]
    pub keys: Option<u64>,

    /// Watchers held today, likewise.
    #[arg(long, value_name = "N")]
    pub watchers: Option<u64>,

    /// Sessions (leases) held today, likewise.
    #[arg(long, value_name = "N")]
    pub sessions: Option<u64>,

    /// A state-scaling sweep directory (workloads/state-scaling.toml) whose fitted cost per
    /// key, watcher and session the same paragraph uses.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
}

impl ReportArgs {
    /// The planner's figures, as the report takes them (without `--state`'s costs).
    pub fn planning(&self) -> crate::report::Planning {
        crate::report::Planning {
            load: self.load,
            keys: self.keys,
            watchers: self.watchers,
            sessions: self.sessions,
            costs: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The baseline: a run, sweep or gate-side directory, a directory of run directories
    /// (repeats), or several of these joined by commas.
    pub base: String,

    /// The candidate, in the same forms.
    pub cand: String,

    /// Output: an aligned table, markdown (for pull-request comments) or JSON.
    #[arg(long, value_enum, default_value = "table")]
    pub format: CompareFormat,

    /// Significance level of the two-sided rank test (default 0.10: each direction at 0.05).
    #[arg(long, default_value_t = crate::compare::DEFAULT_ALPHA, value_parser = parse_alpha)]
    pub alpha: f64,

    /// Judge the `[thresholds]` table of this TOML file (a gate spec, for one) and exit 3
    /// when one is breached.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
}

impl CompareArgs {
    pub fn base_paths(&self) -> Vec<PathBuf> {
        split_paths(&self.base)
    }

    pub fn cand_paths(&self) -> Vec<PathBuf> {
        split_paths(&self.cand)
    }
}

fn split_paths(list: &str) -> Vec<PathBuf> {
    list.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    Table,
    Markdown,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// The gate spec (TOML; see workloads/gate.toml).
    pub spec: PathBuf,

    /// Gate directory; rerunning into it runs only the missing runs (default:
    /// results/<UTC time>-gate-<spec name>/).
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Use the spec's [quick] overrides.
    #[arg(long)]
    pub quick: bool,

    /// Repeats per side instead of the spec's (more repeats detect smaller changes).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: Option<u32>,

    /// Set a run option on the baseline side, as in the spec's [baseline] table
    /// (e.g. engine_bin=/path/to/coordbench); repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    pub baseline: Vec<String>,

    /// Set a run option on the candidate side, as in the spec's [candidate] table.
    #[arg(long, value_name = "KEY=VALUE")]
    pub candidate: Vec<String>,
}

/// The built-in engines a process can serve.
#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// A member of the Raft engine, serving etcd's v3 gRPC API.
    Raft(crate::serve::ServeArgs),
    /// A member of the Zab engine, serving ZooKeeper's protocol.
    Zab(crate::serve::ServeArgs),
}

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TargetKind {
    /// In-process target that does nothing: measures the load generator itself.
    Null,
    /// Real etcd: a local cluster started from Debian's etcd-server package, or --endpoints.
    Etcd,
    /// Real ZooKeeper: a local ensemble started from Debian's zookeeper package, or --endpoints.
    Zookeeper,
    /// The built-in Raft engine speaking etcd's v3 API: N `coordbench serve raft` processes.
    Raft,
    /// The built-in Zab engine speaking ZooKeeper's protocol: N `coordbench serve zab`
    /// processes.
    Zab,
    /// Redis: N independent redis-server instances (not replication; Redlock's setting)
    /// started from Debian's redis-server package, or --endpoints.
    Redis,
    /// PostgreSQL: one server started from Debian's postgresql package, or --endpoints.
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadKind {
    /// Writes of random keys.
    KvPut,
    /// Reads of random keys (see --consistency).
    KvGet,
    /// Reads (with probability --read-ratio, see --consistency) and writes of random keys.
    KvMixed,
    /// Clients contend for locks, hold, release (see --locks, --hold, --recipe).
    Lock,
    /// Clients campaign in one election; each leader leads for --term, then resigns (or
    /// crashes: --crash-leader); --watchers observers follow it.
    Election,
    /// --instances register and deregister at --churn changes/s; --watchers follow the
    /// membership.
    Discovery,
    /// One writer updates a config key at --rate; --watchers watchers over --conns sessions
    /// follow it.
    ConfigWatch,
    /// Clients read, write and compare-and-set a few keys (--keys, default 4); the history
    /// is checked for linearizability (history.jsonl, summary.csv `linearizable`).
    Register,
    /// --clients pass --barriers double barriers in sequence (enter: all clients arrive;
    /// leave: all clients depart); the window lasts until every barrier is passed.
    Barrier,
}

/// The ZooKeeper client library a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ZkClientArg {
    /// The zookeeper-client crate.
    #[default]
    Client,
    /// The zookeeper-async crate (silently replaces expired sessions; no sync()).
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConsistencyArg {
    Linearizable,
    Serializable,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The system to measure (default: the built-in Raft engine, which needs nothing installed).
    #[arg(long, value_enum, default_value = "raft")]
    pub target: TargetKind,

    /// The workload every client runs.
    #[arg(long, value_enum, default_value = "lock")]
    pub workload: WorkloadKind,

    /// Concurrent clients (closed loop: each waits for its last operation). election: the
    /// candidates; discovery: the default of --instances; config-watch: always one writer.
    /// (`--workers` is the ZooKeeper paper's name for the same thing.)
    #[arg(long, visible_alias = "workers", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub clients: u32,

    /// Connections shared by the clients (etcd API default: one per 64 clients, each balanced
    /// over every endpoint; zookeeper: always one session per client). config-watch, discovery: the sessions the watchers are spread
    /// over (config-watch default: min(watchers, 16); discovery: one per watcher).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub conns: Option<u32>,

    /// Open loop: operations per second in total, scheduled at intended start times.
    /// config-watch: the writer's updates per second (default 10).
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Length of the measured window (e.g. 10s, 2m).
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub duration: Duration,

    /// Warm-up before the measured window; its operations are not reported.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,

    /// Stop after this many operations in the measured window.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: Option<u64>,

    /// An operation that takes longer counts as a timeout error with this latency.
    #[arg(long, default_value = "5s", value_parser = parse_positive_duration)]
    pub op_timeout: Duration,

    /// kv workloads: number of distinct keys (default 1000); register: keys the clients
    /// share (default 4).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub keys: Option<u64>,

    /// kv workloads: value size in bytes.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    pub value_size: u64,

    /// kv-get, kv-mixed and register: read consistency (serializable: from the member's
    /// local state, without etcd's quorum read or ZooKeeper's sync).
    #[arg(long, value_enum, default_value = "linearizable")]
    pub consistency: ConsistencyArg,

    /// kv-mixed: the probability that an operation is a read (else a write), in [0, 1],
    /// drawn per operation from --seed (default 0.5).
    #[arg(long, value_parser = parse_read_ratio)]
    pub read_ratio: Option<f64>,

    /// kv-put: every write creates a key no one wrote before (the ZooKeeper paper's Table 2
    /// creates): one create request on the ZooKeeper API, a put of a new key elsewhere;
    /// nothing is preloaded and --keys does not apply.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true",
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub create_keys: bool,

    /// register: wall-clock bound on the linearizability check; past it the verdict is
    /// `unknown`.
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration)]
    pub check_budget: Duration,

    /// lock: number of lock names the clients contend for (client c takes lock c % locks).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub locks: u32,

    /// lock: how long a holder keeps the lock. The default, 10ms, is a short critical
    /// section that lets waiters settle between releases (see RESULTS.md, herd effect);
    /// 0s measures the lock service's own acquisition rate.
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub hold: Duration,

    /// lock, election: recipe (etcd: etcd-mutex | naive; zookeeper: zk-recipe | naive).
    /// Default: the target's herd-free recipe.
    #[arg(long)]
    pub recipe: Option<String>,

    /// lock: freeze a drawn fraction of holders (--holder-pause-ratio) for this long inside
    /// their critical section, as in a GC pause of the client: their session's own traffic
    /// (lease keep-alives, ZooKeeper pings) stops, so a pause past --ttl loses the lock while
    /// the holder still believes it holds it. Needs --holder-pause-ratio.
    #[arg(long, value_parser = parse_positive_duration)]
    pub holder_pause: Option<Duration>,

    /// lock: the fraction of acquisitions whose holder pauses, in (0, 1], drawn from --seed.
    /// Needs --holder-pause.
    #[arg(long, value_parser = parse_ratio)]
    pub holder_pause_ratio: Option<f64>,

    /// lock: how the resource each lock protects treats its holders' writes: none (accepts
    /// every write), token (rejects a fencing token lower than the highest it has seen), txn
    /// (a write the coordination service applies only while the lock is still the writer's).
    /// Default: none.
    #[arg(long, value_enum)]
    pub protect: Option<ProtectArg>,

    /// barrier: double barriers every client passes in sequence (default 200). A barrier
    /// run has no warm-up and its window lasts until every barrier is passed (at most 10
    /// minutes), so --warmup and --duration do not apply to it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub barriers: Option<u64>,

    /// election: end the window after this many won elections (default: run for
    /// --duration).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub elections: Option<u64>,

    /// election: how long a leader leads before it resigns.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration)]
    pub term: Duration,

    /// election: leaders crash at the end of their term (abandon their session) instead of
    /// resigning; the next leader takes over when the server expires the session (--ttl).
    #[arg(long)]
    pub crash_leader: bool,

    /// discovery: service instances (default: --clients).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub instances: Option<u32>,

    /// discovery: registrations + deregistrations per second, all instances together
    /// (default 20).
    #[arg(long, value_parser = parse_rate)]
    pub churn: Option<f64>,

    /// discovery: the first N instances crash (abandon their session) instead of
    /// deregistering.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub crash_instances: u32,

    /// discovery, config-watch: watchers (defaults 4, 100); election: observers (default 2).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub watchers: Option<u32>,

    /// Session / lease TTL; sessions are refreshed at TTL/3.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub ttl: Duration,

    /// Members of the cluster coordbench starts (default 3; postgres: 1). redis: N
    /// independent instances (no replication), which Redlock locks a majority of.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub cluster_size: Option<u32>,

    /// Where started members keep their data: tmpfs (/dev/shm), disk (the local
    /// filesystem, synced), nofsync (local filesystem, syncs skipped), or an emulated disk
    /// (tmpfs + a delay per sync): hdd, ssd, nvme.
    #[arg(long, value_enum, default_value = "disk")]
    pub disk: DiskKind,

    /// With --disk hdd|ssd|nvme: the delay added to every sync instead of the profile's
    /// (hdd 8ms, ssd 750us, nvme 75us).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub sync_delay: Option<Duration>,

    /// One-way delay between started members, through a TCP proxy: DELAY or DELAY,JITTER
    /// (e.g. 5ms or 5ms,1ms).
    #[arg(long, value_parser = parse_net_delay, value_name = "DELAY[,JITTER]")]
    pub net_delay: Option<crate::netdelay::NetDelay>,

    /// Also delay traffic between clients and members (with --net-delay).
    #[arg(long)]
    pub net_delay_clients: bool,

    /// Started clusters: the election timeout range, MIN-MAX in ms (150-300 or 150ms-300ms),
    /// mapped onto each target's own settings; what a target cannot meet exactly is noted in
    /// run.json (RESULTS.md, Election timing).
    #[arg(long, value_name = "MIN-MAX", value_parser = parse_timeout_range)]
    pub election_timeout: Option<crate::election_timing::TimeoutRange>,

    /// Started clusters: the leader's heartbeat interval, whole ms (default with
    /// --election-timeout: MIN / 10; else the target's own).
    #[arg(long, value_parser = parse_positive_duration)]
    pub heartbeat: Option<Duration>,

    /// Attach to a running cluster instead of starting one (host:port,...).
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,

    /// etcd, zookeeper: the server release to start, installed by `coordbench install` or
    /// Debian's (default: $COORDBENCH_ETCD_VERSION or $COORDBENCH_ZOOKEEPER_VERSION, else
    /// the newest installed; `coordbench install --list` shows them).
    #[arg(long, value_name = "VERSION", value_parser = parse_server_version)]
    pub server_version: Option<crate::install::Version>,

    /// The etcd binary to start (default: the installed etcd --server-version picks).
    #[arg(long, conflicts_with = "server_version")]
    pub etcd_bin: Option<PathBuf>,

    /// The ZooKeeper server classpath to start (default: the installed ZooKeeper
    /// --server-version picks).
    #[arg(long, conflicts_with = "server_version")]
    pub zk_classpath: Option<String>,

    /// raft, zab: the coordbench binary that runs the members (`serve raft|zab`), e.g. another
    /// version to compare (default: this one).
    #[arg(long)]
    pub engine_bin: Option<PathBuf>,

    /// zookeeper: the client library (default: client, the zookeeper-client crate; async:
    /// zookeeper-async).
    #[arg(long, value_enum)]
    pub zk_client: Option<ZkClientArg>,

    /// zookeeper, zab: credentials, node ACLs and chroot.
    #[command(flatten)]
    pub zk_access: crate::zk_access::ZkAccessArgs,

    /// TLS to clusters you run: etcd and raft over https://, ZooKeeper and zab on their
    /// secure client port.
    #[command(flatten)]
    pub tls: crate::tls_access::TlsArgs,

    /// etcd: the user for clusters you run.
    #[command(flatten)]
    pub etcd_access: crate::etcd_access::EtcdAccessArgs,

    /// Start the cluster secured: zookeeper and zab serve clients over TLS only (the
    /// secure client port, client certificates signed by a CA generated per run required)
    /// and require digest auth from every client (a user and password drawn per run,
    /// CREATOR_ALL on every node the workloads create); etcd serves clients over TLS only, requires client certificates signed by
    /// a CA generated per run and has auth enabled (the driver runs as a user drawn per
    /// run); raft serves TLS and requires client certificates (no auth: the engine has no
    /// auth API). `--secure false` is the default.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true",
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub secure: bool,

    /// First port for started members (default: free ports).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1024..))]
    pub base_port: Option<u16>,

    /// Results directory (default: results/<UTC time>-<target>-<workload>/).
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Seed for every client's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Pin the load generator to these CPUs (like taskset -c: 0, 0-1, 0,2).
    #[arg(long, value_name = "CPUS")]
    pub pin_client: Option<crate::affinity::CpuList>,

    /// Worker threads of the load generator's runtime (default: one per CPU it may use,
    /// after --pin-client). One worker spends less CPU per operation (no wake-ups between
    /// workers; RESULTS.md, the generator's own cost) but caps the generator at one core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub client_threads: Option<u16>,

    /// Pin every member coordbench starts to these CPUs (not with --endpoints).
    #[arg(long, value_name = "CPUS")]
    pub pin_servers: Option<crate::affinity::CpuList>,

    /// Faults to inject into the started cluster while the workload runs, one after another,
    /// measuring the failover around each (failover.csv): a comma-separated list of kinds,
    /// used in rounds, each round the whole list in an order shuffled from --seed.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "KIND,...")]
    pub fault: Vec<FaultArg>,

    /// Period between fault starts (with --fault): a fault starts this long after the
    /// previous one started, and not before the cluster is healthy again.
    #[arg(long, default_value = "3s", value_parser = parse_positive_duration)]
    pub fault_every: Duration,

    /// How long each fault lasts (with --fault; default 1s, 10ms to 60s): killed members
    /// stay down, paused ones stopped and partitions cut this long.
    #[arg(long, value_parser = parse_positive_duration)]
    pub fault_duration: Option<Duration>,

    /// Fill the store before the window (`--preload-keys`).
    #[command(flatten)]
    pub preload: crate::preload::PreloadArgs,

    /// null: an injected service time (`--service-time`, `--service-concurrency`).
    #[command(flatten)]
    pub null_service: crate::targets::null::NullServiceArgs,

    /// No live status line.
    #[arg(long)]
    pub quiet: bool,

    /// Sharded runs: --shard, --run-id, --start-at, --rendezvous.
    #[command(flatten)]
    pub sharding: crate::shard::ShardArgs,
}

impl RunArgs {
    /// `--cluster-size`, or the target's default.
    pub fn cluster_size(&self) -> usize {
        self.cluster_size.map_or(
            crate::targets::descriptor(self.target).default_cluster_size,
            |n| n as usize,
        )
    }

    /// Whether coordbench starts the servers on this machine (not attached, not null).
    pub fn starts_servers(&self) -> bool {
        self.endpoints.is_empty() && crate::targets::descriptor(self.target).has_servers
    }

    /// Whether the members' traffic runs through this process's delay proxy (--net-delay,
    /// or a partition fault, which cuts links in it).
    pub fn proxies_members(&self) -> bool {
        self.starts_servers()
            && (self.net_delay.is_some() || self.fault.iter().any(|k| k.is_partition()))
    }
}

/// How a lock's protected resource fences stale holders (`--protect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtectArg {
    /// An in-process resource that accepts every write.
    None,
    /// An in-process resource that rejects a fencing token lower than the highest seen.
    Token,
    /// A key of the coordination service, written only while the writer holds the lock.
    Txn,
}

/// A fault `--fault` injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultArg {
    /// SIGKILL the leader; restart it on its data once a new leader leads and writes resumed
    /// (and no sooner than --fault-duration).
    KillLeader,
    /// SIGKILL a uniformly random member; restart it on its data after --fault-duration.
    KillRandom,
    /// SIGSTOP the leader for --fault-duration, then SIGCONT.
    PauseLeader,
    /// SIGSTOP a uniformly random member for --fault-duration, then SIGCONT.
    PauseRandom,
    /// Cut the leader off from every other member for --fault-duration (it keeps its
    /// clients).
    PartitionLeader,
    /// Split the members into a random minority and majority for --fault-duration.
    PartitionRandom,
    /// SIGKILL every member at once; restart all on their data after --fault-duration.
    RestartAll,
}

impl FaultArg {
    /// The name users type (`kill-leader`).
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (write e.g. 10s, 500ms, 2m)"))?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(a) if a > 0.0 && a < 1.0 => Ok(a),
        _ => Err("must be a probability between 0 and 1, e.g. 0.05".into()),
    }
}

fn parse_net_delay(s: &str) -> Result<crate::netdelay::NetDelay, String> {
    s.parse()
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err("must be a fraction in (0, 1], e.g. 0.2".into()),
    }
}

fn parse_timeout_range(s: &str) -> Result<crate::election_timing::TimeoutRange, String> {
    crate::election_timing::TimeoutRange::parse(s)
}

fn parse_read_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err("must be a probability in [0, 1], e.g. 0.7".into()),
    }
}

pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 10_000_000.0 => Ok(r),
        _ => Err("must be a number of operations per second in (0, 10000000]".into()),
    }
}

fn parse_server_version(text: &str) -> Result<crate::install::Version, String> {
    text.parse()
}
