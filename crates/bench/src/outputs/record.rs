//! `run.json`: the self-describing record of one run.

use std::collections::BTreeMap;

use coordbench_workloads::barrier::BarrierCheck;
use coordbench_workloads::checker::LockCheckSummary;
use coordbench_workloads::election::ElectionSummary;
use coordbench_workloads::fencing::FencingCheck;
use coordbench_workloads::herd::HerdSummary;
use coordbench_workloads::propagation::PropagationSummary;
use coordbench_workloads::register::RegisterCheck;
use coordbench_workloads::versions::VersionSummary;
use coordbench_workloads::OpClass;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::generator::GeneratorUsage;
use crate::runner::{EndReason, Opening, RunOutcome, TIMEOUT};
use crate::server_stats::ServerCounters;
use coordbench_lab::environment::Environment;
use coordbench_lab::provision::disk::SyncProbe;
use coordbench_lab::provision::ClusterInfo;
use coordbench_lab::resources::ResourceSummary;
use coordbench_results::record::RecordHeader;

#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// Schema, whether the measured window ran to its planned end (or operation budget)
    /// without an interruption or a failure, why it ended, and when.
    #[serde(flatten)]
    pub header: RecordHeader,
    pub config: crate::config::record::ConfigRecord,
    pub environment: Environment,
    pub server_version: Option<String>,
    pub cluster: Option<ClusterInfo>,
    /// Measured sync latency of the data directory (provisioned clusters only).
    pub sync_probe: Option<SyncProbe>,
    /// Server processes' peak RSS and CPU time in the window (provisioned clusters only;
    /// per-second samples in resources.csv).
    pub resources: Option<ResourceSummary>,
    /// The load generator's own CPU and memory in the window (this process).
    pub generator: Option<GeneratorUsage>,
    /// Whether the generator was saturated (see `generator`): its figures then understate
    /// the target.
    pub generator_saturated: Option<bool>,
    /// Server-side counters around the run, where the target exposes them.
    pub server_counters: Option<ServerCounters>,
    /// raft, zab with `--engine-cost`: the engine binary's instructions per committed write
    /// on the seeded simulated workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_cost: Option<crate::engine_cost::EngineCost>,
    /// Failover figures over the faults injected (`--fault`; one row each in failover.csv).
    pub faults: Option<crate::fault::FaultSummary>,
    pub results: Option<MeasuredResults>,
    /// A shard of a sharded run (`--shard`): its part, run id and clock anchors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::ShardRecord>,
    /// A merged run (`coordbench merge`): its shards, their start skew and the clock
    /// uncertainty the cross-shard checks allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<crate::shard::MergeRecord>,
}

/// Percentiles of one latency histogram, in microseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: Option<f64>,
    pub p50_us: Option<u64>,
    pub p90_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub p999_us: Option<u64>,
    pub max_us: Option<u64>,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            mean_us: Some(h.mean()),
            p50_us: Some(h.value_at_quantile(0.5)),
            p90_us: Some(h.value_at_quantile(0.9)),
            p99_us: Some(h.value_at_quantile(0.99)),
            p999_us: Some(h.value_at_quantile(0.999)),
            max_us: Some(h.max()),
        }
    }
}

/// What the measured window showed.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredResults {
    pub window_s: f64,
    /// Successful operations completed in the window.
    pub ops: u64,
    /// `ops / window_s`.
    pub throughput_ops_s: f64,
    /// From intended start (open loop) or call (closed loop) to completion.
    pub latency: LatencySummary,
    /// From actual send to completion.
    pub service_time: LatencySummary,
    /// Open loop: from intended start to actual send (the generator's own delay, plus the
    /// wait for a client the server kept busy). `None` in closed loop.
    pub schedule_lag: Option<LatencySummary>,
    /// Open loop: intended starts in the window never sent before it ended.
    pub schedule_dropped: Option<u64>,
    pub errors: u64,
    /// Of `errors`, the operations that hit the operation timeout (`errors_by_kind.timeout`):
    /// they are in the latency histogram at the timeout, not as latencies measured.
    pub timeouts: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Safety violations found by the workload's checker.
    pub violations: u64,
    pub lock: Option<LockCheckSummary>,
    /// lock, election: waiters, notifications and requests per release (docs/reference.md).
    pub herd: Option<HerdSummary>,
    /// election: split brains, handovers, observers' notification latency.
    pub election: Option<ElectionSummary>,
    /// discovery: registration and propagation latency, crashed instances.
    pub discovery: Option<PropagationSummary>,
    /// discovery: requests of instances and watchers in the window per change in it.
    pub requests_per_change: Option<f64>,
    /// config-watch: notification latency, missed and coalesced versions.
    pub config_watch: Option<VersionSummary>,
    /// register: the linearizability verdict and the excerpt that proves a violation.
    pub register: Option<RegisterCheck>,
    /// lock with `--holder-pause` or `--protect`: paused and unsafe sections, stale writes
    /// by outcome, lost locks.
    pub holder_pauses: Option<FencingCheck>,
    /// barrier: barriers every client passed, passes, early exits (also in `violations`).
    pub barrier: Option<BarrierCheck>,
    /// Requests sent, notifications received, keep-alives: all clients, whole run.
    pub requests: u64,
    pub notifications: u64,
    pub keepalives: u64,
    /// Sessions the client library silently replaced after they expired (zookeeper-async):
    /// each may have taken a held lock with it without the holder knowing.
    pub session_reestablishments: u64,
    /// kv-mixed: the reads alone (each is also in the combined figures above).
    pub reads: Option<ClassSummary>,
    /// kv-mixed: the writes alone.
    pub writes: Option<ClassSummary>,
    /// Opening the clients' sessions before warm-up (absent in a merge of shards).
    pub session_opening: Option<SessionOpening>,
}

/// How opening the clients' sessions went (`--session-opens`).
#[derive(Debug, Clone, Serialize)]
pub struct SessionOpening {
    /// Sessions opened: this process's clients.
    pub sessions: usize,
    /// At most this many opening at once (`--session-opens`).
    pub at_once: usize,
    /// From the first open to the last session open.
    pub open_s: f64,
    /// The longest single open, ms.
    pub slowest_open_ms: f64,
}

impl SessionOpening {
    fn of(opening: &Opening) -> Option<Self> {
        (opening.sessions > 0).then_some(SessionOpening {
            sessions: opening.sessions,
            at_once: opening.at_once,
            open_s: opening.took.as_secs_f64(),
            slowest_open_ms: opening.slowest.as_secs_f64() * 1000.0,
        })
    }
}

/// One kind of operation of a run that mixes kinds (kv-mixed's reads or writes).
#[derive(Debug, Clone, Serialize)]
pub struct ClassSummary {
    /// Successful operations of this kind in the window.
    pub ops: u64,
    /// Failed operations of this kind (timeouts included).
    pub errors: u64,
    pub throughput_ops_s: f64,
    /// As the combined latency: timeouts enter at the timeout.
    pub latency: LatencySummary,
}

impl ClassSummary {
    fn of(outcome: &RunOutcome, class: OpClass, window_s: f64) -> Option<Self> {
        let stats = outcome.total.classes.as_ref()?.of(class);
        Some(ClassSummary {
            ops: stats.ops,
            errors: stats.errors,
            throughput_ops_s: if window_s > 0.0 {
                stats.ops as f64 / window_s
            } else {
                0.0
            },
            latency: LatencySummary::of(&stats.latency),
        })
    }
}

impl MeasuredResults {
    pub fn of(outcome: &RunOutcome) -> Self {
        let window_s = outcome.window.as_secs_f64();
        let ops = outcome.total.ops;
        MeasuredResults {
            window_s,
            ops,
            throughput_ops_s: if window_s > 0.0 {
                ops as f64 / window_s
            } else {
                0.0
            },
            latency: LatencySummary::of(&outcome.total.latency),
            service_time: LatencySummary::of(&outcome.total.service),
            schedule_lag: outcome
                .schedule_dropped
                .map(|_| LatencySummary::of(&outcome.total.schedule_lag)),
            schedule_dropped: outcome.schedule_dropped,
            errors: outcome.total.errors_total(),
            timeouts: outcome.total.errors.get(TIMEOUT).copied().unwrap_or(0),
            errors_by_kind: outcome
                .total
                .errors
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            violations: outcome.check.violations(),
            lock: outcome.check.lock.as_ref().map(|l| l.summary()),
            herd: outcome.check.herd.clone(),
            election: outcome.check.election.as_ref().map(|e| e.summary()),
            discovery: outcome.check.discovery.as_ref().map(|d| d.summary()),
            requests_per_change: outcome
                .check
                .discovery
                .as_ref()
                .filter(|d| d.changes > 0)
                .map(|d| outcome.counters.requests as f64 / d.changes as f64),
            config_watch: outcome
                .check
                .config_watch
                .as_ref()
                .map(|c| c.summary(window_s)),
            register: outcome.check.register.clone(),
            holder_pauses: outcome.check.fencing.clone(),
            barrier: outcome.check.barrier.clone(),
            requests: outcome.counters.requests,
            notifications: outcome.counters.notifications,
            keepalives: outcome.counters.keepalives,
            session_reestablishments: outcome.counters.session_reestablishments,
            reads: ClassSummary::of(outcome, OpClass::Read, window_s),
            writes: ClassSummary::of(outcome, OpClass::Write, window_s),
            session_opening: SessionOpening::of(&outcome.opening),
        }
    }
}

/// How the window ended, as the record says it.
impl From<EndReason> for coordbench_results::record::EndReason {
    fn from(reason: EndReason) -> Self {
        match reason {
            EndReason::Completed => Self::Completed,
            EndReason::OpsReached => Self::OpsReached,
            EndReason::Interrupted => Self::Interrupted,
        }
    }
}
