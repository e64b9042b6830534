//! Every `--fault` kind on a real 3-member cluster of every target (etcd, ZooKeeper, and the
//! raft and zab engines as processes on 127.0.0.1; tmpfs), one cluster per target, the
//! kinds one after another through the injector's per-fault function: each fault must take
//! effect (its victims stop answering; a partition shows in the members' answers, and a
//! leader cut off from the others loses its leadership to a new one while its own client
//! gets no write acknowledged) and heal (every member answers again under one leader).
//! The members talk through the proxy at zero delay, as `coordbench run` starts them for
//! partitions; on etcd every connection must have been told apart by its dialer. One target
//! at a time: two clusters, their pollers and proxies at once overload a 2-core machine
//! until elections miss their own timeouts.

mod common;

use std::time::Duration;

use common::{assert_gone, raft_options, within, START_BOUND};
use coordbench_bench::fault::{FaultRecord, FaultTarget, Injector};
use coordbench_lab::netdelay::NetDelay;
use coordbench_lab::provision::etcd::{self, EtcdOptions};
use coordbench_lab::provision::zookeeper::{self, ZkOptions};
use coordbench_lab::provision::{raft, zab, Cluster, ClusterSpec, DiskKind};
use coordbench_results::kinds::{FaultArg, TargetKind, ZkClientArg};
use tokio_util::sync::CancellationToken;

/// Kills, pauses and the full restart last this long.
const SHORT: Duration = Duration::from_secs(1);
/// Partitions last long enough for the majority to elect a new leader by its own
/// timeouts, a split vote included: etcd and raft notice after a 1–2 s election timeout and
/// may need a second round; zab after its 1 s syncLimit; ZooKeeper after its 2 s syncLimit
/// at the 2 s TTL used here.
const PARTITION: Duration = Duration::from_secs(6);
/// Held by the test that runs its cluster (see the module doc).
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One fault: a healthy cluster (30 s bound), the fault, recovery (30 s bound).
const FAULT_BOUND: Duration = Duration::from_secs(90);

const KINDS: [(FaultArg, Duration); 7] = [
    (FaultArg::KillLeader, SHORT),
    (FaultArg::KillRandom, SHORT),
    (FaultArg::PauseLeader, SHORT),
    (FaultArg::PauseRandom, SHORT),
    (FaultArg::PartitionLeader, PARTITION),
    (FaultArg::PartitionRandom, PARTITION),
    (FaultArg::RestartAll, SHORT),
];

/// A 3-member cluster whose members talk through the proxy at zero delay.
async fn start(kind: TargetKind, work: &std::path::Path) -> Cluster {
    // ZooKeeper's timing follows the TTL: 2 s gives a 400 ms tick and a 2 s syncLimit.
    let ttl = match kind {
        TargetKind::Zookeeper => Duration::from_secs(2),
        _ => Duration::from_secs(10),
    };
    let mut spec = ClusterSpec::new(3, DiskKind::Tmpfs, ttl, work.to_path_buf());
    spec.net_delay = Some(NetDelay::default());
    let started = match kind {
        TargetKind::Etcd => etcd::start(&spec, &EtcdOptions::default()).await,
        TargetKind::Zookeeper => zookeeper::start(&spec, &ZkOptions::default()).await,
        TargetKind::Raft => raft::start(&spec, &raft_options()).await,
        TargetKind::Zab => zab::start(&spec, &raft_options()).await,
        TargetKind::Null => unreachable!("null has no members"),
        TargetKind::Redis | TargetKind::Postgres => {
            unreachable!("independent servers take only some kinds: tests/redis_target.rs")
        }
    };
    started.unwrap_or_else(|e| panic!("starting {kind:?}: {e}"))
}

async fn every_kind_takes_effect_and_heals(kind: TargetKind) {
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let work = tempfile::tempdir().expect("tempdir");
    let mut cluster = within(
        START_BOUND * 2,
        "starting the cluster",
        start(kind, work.path()),
    )
    .await;
    let coordinator = coordbench_bench::targets::connect(
        kind,
        ZkClientArg::Client,
        &Default::default(),
        &Default::default(),
        cluster.endpoints(),
        2,
        false,
    )
    .await
    .unwrap_or_else(|e| panic!("connecting to {kind:?}: {e:#}"));
    let target = FaultTarget {
        kind,
        zk_client: ZkClientArg::Client,
        zk_access: Default::default(),
        etcd_security: Default::default(),
        coordinator,
        session_ttl: Duration::from_secs(10),
    };
    let mut records = Vec::new();
    {
        let stop = CancellationToken::new();
        let injector = Injector::start(&target, &mut cluster, 7, stop);
        let mut injector = within(START_BOUND, "starting the injector", injector)
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        for (fault, duration) in KINDS {
            let what = format!("{kind:?} {}", fault.name());
            let record = within(FAULT_BOUND, &what, injector.fault(fault, duration))
                .await
                .unwrap_or_else(|f| panic!("{what}: {} ({:?})", f.error, f.record))
                .unwrap_or_else(|| panic!("{what}: stopped before it began"));
            eprintln!("{what}: {record:?}");
            took_effect_and_healed(kind, &what, &record);
            records.push(record);
        }
        within(
            Duration::from_secs(10),
            "ending the injector",
            injector.finish(),
        )
        .await;
    }
    let proxy = cluster.proxy().expect("members behind the proxy");
    assert!(proxy.cut_links().is_empty(), "{kind:?}: links left cut");
    assert_eq!(
        proxy.unattributed(),
        0,
        "{kind:?}: member connections the proxy could not attribute to their dialer"
    );
    drop(target);
    if let Err(e) = cluster.check_alive() {
        panic!("{kind:?}: a member died on its own: {e}");
    }
    let pids: Vec<u32> = (0..3).filter_map(|i| cluster.member_pid(i)).collect();
    cluster.stop();
    assert_gone(&pids);
}

/// The checks every kind shares, then each kind's own.
fn took_effect_and_healed(kind: TargetKind, what: &str, r: &FaultRecord) {
    assert!(!r.cut_short, "{what}: cut short: {r:?}");
    let effect = r
        .effect_us
        .unwrap_or_else(|| panic!("{what}: never took effect: {r:?}"));
    let healed = r.healed_us.expect("undone");
    let rejoined = r
        .rejoined_us
        .unwrap_or_else(|| panic!("{what}: never healed: {r:?}"));
    assert!(
        effect <= healed && healed <= rejoined,
        "{what}: out of order: {r:?}"
    );
    match r.fault {
        FaultArg::KillLeader => {
            let new = r.new_leader.as_deref().expect("a new leader");
            assert_ne!(
                new, r.old_leader,
                "{what}: the killed leader leads again: {r:?}"
            );
            assert!(r.new_term > Some(r.old_term), "{what}: {r:?}");
            assert!(r.detect_us <= r.new_leader_us, "{what}: {r:?}");
            assert!(
                r.first_write_us.is_some(),
                "{what}: writes did not resume: {r:?}"
            );
        }
        FaultArg::PartitionLeader => {
            // Cut off, the leader lost its quorum: another one led before the heal.
            let elected = r
                .new_leader_us
                .unwrap_or_else(|| panic!("{what}: no new leader: {r:?}"));
            assert!(
                elected < healed,
                "{what}: a new leader only after the heal: {r:?}"
            );
            assert_ne!(
                r.new_leader.as_deref(),
                Some(r.old_leader.as_str()),
                "{what}: {r:?}"
            );
            minority_acknowledged_nothing(what, r);
        }
        FaultArg::PartitionRandom => minority_acknowledged_nothing(what, r),
        FaultArg::RestartAll => {
            assert_eq!(
                r.victims.split('+').count(),
                3,
                "{what}: not every member: {r:?}"
            );
            let back = r
                .new_leader_us
                .unwrap_or_else(|| panic!("{what}: no leader after the restart: {r:?}"));
            // The probes' puts need no session on the etcd API; a ZooKeeper-protocol session
            // outlives an outage only up to its timeout (ZooKeeper: 8 s, 20 ticks of the
            // 2 s TTL's 400 ms; zab: the probes' 10 s), after which that probe writes no more.
            let session_timeout = match kind {
                TargetKind::Zookeeper => Some(8_000_000),
                TargetKind::Zab => Some(10_000_000),
                _ => None,
            };
            let sessions_survive = session_timeout.is_none_or(|timeout| back < timeout);
            assert!(
                r.first_write_us.is_some() || !sessions_survive,
                "{what}: writes did not resume: {r:?}"
            );
        }
        FaultArg::KillRandom | FaultArg::PauseLeader | FaultArg::PauseRandom => {}
    }
}

/// The minority member's own client was served local reads (so it was connected and
/// working) and got no write acknowledged.
fn minority_acknowledged_nothing(what: &str, r: &FaultRecord) {
    assert_eq!(
        r.minority_acked_writes,
        Some(0),
        "{what}: a minority acknowledged writes: {r:?}"
    );
    assert!(
        r.minority_local_reads > Some(0),
        "{what}: the minority's client was not served: {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_takes_effect_and_heals_on_raft() {
    every_kind_takes_effect_and_heals(TargetKind::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_takes_effect_and_heals_on_zab() {
    every_kind_takes_effect_and_heals(TargetKind::Zab).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_takes_effect_and_heals_on_etcd() {
    every_kind_takes_effect_and_heals(TargetKind::Etcd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_takes_effect_and_heals_on_zookeeper() {
    every_kind_takes_effect_and_heals(TargetKind::Zookeeper).await;
}
