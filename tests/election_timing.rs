//! `--election-timeout` and `--heartbeat` reach every target's real processes: 3-member
//! clusters of etcd (Debian's etcd-server), ZooKeeper (Debian's zookeeper) and the raft and
//! zab engines (`coordbench serve`) start on 127.0.0.1 with a non-default timing, elect a
//! leader, and run with the settings the mapping promised: etcd's and the engines' command
//! lines, ZooKeeper's zoo.cfg, and the effective timing recorded for run.json.

use std::path::Path;
use std::time::Duration;

use coordbench_lab::election_timing::ElectionTiming;
use coordbench_lab::provision::disk::DiskKind;
use coordbench_lab::provision::etcd::EtcdOptions;
use coordbench_lab::provision::raft::RaftOptions;
use coordbench_lab::provision::zookeeper::ZkOptions;
use coordbench_lab::provision::{etcd, raft, zab, zookeeper, Cluster, ClusterSpec};
use coordbench_results::timeout_range::TimeoutRange;

/// Upper bound for one cluster start (JVMs take seconds).
const START_BOUND: Duration = Duration::from_secs(90);

/// 300-600 ms with a 30 ms heartbeat: none of the targets' defaults.
fn timing() -> ElectionTiming {
    ElectionTiming::new(
        Some(TimeoutRange::parse("300ms-600ms").expect("range")),
        Some(Duration::from_millis(30)),
    )
    .expect("timing")
}

fn spec(work_dir: &Path) -> ClusterSpec {
    ClusterSpec::new(3, DiskKind::Tmpfs, Duration::from_secs(10), work_dir.into())
}

async fn started(
    start: impl std::future::Future<Output = Result<Cluster, coordbench_lab::provision::ProvisionError>>,
) -> Cluster {
    tokio::time::timeout(START_BOUND, start)
        .await
        .unwrap_or_else(|_| panic!("no cluster within {START_BOUND:?}"))
        .expect("cluster starts with the timing")
}

/// Every member's command line, as the kernel has it.
fn command_lines(cluster: &Cluster) -> Vec<String> {
    (0..cluster.member_count())
        .map(|i| {
            let pid = cluster.member_pid(i).expect("member pid");
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .expect("cmdline")
                .split(|b| *b == 0)
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// The effective timing the cluster recorded: (min, max, heartbeat) ms.
fn effective(cluster: &Cluster) -> (u64, u64, u64) {
    let e = cluster
        .info()
        .election_timing
        .clone()
        .expect("effective timing recorded");
    (
        e.election_timeout_min_ms,
        e.election_timeout_max_ms,
        e.heartbeat_ms,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_members_run_with_the_mapped_flags() {
    let work = tempfile::tempdir().expect("tempdir");
    let options = EtcdOptions::default()
        .with_timing(&timing())
        .expect("etcd takes it");
    let mut cluster = started(etcd::start(&spec(work.path()), &options)).await;
    for line in command_lines(&cluster) {
        for flag in ["--heartbeat-interval=30", "--election-timeout=300"] {
            assert!(line.contains(flag), "{flag} in {line}");
        }
    }
    // etcd draws from [T, 2T) in heartbeat ticks: MAX is 2T less one tick.
    assert_eq!(effective(&cluster), (300, 570, 30));
    cluster.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_zoo_cfg_carries_tick_time_and_sync_limit() {
    let work = tempfile::tempdir().expect("tempdir");
    let options = ZkOptions {
        election_timing: timing(),
        ..Default::default()
    };
    let mut cluster = started(zookeeper::start(&spec(work.path()), &options)).await;
    for dir in cluster.data_dirs() {
        let cfg = std::fs::read_to_string(dir.join("zoo.cfg")).expect("zoo.cfg");
        for line in ["tickTime=60\n", "syncLimit=5\n"] {
            assert!(cfg.contains(line), "{line:?} in {cfg}");
        }
    }
    assert_eq!(effective(&cluster), (300, 300, 30));
    cluster.stop();
}

/// Engine members from the coordbench binary cargo built for this test run.
fn engine_options() -> RaftOptions {
    RaftOptions {
        binary: Some(env!("CARGO_BIN_EXE_coordbench").into()),
        ..Default::default()
    }
    .with_timing(&timing())
    .expect("the engines take it")
}

fn assert_engine_ticks(cluster: &Cluster) {
    for line in command_lines(cluster) {
        for flag in [
            "--tick=10ms",
            "--heartbeat-ticks=3",
            "--election-ticks-min=30",
            "--election-ticks-max=61",
        ] {
            assert!(line.contains(flag), "{flag} in {line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_members_run_with_the_mapped_ticks() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut cluster = started(raft::start(&spec(work.path()), &engine_options())).await;
    assert_engine_ticks(&cluster);
    assert_eq!(effective(&cluster), (300, 600, 30));
    cluster.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zab_members_run_with_the_mapped_ticks() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut cluster = started(zab::start(&spec(work.path()), &engine_options())).await;
    assert_engine_ticks(&cluster);
    // zab waits MIN (syncLimit); MAX is its initLimit, noted.
    assert_eq!(effective(&cluster), (300, 300, 30));
    let note = cluster.info().election_timing.clone().and_then(|e| e.note);
    assert!(note.is_some_and(|n| n.contains("initLimit")));
    cluster.stop();
}
