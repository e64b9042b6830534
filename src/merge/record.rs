//! The merged run's run.json: the whole run's configuration (rebuilt from a shard's command
//! line without `--shard`, so it is what one process with the same options records), the
//! shards' environment and cluster, and `shards`: who took part and how far apart they
//! started.

use std::path::Path;
use std::time::Duration;

use coordbench_bench::args::parse_run_args;
use coordbench_bench::config::RunConfig;
use coordbench_bench::runner::EndReason as WindowEnd;
use coordbench_bench::shard::MergedShard;
use coordbench_results::record::EndReason;

use super::shards::ShardRun;
use super::MergeError;

/// One shard as the merge saw it.
pub fn merged_shard(shard: &ShardRun) -> MergedShard {
    let record = shard.shard();
    let results = shard.results();
    MergedShard {
        index: record.index,
        dir: shard.dir.display().to_string(),
        hostname: shard.environment.hostname.clone(),
        start: record.start.clone(),
        measure_start_unix_us: record.measure_start_unix_us,
        start_wait_ms: record.start_wait_ms,
        ops: results.ops,
        throughput_ops_s: results.throughput_ops_s,
        complete: shard.header.complete,
    }
}

/// The configuration one process with the shards' options records: a shard's command
/// line, parsed again without its sharding options.
pub fn whole_config(shard: &ShardRun) -> Result<RunConfig, MergeError> {
    let args = &shard.shard().args;
    let refused = |why: String| {
        MergeError::Unreadable(format!(
            "{}: its command line ({}) does not parse: {why}",
            shard.dir.join("run.json").display(),
            args.join(" ")
        ))
    };
    if args.get(1).map(String::as_str) != Some("run") {
        return Err(refused("not a `coordbench run`".into()));
    }
    let argv = args.iter().take(1).chain(args.iter().skip(2));
    let mut run = parse_run_args(argv)
        .map_err(|e| refused(coordbench_results::outcome::one_line(&e.to_string())))?;
    run.sharding.shard = None;
    run.sharding.run_id = None;
    run.sharding.rendezvous = false;
    run.sharding.start_at = None;
    RunConfig::from_args(&run).map_err(|e| refused(e.to_string()))
}

/// The run's end: interrupted or failed if any shard was, else ops_reached if any shard
/// spent its budget first, else completed.
pub fn end_reason(shards: &[ShardRun]) -> EndReason {
    let any = |reason: EndReason| shards.iter().any(|s| s.header.end_reason == reason);
    [
        EndReason::Interrupted,
        EndReason::Failed,
        EndReason::OpsReached,
    ]
    .into_iter()
    .find(|&reason| any(reason))
    .unwrap_or(EndReason::Completed)
}

/// The merged window's end as the runner names it (a failed shard's window ran on).
pub fn window_end(reason: EndReason) -> WindowEnd {
    match reason {
        EndReason::Interrupted => WindowEnd::Interrupted,
        EndReason::OpsReached => WindowEnd::OpsReached,
        EndReason::Completed | EndReason::Failed => WindowEnd::Completed,
    }
}

/// Copies the one shard's resources.csv that sampled the servers (when one did).
pub fn copy_resources(shards: &[ShardRun], out: &Path) -> Result<(), MergeError> {
    if let Some(s) = shards.iter().find(|s| sampled(s)) {
        let from = s.dir.join("resources.csv");
        if from.is_file() {
            std::fs::copy(&from, out.join("resources.csv"))
                .map_err(|e| MergeError::Write(format!("copying {}: {e}", from.display())))?;
        }
    }
    Ok(())
}

/// Whether a shard sampled the servers' resources (an attached run records none).
fn sampled(shard: &ShardRun) -> bool {
    shard
        .resources
        .as_ref()
        .is_some_and(|r| r.peak_rss_mb.is_some() || r.cpu_s.is_some())
}

/// The resources of the shard that sampled the servers, if one did.
pub fn resources(shards: &[ShardRun]) -> Option<coordbench_lab::resources::ResourceSummary> {
    shards.iter().find(|s| sampled(s))?.resources.clone()
}

/// `--clock-uncertainty`, else the start skew, at least 1 ms.
pub fn clock_uncertainty(given: Option<Duration>, start_skew: Duration) -> Duration {
    given.unwrap_or_else(|| start_skew.max(Duration::from_millis(1)))
}
