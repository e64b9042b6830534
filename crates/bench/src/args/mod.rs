//! `coordbench run`'s options (also `capacity`'s, which shares them). Groups of options
//! that belong together are structs of their own, each with its checks ([`cluster`], [`faults`], [`generator`]).

pub mod cluster;
pub mod faults;
pub mod generator;

use std::time::Duration;

use clap::Args;
use coordbench_results::kinds::{
    ConsistencyArg, ProtectArg, TargetKind, WorkloadKind, ZkClientArg,
};
use coordbench_results::parse::{
    parse_positive_duration, parse_rate, parse_ratio, parse_read_ratio,
};

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The system to measure (default: the built-in Raft engine, which needs nothing installed).
    #[arg(help_heading = "Load", long, value_enum, default_value = "raft")]
    pub target: TargetKind,

    /// The workload every client runs.
    #[arg(help_heading = "Load", long, value_enum, default_value = "lock")]
    pub workload: WorkloadKind,

    /// Concurrent clients (closed loop: each waits for its last operation). election: the
    /// candidates; discovery: the default of --instances; config-watch: always one writer.
    /// (`--workers` is the ZooKeeper paper's name for the same thing.)
    #[arg(help_heading = "Load", long, visible_alias = "workers", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub clients: u32,

    /// Connections shared by the clients (etcd API default: one per 64 clients, each balanced
    /// over every endpoint; zookeeper: always one session per client). config-watch, discovery: the sessions the watchers are spread
    /// over (config-watch default: min(watchers, 16); discovery: one per watcher).
    #[arg(help_heading = "Load", long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub conns: Option<u32>,

    /// Open loop: operations per second in total, scheduled at intended start times.
    /// config-watch: the writer's updates per second (default 10).
    #[arg(help_heading = "Load", long, value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Length of the measured window (e.g. 10s, 2m).
    #[arg(help_heading = "Load", long, default_value = "10s", value_parser = parse_positive_duration)]
    pub duration: Duration,

    /// Warm-up before the measured window; its operations are not reported.
    #[arg(help_heading = "Load", long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,

    /// Stop after this many operations in the measured window.
    #[arg(help_heading = "Load", long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: Option<u64>,

    /// An operation that takes longer counts as a timeout error with this latency.
    #[arg(help_heading = "Load", long, default_value = "5s", value_parser = parse_positive_duration)]
    pub op_timeout: Duration,

    /// kv workloads: number of distinct keys (default 1000); register: keys the clients
    /// share (default 4).
    #[arg(help_heading = "kv workloads (kv-put, kv-get, kv-mixed; --keys and --consistency also register)", long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub keys: Option<u64>,

    /// kv workloads: value size in bytes.
    #[arg(help_heading = "kv workloads (kv-put, kv-get, kv-mixed; --keys and --consistency also register)", long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    pub value_size: u64,

    /// kv-get, kv-mixed and register: read consistency (serializable: from the member's
    /// local state, without etcd's quorum read or ZooKeeper's sync).
    #[arg(
        help_heading = "kv workloads (kv-put, kv-get, kv-mixed; --keys and --consistency also register)",
        long,
        value_enum,
        default_value = "linearizable"
    )]
    pub consistency: ConsistencyArg,

    /// kv-mixed: the probability that an operation is a read (else a write), in [0, 1],
    /// drawn per operation from --seed (default 0.5).
    #[arg(help_heading = "kv workloads (kv-put, kv-get, kv-mixed; --keys and --consistency also register)", long, value_parser = parse_read_ratio)]
    pub read_ratio: Option<f64>,

    /// kv-put: every write creates a key no one wrote before (the ZooKeeper paper's Table 2
    /// creates): one create request on the ZooKeeper API, a put of a new key elsewhere;
    /// nothing is preloaded and --keys does not apply.
    #[arg(help_heading = "kv workloads (kv-put, kv-get, kv-mixed; --keys and --consistency also register)", long, num_args = 0..=1, default_value_t = false, default_missing_value = "true",
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub create_keys: bool,

    /// register: wall-clock bound on the linearizability check; past it the verdict is
    /// `unknown`.
    #[arg(help_heading = "register workload", long, default_value = "60s", value_parser = parse_positive_duration)]
    pub check_budget: Duration,

    /// lock: number of lock names the clients contend for (client c takes lock c % locks).
    #[arg(help_heading = "lock workload (--recipe also election)", long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub locks: u32,

    /// lock: how long a holder keeps the lock. The default, 10ms, is a short critical
    /// section that lets waiters settle between releases (see docs/reference.md, herd effect);
    /// 0s measures the lock service's own acquisition rate.
    #[arg(help_heading = "lock workload (--recipe also election)", long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub hold: Duration,

    /// lock, election: recipe (etcd: etcd-mutex | naive; zookeeper: zk-recipe | naive).
    /// Default: the target's herd-free recipe.
    #[arg(help_heading = "lock workload (--recipe also election)", long)]
    pub recipe: Option<String>,

    /// lock: freeze a drawn fraction of holders (--holder-pause-ratio) for this long inside
    /// their critical section, as in a GC pause of the client: their session's own traffic
    /// (lease keep-alives, ZooKeeper pings) stops, so a pause past --ttl loses the lock while
    /// the holder still believes it holds it. Needs --holder-pause-ratio.
    #[arg(help_heading = "lock workload (--recipe also election)", long, value_parser = parse_positive_duration)]
    pub holder_pause: Option<Duration>,

    /// lock: the fraction of acquisitions whose holder pauses, in (0, 1], drawn from --seed.
    /// Needs --holder-pause.
    #[arg(help_heading = "lock workload (--recipe also election)", long, value_parser = parse_ratio)]
    pub holder_pause_ratio: Option<f64>,

    /// lock: how the resource each lock protects treats its holders' writes: none (accepts
    /// every write), token (rejects a fencing token lower than the highest it has seen), txn
    /// (a write the coordination service applies only while the lock is still the writer's).
    /// Default: none.
    #[arg(
        help_heading = "lock workload (--recipe also election)",
        long,
        value_enum
    )]
    pub protect: Option<ProtectArg>,

    /// barrier: double barriers every client passes in sequence (default 200). A barrier
    /// run has no warm-up and its window lasts until every barrier is passed (at most 10
    /// minutes), so --warmup and --duration do not apply to it.
    #[arg(help_heading = "barrier workload", long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub barriers: Option<u64>,

    /// election: end the window after this many won elections (default: run for
    /// --duration).
    #[arg(help_heading = "election workload", long, value_parser = clap::value_parser!(u64).range(1..))]
    pub elections: Option<u64>,

    /// election: how long a leader leads before it resigns.
    #[arg(help_heading = "election workload", long, default_value = "50ms", value_parser = humantime::parse_duration)]
    pub term: Duration,

    /// election: leaders crash at the end of their term (abandon their session) instead of
    /// resigning; the next leader takes over when the server expires the session (--ttl).
    #[arg(help_heading = "election workload", long)]
    pub crash_leader: bool,

    /// discovery: service instances (default: --clients).
    #[arg(help_heading = "discovery workload", long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub instances: Option<u32>,

    /// discovery: registrations + deregistrations per second, all instances together
    /// (default 20).
    #[arg(help_heading = "discovery workload", long, value_parser = parse_rate)]
    pub churn: Option<f64>,

    /// discovery: the first N instances crash (abandon their session) instead of
    /// deregistering.
    #[arg(help_heading = "discovery workload", long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub crash_instances: u32,

    /// discovery, config-watch: watchers (defaults 4, 100); election: observers (default 2).
    #[arg(help_heading = "config-watch workload (--watchers also discovery, election)", long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub watchers: Option<u32>,

    /// Session / lease TTL; sessions are refreshed at TTL/3.
    #[arg(help_heading = "Load", long, default_value = "10s", value_parser = parse_positive_duration)]
    pub ttl: Duration,

    /// Attach to a running cluster instead of starting one (host:port,...).
    #[arg(help_heading = "Attach and security", long, value_delimiter = ',')]
    pub endpoints: Vec<String>,

    /// zookeeper: the client library (default: client, the zookeeper-client crate; async:
    /// zookeeper-async).
    #[arg(help_heading = "Attach and security", long, value_enum)]
    pub zk_client: Option<ZkClientArg>,

    /// zookeeper, zab: credentials, node ACLs and chroot.
    #[command(flatten, next_help_heading = "Attach and security")]
    pub zk_access: crate::zk_access::ZkAccessArgs,

    /// TLS to clusters you run: etcd and raft over https://, ZooKeeper and zab on their
    /// secure client port.
    #[command(flatten, next_help_heading = "Attach and security")]
    pub tls: crate::tls_access::TlsArgs,

    /// etcd: the user for clusters you run.
    #[command(flatten, next_help_heading = "Attach and security")]
    pub etcd_access: crate::etcd_access::EtcdAccessArgs,

    /// Start the cluster secured: zookeeper and zab serve clients over TLS only (the
    /// secure client port, client certificates signed by a CA generated per run required)
    /// and require digest auth from every client (a user and password drawn per run,
    /// CREATOR_ALL on every node the workloads create); etcd serves clients over TLS only, requires client certificates signed by
    /// a CA generated per run and has auth enabled (the driver runs as a user drawn per
    /// run); raft serves TLS and requires client certificates (no auth: the engine has no
    /// auth API). `--secure false` is the default.
    #[arg(help_heading = "Attach and security", long, num_args = 0..=1, default_value_t = false, default_missing_value = "true",
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub secure: bool,

    /// Seed for every client's random choices.
    #[arg(help_heading = "Load", long, default_value_t = 1)]
    pub seed: u64,

    /// The cluster coordbench starts: size, storage, network, timing, server binaries.
    #[command(flatten)]
    pub cluster: cluster::ClusterOptions,

    /// The load generator itself: where it writes, its CPUs and threads, its console.
    #[command(flatten)]
    pub generator: generator::GeneratorOptions,

    /// Faults to inject (`--fault`, `--fault-every`, `--fault-duration`).
    #[command(flatten)]
    pub faults: faults::FaultOptions,

    /// Fill the store before the window (`--preload-keys`).
    #[command(flatten, next_help_heading = "Cluster")]
    pub preload: crate::preload::PreloadArgs,

    /// null: an injected service time (`--service-time`, `--service-concurrency`).
    #[command(flatten, next_help_heading = "null target")]
    pub null_service: crate::targets::null::NullServiceArgs,

    /// Sharded runs: --shard, --run-id, --start-at, --rendezvous.
    #[command(flatten, next_help_heading = "Generator: sharded runs")]
    pub sharding: crate::shard::ShardArgs,
}

impl RunArgs {
    /// `--cluster-size`, or the target's default.
    pub fn cluster_size(&self) -> usize {
        self.cluster.size(self.target)
    }

    /// Whether coordbench starts the servers on this machine (not attached, not null).
    pub fn starts_servers(&self) -> bool {
        self.endpoints.is_empty() && crate::targets::descriptor(self.target).has_servers
    }

    /// Whether the members' traffic runs through this process's delay proxy (--net-delay,
    /// or a partition fault, which cuts links in it).
    pub fn proxies_members(&self) -> bool {
        self.starts_servers() && (self.cluster.net_delay.is_some() || self.faults.has_partition())
    }
}

/// One command's options parsed alone, as `coordbench COMMAND ARGS` would parse them
/// (`argv[0]` is the program name, followed by the options): for code that holds a
/// command line but not the whole CLI (sweep points, merged shards, tests).
pub fn parse_args<T, I, S>(argv: I) -> Result<T, clap::Error>
where
    T: clap::Args + clap::FromArgMatches,
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    let command = T::augment_args(clap::Command::new("coordbench"));
    T::from_arg_matches(&command.try_get_matches_from(argv)?)
}

/// [`parse_args`] for `run`'s options.
pub fn parse_run_args<I, S>(argv: I) -> Result<RunArgs, clap::Error>
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    parse_args(argv)
}
