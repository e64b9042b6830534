//! The ZooKeeper driver against real ZooKeeper (Debian's zookeeper package), standalone and
//! as a 3-server ensemble on tmpfs: kv reads and writes, both lock recipes through the
//! runner, elections, discovery and value watches (tests/common/recipes.rs), expiry of an
//! abandoned session's lock and registration, the herd effect of locks and elections, and a
//! CLI run.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::recipes::discovery_follows_registrations;
use common::zk_conformance::{
    abandoned_holder_hands_over, election_herd, elections_and_value_watches,
    kv_get_through_the_runner, kv_round_trip, lock_workload_is_safe, release_wakes_one_or_the_herd,
};
use common::{assert_gone, within, zk_conformance, LONG_TTL};
use coordbench_drivers::zookeeper::{ZkConfig, ZkCoordinator};
use coordbench_drivers::Coordinator;
use coordbench_lab::provision::zookeeper::{self, Timing, ZkOptions};
use coordbench_lab::provision::{Cluster, ClusterSpec, DiskKind};
use tempfile::TempDir;

/// Upper bound for starting an ensemble (JVMs start in seconds).
const START_BOUND: Duration = Duration::from_secs(70);

/// A started ZooKeeper and a driver connected to all of it. Field order is drop order.
struct Zk {
    coordinator: Arc<dyn Coordinator>,
    cluster: Cluster,
    _work: TempDir,
}

impl Zk {
    /// Starts `size` servers on tmpfs whose timing follows `ttl`, and connects.
    async fn start(size: usize, ttl: Duration) -> Zk {
        let work = tempfile::tempdir().expect("tempdir");
        let work_dir = work.path().to_path_buf();
        let spec = ClusterSpec {
            size,
            disk: DiskKind::Tmpfs,
            ttl,
            base_port: None,
            work_dir,
            sync_delay: None,
            net_delay: None,
            net_delay_clients: false,
            snapshot_every: None,
            auto_compaction: None,
        };
        let cluster = within(
            START_BOUND,
            "starting ZooKeeper",
            zookeeper::start(&spec, &ZkOptions::default()),
        )
        .await
        .unwrap_or_else(|e| panic!("starting {size} ZooKeeper servers: {e}"));
        let coordinator = connect(cluster.endpoints()).await;
        Zk {
            coordinator,
            cluster,
            _work: work,
        }
    }

    /// Stops the servers and checks that none died during the test and no JVM is left.
    fn stop(self) {
        let Zk {
            coordinator,
            mut cluster,
            _work,
        } = self;
        drop(coordinator);
        if let Err(e) = cluster.check_alive() {
            panic!(
                "a ZooKeeper server died during the test: {e}\n{}",
                e.log_tail().unwrap_or("")
            );
        }
        let pids: Vec<u32> = (0..cluster.member_count())
            .filter_map(|i| cluster.member_pid(i))
            .collect();
        cluster.stop();
        assert_gone(&pids);
    }
}

async fn connect(endpoints: Vec<String>) -> Arc<dyn Coordinator> {
    zk_conformance::connect_zk(endpoints).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_kv_and_both_lock_recipes() {
    let zk = Zk::start(1, LONG_TTL).await;
    kv_round_trip(&zk.cluster.endpoints()).await;
    lock_workload_is_safe(zk.coordinator.clone()).await;
    zk.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_kv_reads_locks_elections_and_value_watches() {
    let zk = Zk::start(3, LONG_TTL).await;
    kv_round_trip(&zk.cluster.endpoints()).await;
    kv_get_through_the_runner(zk.coordinator.clone()).await;
    lock_workload_is_safe(zk.coordinator.clone()).await;
    elections_and_value_watches(zk.coordinator.clone()).await;
    zk.stop();
}

/// A holds the lock and abandons its session; B, already waiting, gets the lock when the
/// server expires A's session: not at once (more than a third of the TTL: a closed session
/// would release at once), and within TTL + one tick + 1 s. Both recipes concurrently, and
/// meanwhile an abandoned session's service registration vanishes on the same terms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_sessions_release_locks_and_registrations_on_expiry() {
    let ttl = Duration::from_secs(2);
    let zk = Zk::start(1, ttl).await;
    let tick = Duration::from_millis(Timing::for_ttl(ttl).tick_ms);
    let slack = tick + Duration::from_secs(1);
    tokio::join!(
        abandoned_holder_hands_over(zk.coordinator.clone(), ttl, slack),
        discovery_follows_registrations(zk.coordinator.clone(), ttl, slack),
    );
    zk.stop();
}

/// 16 waiters queue behind a holder; its release notifies exactly one waiter under
/// zk-recipe and every waiter under naive (the herd). Likewise one resignation and the
/// candidates queued behind the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_release_wakes_one_waiter_or_the_whole_herd() {
    let zk = Zk::start(1, LONG_TTL).await;
    release_wakes_one_or_the_herd(zk.coordinator.clone()).await;
    election_herd(zk.coordinator.clone()).await;
    zk.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_is_one_line() {
    let port = common::closed_port();
    let config = ZkConfig {
        endpoints: vec![format!("127.0.0.1:{port}")],
        connect_timeout: Duration::from_secs(2),
        access: Default::default(),
    };
    let err = within(
        Duration::from_secs(5),
        "connect",
        ZkCoordinator::connect(&config),
    )
    .await
    .err()
    .expect("nothing listens there");
    assert_eq!(err.kind(), "unreachable", "{err}");
    assert!(!err.to_string().contains('\n'), "{err}");
}

#[test]
fn cli_lock_run_on_a_three_server_ensemble() {
    let out = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args([
            "run",
            "--target",
            "zookeeper",
            "--cluster-size",
            "3",
            "--workload",
            "lock",
            "--clients",
            "16",
        ])
        .args(["--duration", "5s", "--disk", "tmpfs", "--quiet", "--out"])
        .arg(out.path())
        .output()
        .expect("run coordbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "coordbench exited with {}: {stderr}",
        run.status
    );
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "the run took {:?}",
        t.elapsed()
    );
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("run.json")).expect("run.json"),
    )
    .expect("json");
    assert_eq!(run["complete"], true);
    assert_eq!(run["config"]["recipe"], "zk-recipe");
    assert_eq!(run["results"]["violations"], 0, "{}", run["results"]);
    assert!(
        run["results"]["ops"].as_u64().is_some_and(|n| n > 0),
        "{}",
        run["results"]
    );
    // mntr was scraped from every server before and after: the lock traffic shows there.
    let delta = run["server_counters"]["delta"]
        .as_object()
        .expect("server counters");
    assert_eq!(delta.len(), 3, "one entry per server: {delta:?}");
    let received: f64 = delta
        .values()
        .filter_map(|m| m["zk_packets_received"].as_f64())
        .sum();
    assert!(
        received > run["results"]["ops"].as_f64().unwrap_or(0.0),
        "packets received {received}"
    );
    let summary = std::fs::read_to_string(out.path().join("summary.csv")).expect("summary.csv");
    assert!(
        summary
            .lines()
            .nth(1)
            .is_some_and(|row| row.starts_with("zookeeper,lock,zk-recipe,3,16,16,")),
        "{summary}"
    );
    assert!(out.path().join("logs/zk-3.log").exists());
}
