//! `coordbench run`'s options (also `capacity`'s, which shares them), in groups: each group
//! is a struct of its own, flattened into [`RunArgs`] in the order `run --help` shows them,
//! that owns its checks and what it resolves to: [`load`] (target, workload, clients, the
//! window), [`workloads`] (one group per workload, and which workload takes which option),
//! [`attach`] (endpoints and security), [`cluster`], [`generator`] and [`faults`].

pub mod attach;
pub mod cluster;
pub mod faults;
pub mod generator;
pub mod load;
pub mod workloads;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Target, workload, clients, loop, window, timeouts, TTL and seed.
    #[command(flatten)]
    pub load: load::LoadOptions,

    /// kv-put, kv-get, kv-mixed (and register's keys and consistency).
    #[command(flatten)]
    pub kv: workloads::kv::KvOptions,

    /// register: the linearizability check's budget.
    #[command(flatten)]
    pub register: workloads::register::RegisterOptions,

    /// lock (and election's recipe): locks, hold, recipe, holder pauses, protection.
    #[command(flatten)]
    pub lock: workloads::lock::LockOptions,

    /// barrier: the barriers every client passes.
    #[command(flatten)]
    pub barrier: workloads::barrier::BarrierOptions,

    /// election: op budget, term, crashing leaders.
    #[command(flatten)]
    pub election: workloads::election::ElectionOptions,

    /// discovery: instances, churn, crashing instances.
    #[command(flatten)]
    pub discovery: workloads::discovery::DiscoveryOptions,

    /// config-watch (and discovery's, election's): the watchers.
    #[command(flatten)]
    pub watch: workloads::watch::WatchOptions,

    /// `--endpoints`, `--zk-client`, credentials, TLS and `--secure`.
    #[command(flatten)]
    pub attach: attach::AttachOptions,

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
        self.cluster.size(self.load.target)
    }

    /// Whether coordbench starts the servers on this machine (not attached, not null).
    pub fn starts_servers(&self) -> bool {
        !self.attach.attached() && crate::targets::descriptor(self.load.target).has_servers
    }

    /// Where the cluster's members run, as the cluster options' checks need it.
    pub fn placement(&self) -> cluster::Placement {
        cluster::Placement {
            target: self.load.target,
            starts_servers: self.starts_servers(),
            attached: self.attach.attached(),
        }
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
