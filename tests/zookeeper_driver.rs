//! The ZooKeeper driver against real ZooKeeper (Debian's zookeeper package), standalone and
//! as a 3-server ensemble on tmpfs: kv reads and writes, both lock recipes through the
//! runner, expiry of an abandoned holder's session, the herd effect, and a CLI run.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_gone, closed_plan, open_session, run_plan, within, Percentiles, CONNECT_TIMEOUT, LONG_TTL};
use coordbench::provision::zookeeper::{self, Timing, ZkOptions};
use coordbench::provision::{Cluster, ClusterSpec, DiskKind};
use coordbench_drivers::zookeeper::{ZkConfig, ZkCoordinator};
use coordbench_drivers::{Consistency, Coordinator, LockRecipe, Session};
use coordbench_workloads::kv::{KvOp, KvOptions, KvWorkload};
use coordbench_workloads::lock::{LockOptions, LockWorkload};
use coordbench_workloads::RunClock;
use tempfile::TempDir;
use tokio::sync::{mpsc, oneshot};

/// Upper bound for starting an ensemble (JVMs start in seconds).
const START_BOUND: Duration = Duration::from_secs(70);
const RECIPES: [LockRecipe; 2] = [LockRecipe::HerdFree, LockRecipe::Naive];

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
        let spec = ClusterSpec { size, disk: DiskKind::Tmpfs, ttl, base_port: None, work_dir };
        let cluster = within(START_BOUND, "starting ZooKeeper", zookeeper::start(&spec, &ZkOptions::default()))
            .await
            .unwrap_or_else(|e| panic!("starting {size} ZooKeeper servers: {e}"));
        let coordinator = connect(cluster.endpoints()).await;
        Zk { coordinator, cluster, _work: work }
    }

    /// Stops the servers and checks that none died during the test and no JVM is left.
    fn stop(self) {
        let Zk { coordinator, mut cluster, _work } = self;
        drop(coordinator);
        if let Err(e) = cluster.check_alive() {
            panic!("a ZooKeeper server died during the test: {e}\n{}", e.log_tail().unwrap_or(""));
        }
        let pids: Vec<u32> = (0..cluster.member_count()).filter_map(|i| cluster.member_pid(i)).collect();
        cluster.stop();
        assert_gone(&pids);
    }
}

async fn connect(endpoints: Vec<String>) -> Arc<dyn Coordinator> {
    let config = ZkConfig { endpoints, connect_timeout: CONNECT_TIMEOUT };
    let c = within(Duration::from_secs(10), "connecting", ZkCoordinator::connect(&config))
        .await
        .unwrap_or_else(|e| panic!("connecting to ZooKeeper: {e}"));
    Arc::new(c)
}

/// Writes through the first server, reads through the last: a linearizable read sees the
/// write, and so does a later serializable read on the same session; a missing key is None.
async fn kv_round_trip(zk: &Zk) {
    let endpoints = zk.cluster.endpoints();
    let first = connect(endpoints[..1].to_vec()).await;
    let last = connect(endpoints[endpoints.len() - 1..].to_vec()).await;
    let mut w = open_session(first.as_ref(), 0, LONG_TTL).await;
    let mut r = open_session(last.as_ref(), 1, LONG_TTL).await;
    let key = "/coordbench/kv/round-trip";
    w.put(key, b"v1").await.expect("first put creates the znode");
    w.put(key, b"v2").await.expect("second put sets its data");
    assert_eq!(r.get(key, Consistency::Linearizable).await.expect("linearizable get").as_deref(), Some(&b"v2"[..]));
    assert_eq!(r.get(key, Consistency::Serializable).await.expect("serializable get").as_deref(), Some(&b"v2"[..]));
    for c in [Consistency::Linearizable, Consistency::Serializable] {
        assert_eq!(r.get("/coordbench/kv/missing", c).await.expect("get of a missing key"), None);
    }
    assert!(w.counters().requests >= 3 && r.counters().requests >= 6, "{:?} {:?}", w.counters(), r.counters());
    w.close().await.expect("close writer");
    r.close().await.expect("close reader");
}

/// The lock workload through the runner, 8 clients on one lock, each recipe: sections,
/// no overlap, increasing fencing tokens, no errors.
async fn lock_workload_is_safe(zk: &Zk) {
    for recipe in RECIPES {
        let clock = RunClock::start();
        let options = LockOptions { locks: 1, hold: Duration::ZERO, recipe };
        let workload = Arc::new(LockWorkload::new(options, clock).expect("lock workload"));
        let plan = closed_plan(8, Duration::from_millis(300), Duration::from_secs(2));
        let outcome = run_plan(&plan, zk.coordinator.clone(), workload.clone(), clock).await;
        let check = outcome.check.lock.as_ref().expect("a lock check");
        assert!(check.sections > 0 && outcome.total.ops > 0, "{recipe:?}: no acquisition");
        assert_eq!((check.violations, check.token_regressions), (0, 0), "{recipe:?}");
        assert_eq!(outcome.total.errors_total(), 0, "{recipe:?}: errors {:?}", outcome.total.errors);
        Percentiles::of(&outcome.total.latency).assert_ordered();
        let clients: std::collections::BTreeSet<usize> = workload.sections().iter().map(|s| s.client).collect();
        assert!(clients.len() > 1, "{recipe:?}: only clients {clients:?} held the lock");
        eprintln!(
            "{recipe:?}: {} acquisitions in {:?}, {:.1} requests/op",
            outcome.total.ops,
            outcome.window,
            outcome.counters.requests as f64 / outcome.total.ops as f64
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_kv_and_both_lock_recipes() {
    let zk = Zk::start(1, LONG_TTL).await;
    kv_round_trip(&zk).await;
    lock_workload_is_safe(&zk).await;
    zk.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_kv_reads_and_both_lock_recipes() {
    let zk = Zk::start(3, LONG_TTL).await;
    kv_round_trip(&zk).await;
    // kv-get through the runner: setup writes the keys, clients read them linearizably.
    let workload = Arc::new(
        KvWorkload::new(KvOptions { op: KvOp::Get(Consistency::Linearizable), keys: 50, value_size: 64, seed: 1 })
            .expect("kv workload"),
    );
    let plan = closed_plan(4, Duration::ZERO, Duration::from_secs(1));
    let outcome = run_plan(&plan, zk.coordinator.clone(), workload, RunClock::start()).await;
    assert!(outcome.total.ops > 0 && outcome.total.errors_total() == 0, "{:?}", outcome.total.errors);
    lock_workload_is_safe(&zk).await;
    zk.stop();
}

/// A holds the lock and abandons its session; B, already waiting, gets the lock when the
/// server expires A's session: not at once (more than a third of the TTL: a closed session
/// would release at once), and within TTL + one tick + 1 s. Both recipes concurrently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_holder_hands_over_when_its_session_expires() {
    let ttl = Duration::from_secs(2);
    let zk = Zk::start(1, ttl).await;
    let tick = Duration::from_millis(Timing::for_ttl(ttl).tick_ms);
    let [a, b] = RECIPES.map(|recipe| expiry_handover(zk.coordinator.clone(), recipe, ttl));
    let (da, db) = tokio::join!(a, b);
    eprintln!("handover after abandon (TTL {ttl:?}, tick {tick:?}): zk-recipe {da:?}, naive {db:?}");
    for waited in [da, db] {
        assert!(waited > ttl / 3, "the lock was freed {waited:?} after the abandon: not by expiry");
        assert!(waited <= ttl + tick + Duration::from_secs(1), "the lock was freed only {waited:?} after the abandon");
    }
    zk.stop();
}

async fn expiry_handover(c: Arc<dyn Coordinator>, recipe: LockRecipe, ttl: Duration) -> Duration {
    let name = format!("expiry-{recipe:?}");
    let mut a = open_session(c.as_ref(), 0, ttl).await;
    let mut b = open_session(c.as_ref(), 1, ttl).await;
    let ga = within(Duration::from_secs(5), "A's lock", a.lock(&name, recipe)).await.expect("A locks");
    let b_name = name.clone();
    let waiter = tokio::spawn(async move {
        let r = b.lock(&b_name, recipe).await;
        (b, r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "{recipe:?}: B acquired while A holds");

    a.abandon();
    let abandoned = Instant::now();
    let (mut b, gb, acquired) = within(ttl * 3, "B's lock after A's expiry", waiter).await.expect("B's task");
    let gb = gb.unwrap_or_else(|e| panic!("{recipe:?}: B's lock failed: {e}"));
    assert!(gb.token > ga.token, "{recipe:?}: token {} after {}", gb.token, ga.token);
    let late = a.unlock(ga).await.expect_err("A's release after abandoning");
    assert_eq!(late.kind(), "session_expired", "{recipe:?}: {late}");
    b.unlock(gb).await.expect("B unlocks");
    b.close().await.expect("close B");
    acquired.duration_since(abandoned)
}

/// 16 waiters queue behind a holder; its release notifies exactly one waiter under
/// zk-recipe and every waiter under naive (the herd).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_release_wakes_one_waiter_or_the_whole_herd() {
    let zk = Zk::start(1, LONG_TTL).await;
    for recipe in RECIPES {
        let notified = herd(zk.coordinator.clone(), recipe).await;
        eprintln!("{recipe:?}: notifications per waiter after one release: {notified:?}");
        let total: u64 = notified.iter().sum();
        match recipe {
            LockRecipe::HerdFree => assert_eq!(total, 1, "zk-recipe woke {notified:?}"),
            LockRecipe::Naive => {
                assert!(notified.iter().all(|&n| n >= 1), "naive left a waiter asleep: {notified:?}");
                assert!(total <= 2 * WAITERS as u64, "naive: {notified:?}");
            }
        }
    }
    zk.stop();
}

const WAITERS: usize = 16;

/// Notifications each waiter received from one release (waiter order).
async fn herd(c: Arc<dyn Coordinator>, recipe: LockRecipe) -> Vec<u64> {
    let name = format!("herd-{recipe:?}");
    let mut holder = open_session(c.as_ref(), 100, LONG_TTL).await;
    let held = within(Duration::from_secs(5), "holder's lock", holder.lock(&name, recipe)).await.expect("holder locks");
    let (acquired_tx, mut acquired_rx) = mpsc::unbounded_channel::<usize>();
    let mut waiters = Vec::new();
    for w in 0..WAITERS {
        let mut s = open_session(c.as_ref(), w, LONG_TTL).await;
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let (acquired_tx, name) = (acquired_tx.clone(), name.clone());
        let task = tokio::spawn(async move {
            // Wait until told to stop; the next holder keeps the lock, so nothing cascades.
            let guard = tokio::select! {
                r = s.lock(&name, recipe) => Some(r.expect("waiter's lock")),
                _ = &mut stop_rx => None,
            };
            if guard.is_some() {
                let _ = acquired_tx.send(w);
                let _ = stop_rx.await;
            }
            (s, guard)
        });
        waiters.push((stop_tx, task));
    }
    // Every waiter has queued and is only waiting now.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(acquired_rx.try_recv().is_err(), "{recipe:?}: a waiter acquired while the holder holds");
    let counters_before = holder.counters();
    holder.unlock(held).await.expect("holder unlocks");
    within(Duration::from_secs(5), "the next grant", acquired_rx.recv()).await.expect("a waiter acquires");
    // Let every notification the release caused arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(acquired_rx.try_recv().is_err(), "{recipe:?}: two waiters hold the lock");
    assert_eq!(holder.counters().notifications, counters_before.notifications);

    let mut ended: Vec<(Box<dyn Session>, Option<coordbench_drivers::LockGuard>)> = Vec::new();
    for (stop, task) in waiters {
        let _ = stop.send(());
        ended.push(within(Duration::from_secs(5), "a waiter's end", task).await.expect("waiter task"));
    }
    // Waiters received nothing before the release: every count is the release's doing.
    let notified = ended.iter().map(|(s, _)| s.counters().notifications).collect();
    for (mut s, guard) in ended {
        if let Some(g) = guard {
            s.unlock(g).await.expect("next holder unlocks");
        }
        s.close().await.expect("close waiter");
    }
    holder.close().await.expect("close holder");
    notified
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_is_one_line() {
    let port = common::closed_port();
    let config = ZkConfig { endpoints: vec![format!("127.0.0.1:{port}")], connect_timeout: Duration::from_secs(2) };
    let err = within(Duration::from_secs(5), "connect", ZkCoordinator::connect(&config))
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
        .args(["run", "--target", "zookeeper", "--cluster-size", "3", "--workload", "lock", "--clients", "16"])
        .args(["--duration", "5s", "--disk", "tmpfs", "--quiet", "--out"])
        .arg(out.path())
        .output()
        .expect("run coordbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "coordbench exited with {}: {stderr}", run.status);
    assert!(t.elapsed() < Duration::from_secs(60), "the run took {:?}", t.elapsed());
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("run.json")).expect("run.json")).expect("json");
    assert_eq!(run["complete"], true);
    assert_eq!(run["config"]["recipe"], "zk-recipe");
    assert_eq!(run["results"]["violations"], 0, "{}", run["results"]);
    assert!(run["results"]["ops"].as_u64().is_some_and(|n| n > 0), "{}", run["results"]);
    // mntr was scraped from every server before and after: the lock traffic shows there.
    let delta = run["server_counters"]["delta"].as_object().expect("server counters");
    assert_eq!(delta.len(), 3, "one entry per server: {delta:?}");
    let received: f64 = delta.values().filter_map(|m| m["zk_packets_received"].as_f64()).sum();
    assert!(received > run["results"]["ops"].as_f64().unwrap_or(0.0), "packets received {received}");
    let summary = std::fs::read_to_string(out.path().join("summary.csv")).expect("summary.csv");
    assert!(summary.lines().nth(1).is_some_and(|row| row.starts_with("zookeeper,lock,zk-recipe,3,16,16,")), "{summary}");
    assert!(out.path().join("logs/zk-3.log").exists());
}
