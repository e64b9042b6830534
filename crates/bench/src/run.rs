//! `coordbench run` from start to finish: validate, start the target, measure, write the
//! results (also when the run fails or is interrupted), tear the target down.

use std::path::Path;
use std::sync::Arc;

use coordbench_drivers::ApiFamily;
use coordbench_workloads::barrier::{BarrierOptions, BarrierWorkload};
use coordbench_workloads::config_watch::{ConfigWatchOptions, ConfigWatchWorkload};
use coordbench_workloads::discovery::{DiscoveryOptions, DiscoveryWorkload};
use coordbench_workloads::election::{ElectionOptions, ElectionWorkload};
use coordbench_workloads::kv::{KvOp, KvOptions, KvWorkload};
use coordbench_workloads::lock::{FencingOptions, LockOptions, LockWorkload};
use coordbench_workloads::register::{RegisterOptions, RegisterWorkload};
use coordbench_workloads::resource::Protection;
use coordbench_workloads::{RunClock, Workload};

use crate::args::RunArgs;
use crate::config::{family_of, RunConfig};
use crate::console::{print_summary, StatusLine};
use crate::generator::{GeneratorMonitor, GeneratorUsage};
use crate::outputs::{write_run, MeasuredResults, RunRecord};
use crate::runner::{self, EndReason};
use crate::shard::intervals as shard_intervals;
use crate::shard::intervals::INTERVALS_FILE;
use crate::shard::{ShardRecord, WallAnchor};
use crate::{fault, preload, server_stats, targets};
use coordbench_lab::affinity::CpuList;
use coordbench_lab::environment::Environment;
use coordbench_lab::provision::disk::{probe_engine_sync_latency, probe_sync_latency, SyncProbe};
use coordbench_lab::provision::Cluster;
use coordbench_lab::{resources, signals};
use coordbench_results::files;
use coordbench_results::kinds::{value_name, WorkloadKind};
use coordbench_results::outcome::{one_line, Outcome, UsageError};
use coordbench_results::record::{EndReason as RecordEnd, RecordHeader};
use coordbench_results::schema::RUN_SCHEMA;
use coordbench_results::time::default_out_dir;
use coordbench_results::time::now_rfc3339;

/// Applies `--pin-servers` to every started member and `--pin-client` to this process
/// (the load generator), once the members run and before the measurement starts.
fn pin(config: &RunConfig, target: &targets::ReadyTarget) -> anyhow::Result<()> {
    if let (Some(cpus), Some(cluster)) = (&config.pin_servers, &target.cluster) {
        for i in 0..cluster.member_count() {
            if let Some(pid) = cluster.member_pid(i) {
                cpus.pin_process(pid)?;
            }
        }
    }
    if let Some(cpus) = &config.pin_client {
        cpus.pin_process(std::process::id())?;
    }
    Ok(())
}

/// Samples of the data directory's sync latency taken before a run.
const SYNC_PROBE_SAMPLES: usize = 50;
/// How often server processes' CPU, RSS and disk writes are sampled (resources.csv).
const RESOURCE_SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

pub async fn run(args: RunArgs) -> Result<Outcome, UsageError> {
    let config = RunConfig::from_args(&args)?;
    let stop = signals::stop_on_signals()?;
    run_with(&args, config, stop, Console::Full).await
}

/// Whether a run prints its summary table (a sweep prints one line per point instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Console {
    Full,
    Silent,
}

/// One run of a validated configuration, stopped by the caller's token: what `coordbench
/// run` does, and what a sweep does for each of its points. Built from the pieces a
/// capacity search runs several windows with: [`start`], [`measure`], then stopping the
/// cluster.
pub async fn run_with(
    args: &RunArgs,
    config: RunConfig,
    stop: tokio_util::sync::CancellationToken,
    console: Console,
) -> Result<Outcome, UsageError> {
    let out = results_dir(args.generator.out.as_deref(), &config)?;
    let mut record = new_record(&config);
    let window = Window {
        config: &config,
        out: &out,
        stop: &stop,
        quiet: args.generator.quiet,
        console,
    };
    let Some(mut started) = start(&window, &mut record).await? else {
        return Ok(Outcome::Interrupted);
    };
    let measured = measure(&window, &mut started.target, record).await;
    started.stop().await;
    let (outcome, record) = measured?;
    if console == Console::Full {
        print_summary(&record, &out);
        // The reason also goes to stderr, so that --quiet runs and scripts see why exit 1.
        if let (Outcome::Failed, Some(error)) = (outcome, &record.header.error) {
            eprintln!("error: run failed: {error} (results in {})", out.display());
        }
    }
    Ok(outcome)
}

/// `--out`, or the default results directory, created.
pub fn results_dir(
    out: Option<&Path>,
    config: &RunConfig,
) -> Result<std::path::PathBuf, UsageError> {
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| {
        default_out_dir(&value_name(config.target), &value_name(config.workload))
    });
    std::fs::create_dir_all(&out).map_err(|e| {
        UsageError(format!(
            "cannot create results directory {}: {e}",
            out.display()
        ))
    })?;
    Ok(out)
}

/// The record of a run that has not started yet: failed until it says otherwise.
pub fn new_record(config: &RunConfig) -> RunRecord {
    RunRecord {
        header: RecordHeader::begin(RUN_SCHEMA, now_rfc3339()),
        config: config.record(),
        environment: Environment::capture(),
        server_version: None,
        cluster: None,
        sync_probe: None,
        resources: None,
        generator: None,
        generator_saturated: None,
        server_counters: None,
        engine_cost: None,
        faults: None,
        results: None,
        shard: None,
        shards: None,
    }
}

/// Everything before the first measured window: starts (or attaches to) the target,
/// probes its disk, pins, and preloads the store (`--preload-keys`); `record` learns the
/// server and cluster. `None` when interrupted (run.json says so); on an error run.json
/// records it and whatever was started is stopped.
pub async fn start(
    window: &Window<'_>,
    record: &mut RunRecord,
) -> Result<Option<Started>, UsageError> {
    let Window {
        config,
        out,
        stop,
        console,
        ..
    } = *window;
    let prepared = tokio::select! {
        t = targets::prepare(config, out) => t,
        _ = stop.cancelled() => Err(anyhow::anyhow!("interrupted while starting the target")),
    };
    let target = match prepared {
        Ok(t) => t,
        // Interrupted while the target started (what it started is stopped by now): an
        // interruption like any other, not an environment error.
        Err(_) if stop.is_cancelled() => return interrupted_before_window(out, record, console),
        Err(e) => return Err(failed_before_window(out, record, e)),
    };
    record.server_version = Some(target.server_version.clone());
    if let Some(cluster) = &target.cluster {
        record.cluster = Some(cluster.info().clone());
        record.sync_probe = probe(config, cluster).await;
    }
    // Started members are stopped when `target` drops.
    if let Err(e) = pin(config, &target) {
        return Err(failed_before_window(out, record, e));
    }
    let shown = console == Console::Full && !window.quiet;
    match preload::fill(config, &target.coordinator, stop, shown).await {
        Ok(held) => Ok(Some(Started { target, held })),
        Err(_) if stop.is_cancelled() => interrupted_before_window(out, record, console),
        Err(e) => Err(failed_before_window(out, record, e)),
    }
}

/// A started target and the state preloaded into it.
pub struct Started {
    pub target: targets::ReadyTarget,
    /// Watchers and sessions held open beside the workload (`--preload-*`).
    pub held: coordbench_workloads::preload::Held,
}

impl Started {
    /// Closes the held state, then stops the members coordbench started.
    pub async fn stop(mut self) {
        preload::release(self.held).await;
        if let Some(cluster) = self.target.cluster.as_mut() {
            cluster.stop();
        }
    }
}

fn interrupted_before_window(
    out: &Path,
    record: &mut RunRecord,
    console: Console,
) -> Result<Option<Started>, UsageError> {
    record.header.end(RecordEnd::Interrupted, None);
    write_run(out, record, None)?;
    if console == Console::Full {
        print_summary(record, out);
    }
    Ok(None)
}

/// Records `error` in run.json (best effort: the error itself is what the user must see).
fn failed_before_window(out: &Path, record: &mut RunRecord, error: anyhow::Error) -> UsageError {
    let error = UsageError::from(error);
    record.header.end(RecordEnd::Failed, Some(error.0.clone()));
    let _ = write_run(out, record, None);
    error
}

/// One measured window's settings: where it writes and what stops it.
pub struct Window<'a> {
    pub config: &'a RunConfig,
    pub out: &'a Path,
    pub stop: &'a tokio_util::sync::CancellationToken,
    /// No live status line.
    pub quiet: bool,
    pub console: Console,
}

/// One measured window on a started target: warm-up and window, resources, counters and
/// faults around it, the result files in `window.out`. The cluster keeps running (a member
/// that died fails the window). Returns how the window ended and its record.
pub async fn measure(
    window: &Window<'_>,
    target: &mut targets::ReadyTarget,
    mut record: RunRecord,
) -> Result<(Outcome, RunRecord), UsageError> {
    let config = window.config;
    let zk_tls = target.zk_access.tls.clone();
    let counters_before = match &target.cluster {
        Some(cluster) => server_stats::scrape(config.target, cluster, zk_tls.as_ref()).await,
        None => None,
    };
    let clock = RunClock::start();
    let anchor = WallAnchor::now();
    record.shard = config
        .sharding
        .as_ref()
        .map(|s| ShardRecord::new(s, &anchor, clock.origin()));
    let workload = build_workload(config, clock)?;
    let sampler = target
        .cluster
        .as_ref()
        .and_then(|c| resources::Sampler::start(c.member_pids(), RESOURCE_SAMPLE_EVERY).ok());
    // After pinning, so the cores it may use are the ones it is pinned to; fewer runtime
    // workers than that use no more cores than they are.
    let cores = CpuList::available().cpus().len();
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let cores = cores.min(workers.max(1));
    let generator_monitor = GeneratorMonitor::start(cores).ok();
    let ran = run_window(window, target, workload.clone(), clock, &mut record).await;
    let mut errors = vec![ran.fault_error];
    // The verdict in run.json stands without the file, but the run says what is missing.
    errors.push(
        workload.write_history(window.out).err().map(|e| {
            format!("writing the workload's history (history.jsonl, sections.jsonl): {e}")
        }),
    );
    let run_ended = std::time::Instant::now();
    // The measured window on the monotonic clock, and the operations that succeeded in it.
    let span = ran.measured.as_ref().ok().map(|o| {
        let from = ran
            .window_start
            .or_else(|| run_ended.checked_sub(o.window))
            .unwrap_or(run_ended);
        (from, from + o.window, o.total.ops)
    });
    if let (Some(monitor), Some((from, to, ops))) = (generator_monitor, span) {
        let usage = monitor.stop(from, to, ops);
        // A sweep says so on the point's own line instead.
        if usage.generator_saturated && window.console == Console::Full {
            eprintln!("{}", saturation_warning(&usage));
        }
        record.generator_saturated = Some(usage.generator_saturated);
        record.generator = Some(usage);
    }
    if let Some(sampler) = sampler {
        let samples = sampler.stop();
        if let Some((from, to, ops)) = span {
            record.resources = Some(resources::summarize(&samples, from, to, ops));
        }
        // Best effort: a missing resources.csv must not cost the run's other results.
        let _ = files::write_csv_rows(&window.out.join("resources.csv"), &samples);
    }
    if let (Some(before), Some(cluster)) = (counters_before, &target.cluster) {
        if let Some(after) = server_stats::scrape(config.target, cluster, zk_tls.as_ref()).await {
            record.server_counters = Some(server_stats::difference(before, after));
        }
    }
    if let (Some(shard), Ok(o)) = (record.shard.as_mut(), &ran.measured) {
        shard.measure_start_unix_us = Some(anchor.wall_us(o.measure_start));
        shard.start_wait_ms = Some(o.start_wait.as_secs_f64() * 1000.0);
    }
    if config.engine_cost && ran.measured.is_ok() {
        errors.push(count_engine_cost(config, &mut record).await);
    }
    // A shard that never got its common start measured nothing: bad input or environment.
    let start_refused = matches!(&ran.measured, Err(runner::RunError::Start(_)));
    let member_failure = target.cluster.as_mut().and_then(|c| c.check_alive().err());
    errors.insert(0, member_failure.map(|f| f.to_string()));
    let outcome = judge(&mut record, &ran.measured, errors);
    write_run(window.out, &record, ran.measured.as_ref().ok())?;
    if let (Some(_), Ok(o)) = (&record.shard, &ran.measured) {
        shard_intervals::write(&window.out.join(INTERVALS_FILE), &o.intervals)?;
    }
    if start_refused {
        return Err(UsageError(record.header.error.unwrap_or_default()));
    }
    Ok((outcome, record))
}

/// `--engine-cost`: counts the engine binary's deterministic cost into `record`; the error
/// (valgrind missing, say) fails the run, which a gate then reports.
async fn count_engine_cost(config: &RunConfig, record: &mut RunRecord) -> Option<String> {
    let binary = match &config.engine_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().unwrap_or_else(|_| "coordbench".into()),
    };
    let engine = coordbench_results::kinds::value_name(config.target);
    match crate::engine_cost::count(&binary, &engine, config.engine_cost_ops).await {
        Ok(cost) => {
            record.engine_cost = Some(cost);
            None
        }
        Err(e) => Some(e),
    }
}

/// What running the workload (and the faults beside it) gave.
struct Ran {
    measured: Result<runner::RunOutcome, runner::RunError>,
    /// When the measured window began, from the first progress report inside it.
    window_start: Option<std::time::Instant>,
    /// Fault injection's error: the cluster did not recover.
    fault_error: Option<String>,
}

/// The workload through warm-up and window, with `--fault`'s injector beside it (it owns
/// the cluster meanwhile); failover.csv and the fault summary go into `record`.
async fn run_window(
    window: &Window<'_>,
    target: &mut targets::ReadyTarget,
    workload: Arc<dyn Workload>,
    clock: RunClock,
    record: &mut RunRecord,
) -> Ran {
    let config = window.config;
    let mut status = StatusLine::new(window.quiet);
    let mut window_start: Option<std::time::Instant> = None;
    let faults_stop = window.stop.child_token();
    let window_began = tokio_util::sync::CancellationToken::new();
    let fault_plan = config.fault_plan();
    let mut fault_cluster = match fault_plan {
        Some(_) => target.cluster.take(),
        None => None,
    };
    let fault_target = fault::FaultTarget {
        kind: config.target,
        zk_client: config.zk_client,
        zk_access: target.zk_access.clone(),
        etcd_security: target.etcd_security.clone(),
        coordinator: target.coordinator.clone(),
        session_ttl: config.plan.ttl,
    };
    let injector = async {
        match (&fault_plan, fault_cluster.as_mut()) {
            (Some(plan), Some(cluster)) => Some(
                fault::inject(
                    plan,
                    &fault_target,
                    cluster,
                    window_began.clone(),
                    faults_stop.clone(),
                )
                .await,
            ),
            _ => None,
        }
    };
    let workload_run = async {
        let measured = runner::run(
            &config.plan,
            target.coordinator.clone(),
            workload,
            clock,
            window.stop.clone(),
            &mut |elapsed, aggregator| {
                if window_start.is_none() && !elapsed.is_zero() {
                    window_start = std::time::Instant::now().checked_sub(elapsed);
                    window_began.cancel();
                }
                status.update(elapsed, aggregator)
            },
        )
        .await;
        faults_stop.cancel();
        measured
    };
    let (measured, injected) = tokio::join!(workload_run, injector);
    status.clear();
    if fault_cluster.is_some() {
        target.cluster = fault_cluster;
    }
    let mut fault_error = None;
    if let Some(mut injected) = injected {
        if let (Ok(o), Some(started)) = (&measured, injected.started) {
            let offset = started.saturating_duration_since(o.measure_start);
            fault::workload_gap::annotate(
                &mut injected.records,
                &o.intervals,
                config.plan.interval,
                offset,
            );
        }
        // Best effort: the summary in run.json keeps the figures if the file fails.
        let _ = files::write_csv_rows(&window.out.join("failover.csv"), &injected.records);
        let mut summary = fault::FaultSummary::of(&injected.records);
        summary.lost_writes = injected.lost_writes;
        summary.probe_sessions = injected.probe_sessions;
        record.faults = Some(summary);
        fault_error = injected.error.map(|e| format!("fault injection: {e}"));
    }
    Ran {
        measured,
        window_start,
        fault_error,
    }
}

/// How the window ended, with its results and errors in `record`. `errors`: a dead
/// member first, then what failed beside the workload (faults, history); any of them
/// fails a window whose figures otherwise stand.
fn judge(
    record: &mut RunRecord,
    measured: &Result<runner::RunOutcome, runner::RunError>,
    errors: Vec<Option<String>>,
) -> Outcome {
    let member_died = errors.first().is_some_and(Option::is_some);
    let (reason, mut error, mut outcome) = match measured {
        Ok(o) => {
            record.results = Some(MeasuredResults::of(o));
            let outcome = match o.end_reason {
                EndReason::Interrupted => Outcome::Interrupted,
                _ if member_died => Outcome::Failed,
                _ => Outcome::Complete,
            };
            (o.end_reason.into(), None, outcome)
        }
        Err(runner::RunError::InterruptedDuringSetup) => {
            (RecordEnd::Interrupted, None, Outcome::Interrupted)
        }
        Err(e) => (
            RecordEnd::Failed,
            Some(one_line(&e.to_string())),
            Outcome::Failed,
        ),
    };
    for e in errors.into_iter().flatten() {
        error = Some(one_line(&e));
        if outcome == Outcome::Complete {
            outcome = Outcome::Failed;
        }
    }
    record.header.end(reason, error);
    outcome
}

/// What a kv workload's clients do.
fn kv_op(config: &RunConfig) -> KvOp {
    match config.workload {
        WorkloadKind::KvGet => KvOp::Get(config.read_consistency),
        WorkloadKind::KvMixed => KvOp::Mixed {
            read_ratio: config
                .workload_options
                .kv
                .read_ratio
                .unwrap_or(crate::args::workloads::kv::DEFAULT_READ_RATIO),
            consistency: config.read_consistency,
        },
        _ if config.workload_options.kv.create_keys => KvOp::Create,
        _ => KvOp::Put,
    }
}

fn build_workload(config: &RunConfig, clock: RunClock) -> Result<Arc<dyn Workload>, UsageError> {
    let w = &config.workload_options;
    Ok(match config.workload {
        WorkloadKind::KvPut | WorkloadKind::KvGet | WorkloadKind::KvMixed => Arc::new(
            KvWorkload::new(KvOptions {
                op: kv_op(config),
                keys: config.keys,
                value_size: config.value_size,
                seed: config.seed,
            })?
            .after_preload(config.preload.keys.unwrap_or(0)),
        ),
        WorkloadKind::Lock => {
            let lock = LockWorkload::new(
                LockOptions {
                    locks: config.locks,
                    hold: config.hold,
                    recipe: config.lock_recipe,
                    session_ttl: config.plan.ttl,
                },
                clock,
            )?;
            // A shard keeps its sections (sections.jsonl) for the cross-shard check.
            let lock = match config.sharding {
                Some(_) => lock.keeping_sections(),
                None => lock,
            };
            // Without pauses or protection the workload writes no resource at all.
            if w.lock.holder_pause.is_none() && w.lock.protection == Protection::None {
                Arc::new(lock)
            } else {
                Arc::new(lock.with_fencing(FencingOptions {
                    pause: w.lock.holder_pause,
                    protection: w.lock.protection,
                    seed: config.seed,
                })?)
            }
        }
        WorkloadKind::Election => {
            let election = ElectionWorkload::new(
                ElectionOptions {
                    term: ms(w.election.term_ms.unwrap_or(0.0)),
                    crash_leader: w.election.crash_leader,
                    recipe: config.lock_recipe,
                    observers: w.watch.watchers.unwrap_or(0),
                    ttl: config.plan.ttl,
                },
                clock,
            );
            Arc::new(match &config.sharding {
                Some(s) => election.for_part(s.part),
                None => election,
            })
        }
        WorkloadKind::Discovery => Arc::new(DiscoveryWorkload::new(
            DiscoveryOptions {
                watchers: w.watch.watchers.unwrap_or(0),
                sessions: w.watch.watch_sessions.unwrap_or(0),
                crash_instances: w.discovery.crash_instances,
                ttl: config.plan.ttl,
            },
            clock,
        )?),
        WorkloadKind::ConfigWatch => Arc::new(ConfigWatchWorkload::new(
            ConfigWatchOptions {
                watchers: w.watch.watchers.unwrap_or(0),
                sessions: w.watch.watch_sessions.unwrap_or(0),
                value_size: config.value_size,
                // etcd-style watches deliver every version; ZooKeeper's are one-shot.
                every_version: family_of(config.target) != ApiFamily::ZooKeeper,
                ttl: config.plan.ttl,
            },
            clock,
        )?),
        WorkloadKind::Barrier => Arc::new(BarrierWorkload::new(
            BarrierOptions {
                clients: config.plan.clients,
                run_tag: run_tag(),
            },
            clock,
        )?),
        WorkloadKind::Register => Arc::new(RegisterWorkload::new(
            RegisterOptions {
                keys: config.keys,
                consistency: config.read_consistency,
                seed: config.seed,
                check_budget: ms(w.register.check_budget_ms.unwrap_or(60_000) as f64),
                op_timeout: config.plan.op_timeout,
            },
            clock,
        )?),
    })
}

/// A tag unique to this run (process and start time), so that the barriers of earlier runs
/// on an attached cluster are not this run's.
fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}", std::process::id(), nanos % (1 << 40))
}

/// The one-line warning a saturated generator prints. A real-time generator that keeps its
/// cores busy is worse off than a normal one: the kernel stops real-time threads for the rest
/// of each period once they used `kernel.sched_rt_runtime_us` of it (50 ms of every second
/// by default), which showed as a 40 ms p99 at 100,000/s on the null target (RESULTS.md,
/// "Pacing precision beside a CPU hog").
fn saturation_warning(usage: &GeneratorUsage) -> String {
    let advice = if usage.realtime {
        "and, with --realtime, the kernel pauses real-time threads that keep their cores busy (kernel.sched_rt_runtime_us): \
         drop --realtime or lower the rate"
    } else {
        "give it cores of its own (--pin-client, --pin-servers) or fewer clients"
    };
    format!(
        "warning: the load generator was saturated (it used or waited for over {:.0}% of its {} core(s) for {:.1} s of the window): \
         its figures understate the target; {advice}",
        crate::generator::SATURATED_UTIL * 100.0,
        usage.cores,
        usage.saturated_s
    )
}

fn ms(v: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(v / 1000.0)
}

/// Sync latency of the first member's data directory, where the cluster has one.
async fn probe(config: &RunConfig, cluster: &Cluster) -> Option<SyncProbe> {
    let dir = cluster.data_dirs().into_iter().next()?;
    // The engines sync (or skip, or delay) inside their own Disk: probe through the same one.
    let engine = crate::targets::descriptor(config.target).engine.then(|| {
        let delay = config.sync_delay.unwrap_or(config.disk.sync_delay());
        config.disk.engine_kind(delay)
    });
    tokio::task::spawn_blocking(move || match engine {
        Some(kind) => probe_engine_sync_latency(Path::new(&dir), kind, SYNC_PROBE_SAMPLES).ok(),
        None => probe_sync_latency(Path::new(&dir), SYNC_PROBE_SAMPLES).ok(),
    })
    .await
    .ok()
    .flatten()
}
