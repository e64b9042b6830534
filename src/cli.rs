//! The command line: every subcommand and where its options live. Each command's options
//! are declared next to the code that runs it (`run`'s in the bench crate, `report`'s and
//! `compare`'s in the analysis crate, ...); this module only puts them together.

use clap::{Parser, Subcommand};
use coordbench_bench::args::RunArgs;

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
    #[command(after_help = DURATIONS)]
    Run(RunArgs),
    /// Search, in open loop, for the highest --rate that meets every --slo for a whole
    /// window, on one cluster; writes capacity.json and summary.csv.
    #[command(after_help = DURATIONS)]
    Capacity(crate::capacity::CapacityArgs),
    /// Run every point of a sweep spec (targets × axis values × repeats), then report.
    Sweep(crate::sweep::SweepArgs),
    /// Write charts and report.md for a sweep directory (or any directory with a
    /// summary.csv).
    Report(coordbench_analysis::report::ReportArgs),
    /// Judge a candidate's results against a baseline's, point by point, beyond noise.
    Compare(coordbench_analysis::compare::CompareArgs),
    /// Run a baseline and a candidate interleaved, compare them, and fail on breached
    /// thresholds (exit 3).
    Gate(crate::gate::GateArgs),
    /// Merge the run directories of a sharded run's shards into one run directory.
    Merge(crate::merge::MergeArgs),
    /// Install a real server at a version (etcd from the Go module proxy, ZooKeeper from
    /// Maven Central) into the cache, or list what is installed (--list).
    Install(coordbench_lab::install::InstallArgs),
    /// Run one member of a built-in engine (what --target raft|zab starts N of).
    #[command(subcommand)]
    Serve(ServeCommand),
    /// Simulate a whole cluster of a built-in core (no sockets, disks or wall clock).
    #[command(subcommand)]
    Simulate(coordbench_analysis::simulate::args::SimulateCommand),
}

/// What `run --help` and `capacity --help` say of every timing option.
const DURATIONS: &str =
    "Durations (--duration, --warmup, --ttl, --heartbeat, --election-timeout's bounds, ...): \
a number with its unit (10s, 500ms, 2m, 75us) or a bare whole number of milliseconds (150).";

/// The built-in engines a process can serve.
#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// A member of the Raft engine, serving etcd's v3 gRPC API.
    Raft(coordbench_serve::ServeArgs),
    /// A member of the Zab engine, serving ZooKeeper's protocol.
    Zab(coordbench_serve::ServeArgs),
}
