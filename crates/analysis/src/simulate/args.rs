//! `coordbench simulate`'s command line. Parsing only turns text into typed values; the
//! combinations are checked in [`super::election::Setup::from_args`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::timeouts::TimeoutRange;

#[derive(Debug, Subcommand)]
pub enum SimulateCommand {
    /// Crash the leader of a simulated cluster again and again and time the new election
    /// (the Raft paper's Figure 16), once per timeout range.
    Election(ElectionArgs),
    /// Saturated throughput against cluster size and read ratio, from per-operation CPU
    /// costs measured on this machine (a model, beside the ZooKeeper paper's Table 1).
    Throughput(ThroughputArgs),
    /// Instructions a built-in engine spends per committed write on a seeded simulated
    /// workload, counted by valgrind: a cost that repeats exactly, for gates.
    Cost(CostArgs),
}

#[derive(Debug, Clone, Args)]
pub struct CostArgs {
    /// The engine whose core and store run the workload.
    #[arg(long, value_enum, default_value = "raft")]
    pub engine: SimCore,

    /// Writes per counted run: the count is of a run of OPS writes and one of 2·OPS, and
    /// their difference divided by OPS is the cost per write.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub ops: u64,

    /// Seed of the simulation (the network's delays and the members' timers).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Print one line of JSON instead of text.
    #[arg(long)]
    pub json: bool,

    /// Run the workload once, uncounted, and exit: what the count runs under valgrind.
    #[arg(long, hide = true)]
    pub workload_only: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ThroughputArgs {
    /// Run or sweep directories to calibrate from: per target, a kv-put run on one
    /// member, a kv-put run on 2 or more, and a kv-get run
    /// (`coordbench sweep workloads/throughput-calibration.toml` makes them).
    #[arg(long, num_args = 1.., required = true)]
    pub calibrate: Vec<PathBuf>,

    /// Cluster sizes to model, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "3,5,7,9,13",
          value_parser = clap::value_parser!(u32).range(1..=101))]
    pub members: Vec<u32>,

    /// Read ratios to model (0 to 1), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,0.3,0.7,1", value_parser = parse_ratio)]
    pub read_ratios: Vec<f64>,

    /// CPU cores per server in the model (the paper's servers had two quad-core CPUs).
    #[arg(long, default_value_t = 1.0, value_parser = parse_cores)]
    pub cores: f64,

    /// Output directory (default: results/<UTC time>-simulate-throughput-model/).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn parse_ratio(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{text:?}: a read ratio is a number from 0 to 1")),
    }
}

fn parse_cores(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(c) if c > 0.0 && c.is_finite() => Ok(c),
        _ => Err(format!(
            "{text:?}: cores per server must be a positive number"
        )),
    }
}

/// Which sans-IO core the simulated members run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SimCore {
    Raft,
    Zab,
}

impl SimCore {
    pub fn name(self) -> &'static str {
        match self {
            SimCore::Raft => "raft",
            SimCore::Zab => "zab",
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ElectionArgs {
    /// The core the members run.
    #[arg(long, value_enum, default_value = "raft")]
    pub core: SimCore,

    /// Cluster size (3 to 13).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(3..=13))]
    pub members: u8,

    /// Election timeout ranges MIN-MAX in ms, comma-separated; a line (and a chart) each.
    /// For zab, MIN is syncLimit and MAX initLimit (Zab draws no random timeout).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = TimeoutRange::parse,
        default_value = "150-150,150-151,150-155,150-175,150-200,150-300,12-24"
    )]
    pub timeouts: Vec<TimeoutRange>,

    /// Broadcast time: the round trip of one message between two members (the Raft
    /// paper's term); every link delays each message by half of it, give or take --jitter.
    #[arg(long, default_value = "15ms", value_parser = humantime::parse_duration)]
    pub broadcast: Duration,

    /// Unequal links: each pair of members gets a one-way base latency of its own per
    /// trial, uniform within ± this many percent of broadcast/2 (the same both ways).
    /// Default 0: every link alike, as on the paper's cluster.
    #[arg(long, default_value_t = 0.0, value_parser = parse_percent)]
    pub link_spread: f64,

    /// Each message's own variation: uniform from 0 to this, on top of its link's base
    /// (the base is lowered by half of it, so the mean one-way delay stays broadcast/2).
    #[arg(long, default_value = "1ms", value_parser = humantime::parse_duration)]
    pub jitter: Duration,

    /// Share of messages lost, in percent.
    #[arg(long, default_value_t = 0.0, value_parser = parse_percent)]
    pub loss: f64,

    /// Leader heartbeat interval (default: half the range's minimum timeout, as in the
    /// paper).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub heartbeat: Option<Duration>,

    /// Length of one core tick: the resolution of every timer.
    #[arg(long, default_value = "100us", value_parser = humantime::parse_duration)]
    pub tick: Duration,

    /// Trials per timeout range.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub trials: u32,

    /// A trial that has no new leader this long after the crash is cut off (censored).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub max_election: Duration,

    /// Raft only: run PreVote before each election (our engine does).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub pre_vote: bool,

    /// Raft only: leader lease / CheckQuorum (our engine does).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub check_quorum: bool,

    /// Writes per second offered to the leader throughout each trial (8-byte commands), to
    /// time the cores under load; 0 for none.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub load: u64,

    /// Seed of everything random (default: drawn from the clock, and printed).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Output directory (default: results/<UTC time>-simulate-election-<core>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage"))?;
    if !(0.0..100.0).contains(&v) {
        return Err(format!("{s} is not within 0..100 %"));
    }
    Ok(v)
}
