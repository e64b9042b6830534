//! The zookeeper-async driver (`--zk-client async`) against real ZooKeeper (Debian's
//! zookeeper package) on tmpfs: kv reads and writes, both lock recipes through the runner,
//! what silent session re-establishment does to a lock holder (side by side with
//! zookeeper-client), and CLI runs.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    assert_gone, closed_plan, open_session, run_plan, within, Percentiles, CONNECT_TIMEOUT,
    LONG_TTL,
};
use coordbench_drivers::zookeeper::{ZkConfig, ZkCoordinator};
use coordbench_drivers::zookeeper_async::AsyncZkCoordinator;
use coordbench_drivers::{Consistency, Coordinator, LockRecipe};
use coordbench_lab::provision::zookeeper::{self, ZkOptions};
use coordbench_lab::provision::{Cluster, ClusterSpec, DiskKind};
use coordbench_workloads::lock::{LockOptions, LockWorkload};
use coordbench_workloads::RunClock;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// Upper bound for starting a server (JVMs start in seconds).
const START_BOUND: Duration = Duration::from_secs(70);
const RECIPES: [LockRecipe; 2] = [LockRecipe::HerdFree, LockRecipe::Naive];

/// One started ZooKeeper server on tmpfs whose timing follows `ttl`. Field order is drop order.
struct Server {
    cluster: Cluster,
    _work: TempDir,
}

impl Server {
    async fn start(ttl: Duration) -> Server {
        let work = tempfile::tempdir().expect("tempdir");
        let spec = ClusterSpec {
            size: 1,
            disk: DiskKind::Tmpfs,
            ttl,
            base_port: None,
            work_dir: work.path().into(),
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
        .unwrap_or_else(|e| panic!("starting ZooKeeper: {e}"));
        Server {
            cluster,
            _work: work,
        }
    }

    fn endpoint(&self) -> String {
        self.cluster.endpoints()[0].clone()
    }

    /// Stops the server and checks that it did not die during the test and is gone.
    fn stop(self) {
        let Server { mut cluster, _work } = self;
        if let Err(e) = cluster.check_alive() {
            panic!(
                "the ZooKeeper server died during the test: {e}\n{}",
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

/// The two client libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lib {
    Client,
    Async,
}

async fn connect(lib: Lib, endpoints: Vec<String>) -> Arc<dyn Coordinator> {
    let config = ZkConfig {
        endpoints,
        connect_timeout: CONNECT_TIMEOUT,
        access: Default::default(),
    };
    let connecting = async {
        match lib {
            Lib::Client => ZkCoordinator::connect(&config)
                .await
                .map(|c| Arc::new(c) as Arc<dyn Coordinator>),
            Lib::Async => AsyncZkCoordinator::connect(&config)
                .await
                .map(|c| Arc::new(c) as Arc<dyn Coordinator>),
        }
    };
    within(Duration::from_secs(10), "connecting", connecting)
        .await
        .unwrap_or_else(|e| panic!("connecting {lib:?}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_kv_and_both_lock_recipes() {
    let server = Server::start(LONG_TTL).await;
    let c = connect(Lib::Async, vec![server.endpoint()]).await;

    // kv: a put creates the znode, the next sets it; serializable reads see it; there is no
    // linearizable read (the crate has no sync()); a missing key is None.
    let mut s = open_session(c.as_ref(), 0, LONG_TTL).await;
    let key = "/coordbench/kv/async-round-trip";
    s.put(key, b"v1")
        .await
        .expect("first put creates the znode");
    s.put(key, b"v2").await.expect("second put sets its data");
    let read = s
        .get(key, Consistency::Serializable)
        .await
        .expect("serializable get");
    assert_eq!(read.as_deref(), Some(&b"v2"[..]));
    assert_eq!(
        s.get("/coordbench/kv/missing", Consistency::Serializable)
            .await
            .expect("get"),
        None
    );
    let err = s
        .get(key, Consistency::Linearizable)
        .await
        .expect_err("no sync() in zookeeper-async");
    assert_eq!(err.kind(), "unsupported", "{err}");
    assert!(s.counters().requests >= 4, "{:?}", s.counters());
    within(Duration::from_secs(5), "close", s.close())
        .await
        .expect("close");

    // The lock workload through the runner: 8 clients on one lock, each recipe.
    for recipe in RECIPES {
        let clock = RunClock::start();
        let options = LockOptions {
            locks: 1,
            hold: Duration::ZERO,
            recipe,
            session_ttl: Duration::from_secs(2),
        };
        let workload = Arc::new(LockWorkload::new(options, clock).expect("lock workload"));
        let plan = closed_plan(8, Duration::from_millis(300), Duration::from_secs(2));
        let outcome = run_plan(&plan, c.clone(), workload.clone(), clock).await;
        let check = outcome.check.lock.as_ref().expect("a lock check");
        assert!(
            check.sections > 0 && outcome.total.ops > 0,
            "{recipe:?}: no acquisition"
        );
        assert_eq!(
            (check.violations, check.token_regressions),
            (0, 0),
            "{recipe:?}"
        );
        assert_eq!(
            outcome.total.errors_total(),
            0,
            "{recipe:?}: errors {:?}",
            outcome.total.errors
        );
        assert_eq!(outcome.counters.session_reestablishments, 0, "{recipe:?}");
        Percentiles::of(&outcome.total.latency).assert_ordered();
        let clients: std::collections::BTreeSet<usize> =
            workload.sections().iter().map(|s| s.client).collect();
        assert!(
            clients.len() > 1,
            "{recipe:?}: only clients {clients:?} held the lock"
        );
        eprintln!(
            "{recipe:?}: {} acquisitions in {:?}, {:.1} requests/op, {} notifications",
            outcome.total.ops,
            outcome.window,
            outcome.counters.requests as f64 / outcome.total.ops as f64,
            outcome.counters.notifications
        );
    }
    drop(c);
    server.stop();
}

/// A holder's connection goes silent past its session timeout; the server expires the
/// session, deleting its lock node, and a waiter takes the lock. When the link speaks
/// again, zookeeper-async silently opens a new session (counted) and goes on working,
/// while zookeeper-client reports the expiry. Either way only the release tells the holder
/// its lock is gone. Both libraries and both recipes, concurrently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silenced_holder_loses_its_lock_and_only_async_gets_a_new_session() {
    let ttl = Duration::from_secs(2);
    let server = Server::start(ttl).await;
    let endpoint = server.endpoint();
    let runs = [Lib::Async, Lib::Client]
        .into_iter()
        .flat_map(|lib| RECIPES.map(|recipe| (lib, recipe)))
        .map(|(lib, recipe)| silenced_holder(lib, recipe, endpoint.clone(), ttl));
    for (lib, recipe, reestablished, after) in futures::future::join_all(runs).await {
        eprintln!("{lib:?} {recipe:?}: re-established {reestablished}, holder's next op: {after}");
    }
    server.stop();
}

/// Returns the holder's re-establishment count and what its next operation said.
async fn silenced_holder(
    lib: Lib,
    recipe: LockRecipe,
    endpoint: String,
    ttl: Duration,
) -> (Lib, LockRecipe, u64, String) {
    let link = SilentLink::start(&endpoint).await;
    let via_link = connect(lib, vec![link.addr.clone()]).await;
    let direct = connect(lib, vec![endpoint]).await;
    let name = format!("silenced-{lib:?}-{recipe:?}").to_lowercase();
    let mut a = open_session(via_link.as_ref(), 0, ttl).await;
    let mut b = open_session(direct.as_ref(), 1, ttl).await;
    let ga = within(Duration::from_secs(5), "A's lock", a.lock(&name, recipe))
        .await
        .expect("A locks");
    let b_name = name.clone();
    let waiter = tokio::spawn(async move {
        let r = b.lock(&b_name, recipe).await;
        (b, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "{lib:?} {recipe:?}: B acquired while A holds"
    );

    link.mute(true);
    let (mut b, gb) = within(ttl * 4, "B's lock after A's session expired", waiter)
        .await
        .expect("B's task");
    let gb = gb.unwrap_or_else(|e| panic!("{lib:?} {recipe:?}: B's lock failed: {e}"));
    assert!(
        gb.token > ga.token,
        "{lib:?} {recipe:?}: token {} after {}",
        gb.token,
        ga.token
    );
    // A's lock node went with its session: gone (zk-recipe), or the shared holder path is
    // now B's node (naive; its data names the client).
    let a_path = String::from_utf8(ga.key.clone()).expect("a path");
    let node = b
        .get(&a_path, Consistency::Serializable)
        .await
        .expect("read A's lock node");
    match recipe {
        LockRecipe::HerdFree => {
            assert_eq!(node, None, "{lib:?}: A's queue node outlived its session")
        }
        LockRecipe::Naive => assert!(
            node.is_some_and(|d| d.starts_with(b"client-1")),
            "{lib:?}: holder is not B's"
        ),
        other => panic!("{other:?} is not a ZooKeeper recipe"),
    }

    link.mute(false);
    let reestablished = match lib {
        Lib::Async => {
            let appeared = within(Duration::from_secs(15), "A's new session", async {
                while a.counters().session_reestablishments == 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            });
            appeared.await;
            a.counters().session_reestablishments
        }
        Lib::Client => a.counters().session_reestablishments,
    };
    // A's next operation: zookeeper-async carries on in a new session as if nothing had
    // happened; zookeeper-client reports the expiry.
    let after = within(
        Duration::from_secs(10),
        "A's next op",
        a.put(&format!("/coordbench/kv/{name}"), b"x"),
    )
    .await;
    match lib {
        Lib::Async => {
            assert!(
                after.is_ok(),
                "{recipe:?}: async holder's put failed: {after:?}"
            );
            assert_eq!(reestablished, 1, "{recipe:?}");
        }
        Lib::Client => {
            let err = after
                .as_ref()
                .expect_err("zookeeper-client's session is over");
            assert_eq!(err.kind(), "session_expired", "{recipe:?}: {err}");
            assert_eq!(reestablished, 0, "{recipe:?}");
        }
    }
    let after = after.map_or_else(|e| e.kind().to_string(), |()| "ok".into());
    // Only the release finds out, and it must not delete B's node.
    let late = a
        .unlock(ga)
        .await
        .expect_err("A's release after losing the lock");
    assert_eq!(late.kind(), "session_expired", "{lib:?} {recipe:?}: {late}");
    b.unlock(gb).await.expect("B still holds, and unlocks");
    b.close().await.expect("close B");
    let _ = within(Duration::from_secs(5), "close A", a.close()).await;
    (lib, recipe, reestablished, after)
}

/// A TCP relay to one server that can go silent: muted, it reads and drops every byte in
/// both directions while all sockets stay open, as a network partition would.
struct SilentLink {
    addr: String,
    muted: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl SilentLink {
    async fn start(upstream: &str) -> SilentLink {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the link");
        let addr = listener.local_addr().expect("link address").to_string();
        let (muted, _) = watch::channel(false);
        let (upstream, mute) = (upstream.to_string(), muted.clone());
        let task = tokio::spawn(async move {
            // Dropped with this task when the link is dropped: every pipe ends with it.
            let mut pipes = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let ((cr, cw), (sr, sw)) = (client.into_split(), server.into_split());
                pipes.spawn(pipe(cr, sw, mute.subscribe()));
                pipes.spawn(pipe(sr, cw, mute.subscribe()));
            }
        });
        SilentLink { addr, muted, task }
    }

    fn mute(&self, on: bool) {
        self.muted.send_replace(on);
    }
}

impl Drop for SilentLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, muted: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if !*muted.borrow() && to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
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
        AsyncZkCoordinator::connect(&config),
    )
    .await
    .err()
    .expect("nothing listens there");
    assert_eq!(err.kind(), "unreachable", "{err}");
    assert!(!err.to_string().contains('\n'), "{err}");
}

/// The CLI smoke run. A silent re-establishment during it would be a real finding: the
/// console must then warn, and only then may the checker find overlapping sections.
#[test]
fn cli_lock_run_with_zookeeper_async() {
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
        .args([
            "--duration",
            "5s",
            "--zk-client",
            "async",
            "--disk",
            "tmpfs",
            "--quiet",
            "--out",
        ])
        .arg(out.path())
        .output()
        .expect("run coordbench");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
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
    assert_eq!(
        (&run["config"]["zk_client"], &run["config"]["client_lib"]),
        (&"async".into(), &"zookeeper-async".into())
    );
    let results = &run["results"];
    assert!(results["ops"].as_u64().is_some_and(|n| n > 0), "{results}");
    let reestablished = results["session_reestablishments"]
        .as_u64()
        .expect("session_reestablishments");
    let violations = results["violations"].as_u64().expect("violations");
    eprintln!(
        "async CLI run: {} ops, {violations} violations, {reestablished} re-establishments",
        results["ops"]
    );
    assert_eq!(
        stdout.contains("silently re-established"),
        reestablished > 0,
        "{stdout}"
    );
    if reestablished == 0 {
        assert_eq!(
            violations, 0,
            "overlapping sections without any re-establishment: {results}"
        );
    }

    let summary = std::fs::read_to_string(out.path().join("summary.csv")).expect("summary.csv");
    let mut rows = csv::Reader::from_reader(summary.as_bytes());
    let header = rows.headers().expect("header").clone();
    let row = rows.records().next().expect("a row").expect("a valid row");
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .map(|i| row[i].to_string())
    };
    assert_eq!(
        column("client_lib").as_deref(),
        Some("zookeeper-async"),
        "{summary}"
    );
    assert_eq!(
        column("session_reestablishments"),
        Some(reestablished.to_string()),
        "{summary}"
    );
}

#[test]
fn zk_client_outside_zookeeper_is_one_line_and_exit_2() {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args(["run", "--target", "etcd", "--zk-client", "async", "--quiet"])
        .output()
        .expect("run coordbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--zk-client applies only to --target zookeeper"),
        "{stderr}"
    );
}
