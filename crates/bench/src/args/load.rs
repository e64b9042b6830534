//! The load a run offers: the target and the workload, the clients and their connections,
//! open or closed loop, the measured window, timeouts, session TTL and seed; their checks,
//! and the [`LoadPlan`] the runner follows once the workload has shaped it ([`Shape`]).

use std::time::Duration;

use clap::Args;
use coordbench_drivers::ApiFamily;
use coordbench_results::kinds::{TargetKind, WorkloadKind};
use coordbench_results::parse::{parse_positive_duration, parse_rate};

use crate::runner::{opening, LoadMode, LoadPlan};
use crate::shard::{Part, Sharding, StartRule};

/// Clients that share one gRPC connection when `--conns` is not given (etcd API).
pub const CLIENTS_PER_CONN: usize = 64;

/// `--session-opens` when not given.
const DEFAULT_SESSION_OPENS: u32 = opening::DEFAULT_AT_ONCE as u32;

/// The shortest measured window `--duration` takes.
pub const MIN_WINDOW: Duration = Duration::from_millis(100);
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Load")]
pub struct LoadOptions {
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

    /// Length of the measured window (e.g. 10s, 2m; a bare number is ms, as in every
    /// timing option).
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub duration: Duration,

    /// Warm-up before the measured window; its operations are not reported.
    #[arg(long, default_value = "1s", value_parser = coordbench_results::parse::parse_duration)]
    pub warmup: Duration,

    /// Stop after this many operations in the measured window.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: Option<u64>,

    /// An operation that takes longer counts as a timeout error with this latency.
    #[arg(long, default_value = "5s", value_parser = parse_positive_duration)]
    pub op_timeout: Duration,

    /// Session / lease TTL; sessions are refreshed at TTL/3.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub ttl: Duration,

    /// Client sessions opened at once before warm-up: the next opens as soon as one is
    /// open, so each waits behind at most this many others, however many clients there
    /// are (each is still bounded by the 5 s connect timeout). run.json
    /// `results.session_opening` records how long opening took.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SESSION_OPENS, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub session_opens: u32,

    /// Seed for every client's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// What the workload decides about the load plan. [`LoadOptions::shape`] starts from the
/// options as given; a workload group replaces what its workload decides itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub clients: usize,
    pub conns: usize,
    pub rate: Option<f64>,
    pub max_ops: Option<u64>,
    pub warmup: Duration,
    pub duration: Duration,
    pub op_timeout: Duration,
}

impl LoadOptions {
    /// The client protocol the target speaks.
    pub fn family(&self) -> ApiFamily {
        crate::config::family_of(self.target)
    }

    /// `--conns` as given.
    pub fn given_conns(&self) -> Option<usize> {
        self.conns.map(|c| c as usize)
    }

    /// The load plan as the options give it, before the workload shapes it.
    pub fn shape(&self) -> Shape {
        Shape {
            clients: self.clients as usize,
            conns: self.given_conns().unwrap_or_else(|| self.shared_conns()),
            rate: self.rate,
            max_ops: self.ops,
            warmup: self.warmup,
            duration: self.duration,
            op_timeout: self.op_timeout,
        }
    }

    /// How the runner drives the shaped load: clients, open or closed loop, the window,
    /// timeouts and the shard's part.
    pub fn plan(&self, shape: &Shape, sharding: Option<&Sharding>) -> LoadPlan {
        LoadPlan {
            clients: shape.clients,
            mode: match shape.rate {
                Some(rate) => LoadMode::Open { rate },
                None => LoadMode::Closed,
            },
            warmup: shape.warmup,
            duration: shape.duration,
            max_ops: shape.max_ops,
            op_timeout: shape.op_timeout,
            interval: Duration::from_secs(1),
            ttl: self.ttl,
            session_opens: self.session_opens as usize,
            part: sharding.map_or(Part::WHOLE, |s| s.part),
            start: sharding.map_or(StartRule::Now, |s| s.start.clone()),
        }
    }

    /// `--conns` on ZooKeeper's API: each client of a workload whose sessions own what they
    /// hold has its own session, so its own connection.
    pub fn check_conns(&self) -> Result<(), String> {
        if self.family() == ApiFamily::ZooKeeper
            && sessions_are_per_client(self.workload)
            && self.conns.is_some_and(|c| c != self.clients)
        {
            return Err("--conns does not apply to zookeeper: each client has its own session (its own connection), which owns its locks; omit --conns".into());
        }
        Ok(())
    }

    /// `--ttl` on the etcd API, whose leases are whole seconds.
    /// A window shorter than [`MIN_WINDOW`] measures nothing; the likeliest cause is a bare
    /// number meant as seconds (bare numbers are milliseconds in every timing option).
    pub fn check_window(&self) -> Result<(), String> {
        if self.duration < MIN_WINDOW {
            let ms = self.duration.as_millis();
            return Err(format!(
                "--duration {ms}ms is too short to measure (at least {}ms); a bare number is milliseconds: write {ms}s for seconds",
                MIN_WINDOW.as_millis()
            ));
        }
        Ok(())
    }

    pub fn check_ttl(&self) -> Result<(), String> {
        if self.ttl < Duration::from_secs(1) && self.family() == ApiFamily::Etcd {
            return Err(
                "--ttl must be at least 1s on the etcd API (leases are whole seconds)".into(),
            );
        }
        Ok(())
    }

    /// The default connection count of the clients: on the etcd API one connection
    /// (balanced over every endpoint) per [`CLIENTS_PER_CONN`] clients, as etcd's own
    /// benchmark tool shares one. A connection per client costs the generator a write and a
    /// read syscall per request (HTTP/2 can batch only the streams of one connection), about
    /// half its CPU per op; the ZooKeeper drivers keep one session, so one connection, per
    /// client, and null has none.
    fn shared_conns(&self) -> usize {
        let clients = self.clients as usize;
        match self.family() {
            ApiFamily::Etcd => clients.div_ceil(CLIENTS_PER_CONN),
            ApiFamily::ZooKeeper | ApiFamily::Null | ApiFamily::Redis | ApiFamily::Postgres => {
                clients
            }
        }
    }
}

/// Workloads whose sessions each own what they hold (locks, candidacies), so a ZooKeeper
/// client cannot share one: `--conns` does not apply to them there.
fn sessions_are_per_client(w: WorkloadKind) -> bool {
    !matches!(w, WorkloadKind::Discovery | WorkloadKind::ConfigWatch)
}
