//! `coordbench run` from start to finish: validate, start the target, measure, write the
//! results (also when the run fails or is interrupted), tear the target down.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use coordbench_workloads::kv::{KvOp, KvOptions, KvWorkload};
use coordbench_workloads::lock::{LockOptions, LockWorkload};
use coordbench_workloads::{RunClock, Workload};

use crate::cli::{RunArgs, WorkloadKind};
use crate::config::RunConfig;
use crate::console::{print_summary, StatusLine};
use crate::environment::Environment;
use crate::provision::disk::probe_sync_latency;
use crate::provision::Cluster;
use crate::results::record::{end_reason_name, SCHEMA};
use crate::results::{default_out_dir, write_run, MeasuredResults, RunRecord};
use crate::runner::{self, EndReason};
use crate::{server_stats, signals, targets};

/// How a command ended, as the process exit code says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 0: the run completed.
    Complete,
    /// 1: the run failed after it began measuring; results are incomplete.
    Failed,
    /// 130: interrupted; what was measured is written.
    Interrupted,
}

/// A command that could not run: bad input or an environment problem, exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl<E: Into<anyhow::Error>> From<E> for UsageError {
    fn from(e: E) -> Self {
        UsageError(one_line(&format!("{:#}", e.into())))
    }
}

/// Samples of the data directory's sync latency taken before a run.
const SYNC_PROBE_SAMPLES: usize = 50;

pub async fn run(args: RunArgs) -> Result<Outcome, UsageError> {
    let config = RunConfig::from_args(&args)?;
    let stop = signals::stop_on_signals()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&config.target, &config.workload));
    std::fs::create_dir_all(&out).map_err(|e| {
        UsageError(format!(
            "cannot create results directory {}: {e}",
            out.display()
        ))
    })?;

    let mut record = RunRecord {
        schema: SCHEMA,
        complete: false,
        end_reason: "failed".into(),
        error: None,
        started_at: now_rfc3339(),
        finished_at: String::new(),
        config: config.clone(),
        environment: Environment::capture(),
        server_version: None,
        cluster: None,
        sync_probe: None,
        server_counters: None,
        results: None,
    };

    let prepared = tokio::select! {
        t = targets::prepare(&config, &out) => t,
        _ = stop.cancelled() => Err(anyhow::anyhow!("interrupted while starting the target")),
    };
    let mut target = match prepared {
        Ok(t) => t,
        Err(_) if stop.is_cancelled() => {
            // Interrupted while the target started (what it started is stopped by now): an
            // interruption like any other, not an environment error.
            record.end_reason = "interrupted".into();
            record.finished_at = now_rfc3339();
            write_run(&out, &record, None)?;
            print_summary(&record, &out);
            return Ok(Outcome::Interrupted);
        }
        Err(e) => {
            let error = UsageError::from(e);
            record.error = Some(error.0.clone());
            record.finished_at = now_rfc3339();
            // Best effort: the error itself is what the user must see.
            let _ = write_run(&out, &record, None);
            return Err(error);
        }
    };
    record.server_version = Some(target.server_version.clone());
    if let Some(cluster) = &target.cluster {
        record.cluster = Some(cluster.info().clone());
        record.sync_probe = probe(cluster).await;
    }

    let counters_before = match &target.cluster {
        Some(cluster) => server_stats::scrape(config.target_kind, cluster).await,
        None => None,
    };
    let clock = RunClock::start();
    let workload = build_workload(&config, clock)?;
    let mut status = StatusLine::new(args.quiet);
    let measured = runner::run(
        &config.plan,
        target.coordinator.clone(),
        workload,
        clock,
        stop.clone(),
        &mut |elapsed, aggregator| status.update(elapsed, aggregator),
    )
    .await;
    status.clear();

    if let (Some(before), Some(cluster)) = (counters_before, &target.cluster) {
        if let Some(after) = server_stats::scrape(config.target_kind, cluster).await {
            record.server_counters = Some(server_stats::difference(before, after));
        }
    }
    let member_failure = target.cluster.as_mut().and_then(|c| c.check_alive().err());
    let outcome = match &measured {
        Ok(o) => {
            record.results = Some(MeasuredResults::of(o));
            record.end_reason = end_reason_name(o.end_reason).into();
            match (o.end_reason, &member_failure) {
                (EndReason::Interrupted, _) => Outcome::Interrupted,
                (_, Some(_)) => Outcome::Failed,
                _ => Outcome::Complete,
            }
        }
        Err(runner::RunError::InterruptedDuringSetup) => {
            record.end_reason = "interrupted".into();
            Outcome::Interrupted
        }
        Err(e) => {
            record.error = Some(one_line(&e.to_string()));
            Outcome::Failed
        }
    };
    if let Some(failure) = member_failure {
        record.error = Some(one_line(&failure.to_string()));
    }
    record.complete = outcome == Outcome::Complete;
    record.finished_at = now_rfc3339();
    let written = write_run(&out, &record, measured.as_ref().ok());
    if let Some(cluster) = target.cluster.as_mut() {
        cluster.stop();
    }
    written?;
    print_summary(&record, &out);
    Ok(outcome)
}

fn build_workload(config: &RunConfig, clock: RunClock) -> Result<Arc<dyn Workload>, UsageError> {
    Ok(match config.workload_kind {
        WorkloadKind::KvPut | WorkloadKind::KvGet => Arc::new(KvWorkload::new(KvOptions {
            op: if config.workload_kind == WorkloadKind::KvPut {
                KvOp::Put
            } else {
                KvOp::Get(config.read_consistency)
            },
            keys: config.keys,
            value_size: config.value_size,
            seed: config.seed,
        })?),
        WorkloadKind::Lock => Arc::new(LockWorkload::new(
            LockOptions {
                locks: config.locks,
                hold: std::time::Duration::from_secs_f64(config.hold_ms / 1000.0),
                recipe: config.lock_recipe,
            },
            clock,
        )?),
    })
}

/// Sync latency of the first member's data directory, where the cluster has one.
async fn probe(cluster: &Cluster) -> Option<crate::provision::disk::SyncProbe> {
    let dir = cluster.data_dirs().into_iter().next()?;
    tokio::task::spawn_blocking(move || {
        probe_sync_latency(Path::new(&dir), SYNC_PROBE_SAMPLES).ok()
    })
    .await
    .ok()
    .flatten()
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Errors are printed on one line: chains joined with ": ", newlines folded.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
