//! `coordbench merge DIR... --out DIR`: the shards of a sharded run (`run --shard`) become
//! one ordinary run directory, exactly: [`shards`] reads them and refuses shards of
//! different runs or options; [`combine`] aligns their intervals by wall-clock second and
//! adds the histograms, sums counters and errors by kind; [`checks`] judges mutual exclusion
//! (lock, election) across the shards by fencing token; [`record`] rebuilds the whole run's configuration
//! and run.json. The files are written by the same writers as a run's ([`write_run`]), so
//! `report`, `compare` and the notebooks read the result unchanged.

pub mod checks;
pub mod combine;
pub mod record;
pub mod shards;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use coordbench_bench::outputs::{write_run, MeasuredResults, RunRecord};
use coordbench_bench::runner::RunOutcome;
use coordbench_bench::shard::intervals::{self, INTERVALS_FILE};
use coordbench_bench::shard::MergeRecord;
use coordbench_results::outcome::{Outcome, UsageError};
use coordbench_results::record::RecordHeader;
use coordbench_results::schema::RUN_SCHEMA;

#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// The run directories of every shard of one run.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    /// The merged run directory (created; an ordinary run directory).
    #[arg(long)]
    pub out: PathBuf,

    /// lock: how far the shards' clocks may disagree; sections of different shards overlap
    /// only by more than this (default: the measured start skew, at least 1 ms).
    #[arg(long, value_parser = coordbench_results::parse::parse_duration)]
    pub clock_uncertainty: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(
        "{0} is not a shard's run directory (its run.json has no `shard`: run it with --shard I/N)"
    )]
    NotAShard(String),
    #[error("cannot merge: {0}")]
    Mismatch(String),
    #[error("cannot merge: {0}")]
    Incomplete(String),
    #[error("cannot read {0}")]
    Unreadable(String),
    #[error("cannot write the merged run: {0}")]
    Write(String),
}

pub fn run(args: &MergeArgs) -> Result<Outcome, UsageError> {
    let merged = merge(args)
        .map_err(|e| UsageError(coordbench_results::outcome::one_line(&e.to_string())))?;
    coordbench_bench::console::print_summary(&merged, &args.out);
    if let Some(shards) = &merged.shards {
        println!(
            "merged {} shards of run {}: start skew {:.3} ms",
            shards.count, shards.run_id, shards.start_skew_ms
        );
    }
    Ok(if merged.header.complete {
        Outcome::Complete
    } else {
        Outcome::Failed
    })
}

/// Merges `args.dirs` into `args.out` and returns the merged run's record.
pub fn merge(args: &MergeArgs) -> Result<RunRecord, MergeError> {
    check_out(args)?;
    let shards = shards::read_all(&args.dirs)?;
    let config = record::whole_config(&shards[0])?;
    let per_shard = shards
        .iter()
        .map(|s| {
            let path = s.dir.join(INTERVALS_FILE);
            intervals::read(&path).map_err(|e| MergeError::Unreadable(format!("{e:#}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let combined = combine::intervals(&shards, per_shard);
    let uncertainty = record::clock_uncertainty(args.clock_uncertainty, combined.start_skew);
    let window_us = (
        combined.origin_us,
        combined.origin_us + combined.window.as_micros() as u64,
    );
    let observers = config.workload_options.watch.watchers.unwrap_or(0);
    let check = checks::of_workload(config.workload, observers, &shards, window_us, uncertainty)?;
    let end_reason = record::end_reason(&shards);
    let outcome = RunOutcome {
        end_reason: record::window_end(end_reason),
        window: combined.window,
        total: combined.total,
        intervals: combined.intervals,
        check,
        counters: combine::counters(&shards),
        schedule_dropped: combine::schedule_dropped(&shards),
        measure_start: Instant::now(),
        start_wait: Duration::ZERO,
        opening: Default::default(),
    };
    let generator = combine::generators(&shards, outcome.total.ops, outcome.window);
    let first = &shards[0];
    let record = RunRecord {
        header: RecordHeader {
            complete: shards.iter().all(|s| s.header.complete),
            end_reason,
            error: shards.iter().find_map(|s| s.header.error.clone()),
            started_at: shards
                .iter()
                .map(|s| s.header.started_at.clone())
                .min()
                .unwrap_or_default(),
            finished_at: shards
                .iter()
                .map(|s| s.header.finished_at.clone())
                .max()
                .unwrap_or_default(),
            ..RecordHeader::begin(RUN_SCHEMA, String::new())
        },
        config: config.record(),
        environment: first.environment.clone(),
        server_version: first.server_version.clone(),
        cluster: first.cluster.clone(),
        sync_probe: None,
        resources: record::resources(&shards),
        generator_saturated: generator.as_ref().map(|g| g.generator_saturated),
        generator,
        server_counters: None,
        engine_cost: None,
        faults: None,
        results: Some(MeasuredResults::of(&outcome)),
        shard: None,
        shards: Some(MergeRecord {
            run_id: first.shard().run_id.clone(),
            count: shards.len(),
            start_skew_ms: combined.start_skew.as_secs_f64() * 1000.0,
            clock_uncertainty_ms: (outcome.check.lock.is_some()
                || outcome.check.election.is_some())
            .then_some(uncertainty.as_secs_f64() * 1000.0),
            parts: shards.iter().map(record::merged_shard).collect(),
        }),
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| MergeError::Write(format!("{}: {e}", args.out.display())))?;
    write_run(&args.out, &record, Some(&outcome))
        .map_err(|e| MergeError::Write(format!("{e:#}")))?;
    record::copy_resources(&shards, &args.out)?;
    Ok(record)
}

/// Refuses an `--out` that is one of the shards (the merge would overwrite its run.json).
fn check_out(args: &MergeArgs) -> Result<(), MergeError> {
    let same = |dir: &PathBuf| match (dir.canonicalize(), args.out.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    match args.dirs.iter().find(|d| same(d)) {
        Some(dir) => Err(MergeError::Mismatch(format!(
            "--out {} is one of the shards; give a new directory",
            dir.display()
        ))),
        None => Ok(()),
    }
}
