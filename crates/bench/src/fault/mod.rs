//! Faults injected into a cluster coordbench started, while a workload runs (`--fault`),
//! and the failover figures of docs/reference.md around each one (defined in docs/reference.md, "How figures are measured"): when
//! the fault showed, time to detect, time to a new leader, time to the first write, longest
//! gap between acknowledged writes, time until every member is back, and what a
//! partitioned minority's clients were served.
//!
//! The injector waits for the measured window to begin (setup and warm-up run undisturbed),
//! then runs one fault after another ([`Injector::fault`]), each kind in the seeded order of
//! [`kinds`], each starting `--fault-every` after the previous one started and not before
//! the cluster is healthy again. Every fault is undone before the next begins. Probe writes
//! (`probe_writes`) run throughout on sessions of their own; every member is asked who
//! leads every 5 ms in the background (`views`, `leadership`).
//!
//! - `kinds`: the kinds' needs and their seeded order; `action`: what each kind does to the
//!   cluster (victims, partitions) and how it is undone;
//! - `injector`: the per-fault function; `watch`: what the members' answers showed;
//! - `minority`: a partitioned minority's client; `record`: failover.csv and the summaries.

pub mod action;
pub mod injector;
pub mod kinds;
pub mod leadership;
pub mod lost_writes;
pub mod minority;
pub mod probe_writes;
pub mod record;
pub mod views;
pub mod watch;
pub mod workload_gap;

use std::sync::Arc;
use std::time::{Duration, Instant};

use coordbench_drivers::Coordinator;
use tokio_util::sync::CancellationToken;

use coordbench_lab::provision::Cluster;
use coordbench_results::kinds::{FaultArg, TargetKind, ZkClientArg};
pub use injector::{FaultFailure, FaultResult, Injector};
pub use kinds::FaultOrder;
pub use lost_writes::{read_back, LostWrites};
pub use probe_writes::ProbeSessions;
pub use record::{FaultRecord, FaultSummary};

/// Why injection stopped before the run did.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("{0}")]
    Cluster(String),
}

/// Which faults a run injects, how often and for how long.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// The kinds, used in the seeded order of [`FaultOrder`].
    pub kinds: Vec<FaultArg>,
    /// Period between fault starts.
    pub every: Duration,
    /// How long each fault lasts (`--fault-duration`).
    pub duration: Duration,
    /// The run's `--seed`: the order, the victims of random kinds, the timing jitter.
    pub seed: u64,
}

/// The target under test, as the injector reaches it.
#[derive(Clone)]
pub struct FaultTarget {
    pub kind: TargetKind,
    /// ZooKeeper targets: the client library the run uses (also for a minority's client).
    pub zk_client: ZkClientArg,
    /// ZooKeeper targets: the run's credentials, node ACL and chroot.
    pub zk_access: coordbench_drivers::zookeeper::ZkAccess,
    /// etcd API targets: the run's TLS and user (leader detection, a minority's client).
    pub etcd_security: coordbench_drivers::etcd::EtcdSecurity,
    /// The run's coordinator; the probe writes open their sessions on it.
    pub coordinator: Arc<dyn Coordinator>,
    /// The probe writes' session TTL: the run's `--ttl`, so an outage that expires the
    /// clients' sessions expires theirs too.
    pub session_ttl: Duration,
}

/// Bound on reading back every acknowledged probe write at the end.
const READ_BACK_BOUND: Duration = Duration::from_secs(60);

/// What a run's fault injection measured.
#[derive(Debug, Default)]
pub struct Injected {
    pub records: Vec<FaultRecord>,
    /// The read-back of every acknowledged probe write after the last fault healed (`None`
    /// if injection never started).
    pub lost_writes: Option<LostWrites>,
    /// What happened to the probes' sessions (`None` if injection never started).
    pub probe_sessions: Option<ProbeSessions>,
    /// The cluster did not recover within the bound (the records so far stand).
    pub error: Option<FaultError>,
    /// When injection started: every record's `at_s` counts from it.
    pub started: Option<Instant>,
}

/// Injects `plan`'s faults into `cluster` from when `window` fires until `stop`, then reads
/// back every acknowledged probe write, and returns what it measured.
pub async fn inject(
    plan: &FaultPlan,
    target: &FaultTarget,
    cluster: &mut Cluster,
    window: CancellationToken,
    stop: CancellationToken,
) -> Injected {
    tokio::select! {
        _ = window.cancelled() => {}
        _ = stop.cancelled() => return Injected::default(),
    }
    let mut injector = match Injector::start(target, cluster, plan.seed, stop.clone()).await {
        Ok(i) => i,
        Err(e) => {
            return Injected {
                error: Some(e),
                ..Injected::default()
            }
        }
    };
    let started = injector.started();
    let (records, error) = run_faults(&mut injector, plan, &stop).await;
    // Every fault is healed here (or the run stopped and the last one was undone).
    let acknowledged = injector.writes().acknowledged();
    let probe_sessions = injector.writes().sessions();
    injector.finish().await;
    let lost = read_back(target.coordinator.clone(), acknowledged, READ_BACK_BOUND).await;
    Injected {
        records,
        lost_writes: Some(lost),
        probe_sessions: Some(probe_sessions),
        error,
        started: Some(started),
    }
}

/// One fault after another until `stop` or a failure.
async fn run_faults(
    injector: &mut Injector<'_>,
    plan: &FaultPlan,
    stop: &CancellationToken,
) -> (Vec<FaultRecord>, Option<FaultError>) {
    let mut order = FaultOrder::new(&plan.kinds, plan.seed);
    let mut records = Vec::new();
    let mut next_start = Instant::now() + plan.every;
    loop {
        let wait = next_start.saturating_duration_since(Instant::now());
        if injector::sleep_or_stop(wait, stop).await {
            return (records, None);
        }
        let Some(kind) = order.next_kind() else {
            return (records, None);
        };
        match injector.fault(kind, plan.duration).await {
            Ok(Some(record)) => records.push(record),
            Ok(None) => return (records, None),
            Err(FaultFailure { record, error }) => {
                records.extend(record.map(|r| *r));
                return (records, Some(error));
            }
        }
        if let Some(started) = injector.last_fault() {
            next_start = started + plan.every;
        }
    }
}
