//! `coordbench simulate`: deterministic whole-cluster simulations of the sans-IO cores
//! (engines/raft, engines/zab) on engines/sim's timed network, with no sockets, disks or
//! wall clock. `simulate election` reproduces the Raft paper's Figure 16: per timeout
//! range, many trials of crashing the leader and timing the next election; election.csv,
//! summary.csv/json and CDF charts beside the paper's points, all from one printed seed.
//! `simulate throughput` is a CPU model calibrated on measured runs (throughput.rs): the
//! ZooKeeper paper's Table 1 shape for cluster sizes and cores this machine lacks.
//! `simulate cost` counts the instructions an engine spends per committed write on a
//! seeded workload (cost.rs): the deterministic figure of performance gates.

pub mod args;
pub mod charts;
pub mod cost;
pub mod election;
pub mod machine;
pub mod members;
pub mod summary;
pub mod throughput;
pub mod throughput_report;
pub mod timeouts;

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::Context;

use crate::report::published::RAFT_FIGURE16;
use args::{CostArgs, ElectionArgs, SimulateCommand, ThroughputArgs};
use coordbench_results::outcome::{Outcome, UsageError};
use election::{Setup, Trial};
use summary::{LineContext, LineSummary};
use timeouts::TimeoutRange;

pub fn run(command: &SimulateCommand) -> Result<Outcome, UsageError> {
    match command {
        SimulateCommand::Election(args) => election_command(args),
        SimulateCommand::Throughput(args) => throughput_command(args),
        SimulateCommand::Cost(args) => cost_command(args),
    }
}

fn cost_command(args: &CostArgs) -> Result<Outcome, UsageError> {
    if args.workload_only {
        cost::run_workload(args.engine, args.ops, args.seed).map_err(UsageError)?;
        return Ok(Outcome::Complete);
    }
    let binary = std::env::current_exe().context("finding this binary")?;
    let scratch = tempfile::tempdir().context("creating a scratch directory")?;
    let cost = cost::count(&binary, args.engine, args.ops, args.seed, scratch.path())
        .map_err(|e| UsageError(e.to_string()))?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&cost).context("encoding the cost")?
        );
    } else {
        println!(
            "{}: {:.0} instructions per committed write ({} members, {} and {} writes, seed {}; {})",
            cost.engine,
            cost.instructions_per_op,
            cost::MEMBERS,
            cost.ops,
            2 * cost.ops,
            cost.seed,
            cost.counter
        );
    }
    Ok(Outcome::Complete)
}

fn throughput_command(args: &ThroughputArgs) -> Result<Outcome, UsageError> {
    let runs = throughput::find_runs(&args.calibrate).map_err(UsageError)?;
    let costs = throughput::calibrate(&runs).map_err(UsageError)?;
    let out = args.out.clone().unwrap_or_else(|| {
        coordbench_results::time::default_out_dir("simulate-throughput", "model")
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let model = throughput_report::Model {
        costs: &costs,
        runs: &runs,
        members: &args.members,
        read_ratios: &args.read_ratios,
        cores: args.cores,
    };
    let summary = throughput_report::write(&out, &model)?;
    println!("{summary}");
    println!("results: {}", out.display());
    Ok(Outcome::Complete)
}

fn default_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn election_command(args: &ElectionArgs) -> Result<Outcome, UsageError> {
    let setup = Setup::from_args(args).map_err(UsageError)?;
    let seed = args.seed.unwrap_or_else(default_seed);
    let out = args.out.clone().unwrap_or_else(|| {
        coordbench_results::time::default_out_dir("simulate-election", setup.core.name())
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    println!(
        "simulate election: {} x {} members, {} trials per range, seed {seed} (replay with --seed {seed})",
        setup.core.name(),
        setup.members,
        args.trials
    );
    let started = Instant::now();
    let lines = run_lines(&setup, &args.timeouts, args.trials, seed).map_err(UsageError)?;
    let wall_s = started.elapsed().as_secs_f64();
    let summaries = write_outputs(&out, &setup, args, seed, &lines, wall_s)?;
    print_summaries(&summaries, wall_s);
    println!("results: {}", out.display());
    Ok(Outcome::Complete)
}

/// Every range's trials and its own wall time, ranges on threads of their own (each
/// trial depends only on its seed, so the outcome does not depend on scheduling).
fn run_lines(
    setup: &Setup,
    ranges: &[TimeoutRange],
    trials: u32,
    seed: u64,
) -> Result<Vec<(TimeoutRange, Vec<Trial>, f64)>, String> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranges
            .iter()
            .map(|range| {
                scope.spawn(move || {
                    let started = Instant::now();
                    let line = election::run_line(setup, range, trials, seed)?;
                    Ok((*range, line, started.elapsed().as_secs_f64()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a simulation thread panicked".into()))
            })
            .collect()
    })
}

fn write_outputs(
    out: &Path,
    setup: &Setup,
    args: &ElectionArgs,
    seed: u64,
    lines: &[(TimeoutRange, Vec<Trial>, f64)],
    wall_s: f64,
) -> Result<Vec<LineSummary>, UsageError> {
    let core = setup.core.name();
    let cap_ms = setup.cap_us as f64 / 1000.0;
    let trials: Vec<(TimeoutRange, Vec<Trial>)> =
        lines.iter().map(|(r, t, _)| (*r, t.clone())).collect();
    summary::write_election_csv(&out.join("election.csv"), core, setup.members, &trials)?;
    let summaries: Vec<LineSummary> = lines
        .iter()
        .map(|(range, trials, line_wall_s)| {
            let ctx = LineContext {
                core,
                members: setup.members,
                range,
                cap_ms,
                wall_s: *line_wall_s,
            };
            summary::summarize(&ctx, trials)
        })
        .collect();
    let total_trials: usize = summaries.iter().map(|s| s.trials).sum();
    let simulated_s: f64 = lines
        .iter()
        .flat_map(|(_, t, _)| t)
        .map(|t| t.simulated_us as f64 / 1e6)
        .sum();
    let meta = serde_json::json!({
        "command": "simulate election",
        "core": core,
        "members": setup.members,
        "seed": seed,
        "trials_per_range": args.trials,
        "broadcast_ms": args.broadcast.as_secs_f64() * 1e3,
        "link_base_us": [setup.link.base_us.0, setup.link.base_us.1],
        "jitter_us": setup.link.jitter_us,
        "loss_percent": args.loss,
        "tick_us": setup.tick_us,
        "heartbeat_ms": setup.heartbeat_us.map(|us| us as f64 / 1e3),
        "max_election_ms": cap_ms,
        "pre_vote": setup.pre_vote,
        "check_quorum": setup.check_quorum,
        "load_per_s": setup.load_per_s,
        "wall_s": wall_s,
        "trials_per_s": total_trials as f64 / wall_s.max(1e-9),
        "simulated_s_per_wall_s": simulated_s / wall_s.max(1e-9),
    });
    summary::write_summaries(out, &summaries, meta)?;
    let sorted: Vec<(TimeoutRange, Vec<f64>)> = trials
        .iter()
        .map(|(r, t)| (*r, summary::election_ms(t, cap_ms)))
        .collect();
    crate::report::font::load(Path::new(crate::report::font::DEFAULT_FONT))
        .map_err(|e| UsageError(e.to_string()))?;
    charts::write(&charts_dir(out)?, core, setup.members, &sorted)
        .map_err(|e| UsageError(e.to_string()))?;
    Ok(summaries)
}

fn charts_dir(out: &Path) -> Result<PathBuf, UsageError> {
    let dir = out.join("charts");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn published(range: &str) -> String {
    let stated: Vec<&str> = RAFT_FIGURE16
        .iter()
        .filter(|p| format!("{}-{}", p.min_ms, p.max_ms) == range)
        .map(|p| p.what)
        .collect();
    if stated.is_empty() {
        "-".into()
    } else {
        stated.join("; ")
    }
}

fn print_summaries(summaries: &[LineSummary], wall_s: f64) {
    println!(
        "{:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8} {:>9}  paper",
        "timeouts",
        "trials",
        "median ms",
        "p99 ms",
        "max ms",
        "mean ms",
        "split",
        "censored",
        "trials/s"
    );
    for s in summaries {
        println!(
            "{:>9} {:>7} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>6.1}% {:>8} {:>9.0}  {}",
            s.timeout_range,
            s.trials,
            s.median_ms,
            s.p99_ms,
            s.max_ms,
            s.mean_ms,
            s.split_vote_share * 100.0,
            s.censored,
            s.trials_per_s,
            published(&s.timeout_range)
        );
    }
    let trials: usize = summaries.iter().map(|s| s.trials).sum();
    println!(
        "speed: {trials} trials in {wall_s:.2} s wall ({:.0} trials/s); per line: {}",
        trials as f64 / wall_s.max(1e-9),
        summaries
            .iter()
            .map(|s| format!(
                "{} {:.0}x real time",
                s.timeout_range, s.simulated_s_per_wall_s
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
}
