//! The reference client libraries as tests, each run against the engine and against the
//! real server as a control:
//!
//! - etcd's own Go client, go.etcd.io/etcd/client/v3 and its concurrency package
//!   (tests/interop/etcd-concurrency: Mutex, Election, STM, session expiry), against a
//!   3-member raft cluster and a 3-member etcd (the release the provisioning picks:
//!   `COORDBENCH_ETCD_VERSION`, else the newest installed);
//! - Apache Curator's recipes (tests/interop/curator-recipes: InterProcessMutex,
//!   InterProcessSemaphoreV2, LeaderLatch, LeaderSelector, DistributedDoubleBarrier,
//!   CuratorCache, PersistentWatcher), against a 3-member zab ensemble and a 3-server
//!   ZooKeeper.
//!
//! The programs assert the recipes' guarantees (mutual exclusion, fencing, one leader at a
//! time, constant totals, barriers, ordered events) and print one line per check; a
//! failure is one line `FAIL <check>: <reason>`. scripts/build-interop.sh builds them
//! into a cache outside the checkout and scripts/test.sh exports their paths
//! (`COORDBENCH_INTEROP_*`); without those variables the test asks the script where the
//! build of these sources would be. A program not built is a skip with a note, or a
//! failure under `CI`.

mod common;
#[path = "common/interop_build.rs"]
mod interop_build;
use interop_build::program;

use std::path::Path;
use std::time::Duration;

use common::{start_target, within, Target, TargetKind};
use coordbench_lab::provision::{zookeeper, Cluster, ClusterSpec, DiskKind};

/// Bound on one program run (each takes 10 to 20 s).
const RUN_BOUND: Duration = Duration::from_secs(240);
/// Bound on starting the real ZooKeeper ensemble.
const ZK_START_BOUND: Duration = Duration::from_secs(90);

const GO_VAR: &str = "COORDBENCH_INTEROP_ETCD_CONCURRENCY";
const JAVA_VAR: &str = "COORDBENCH_INTEROP_CURATOR_RECIPES";

/// Runs a checks program to its end; panics with its `FAIL` line first, then its output.
async fn run_checks(what: &str, mut command: tokio::process::Command) {
    command
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = within(RUN_BOUND, what, command.output())
        .await
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let fail = stderr
            .lines()
            .rev()
            .find(|l| l.starts_with("FAIL "))
            .unwrap_or("(no FAIL line)");
        panic!(
            "{what}: {fail}\n({})\n--- stdout\n{stdout}--- stderr (last 60 lines)\n{}",
            out.status,
            tail(&stderr, 60)
        );
    }
    assert!(
        stdout.lines().any(|l| l.starts_with("PASS")),
        "{what}: exited 0 without PASS\n{stdout}"
    );
    println!("{what}:\n{stdout}");
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// etcd's Go client checks against `kind`'s 3 members, every endpoint given.
async fn etcd_concurrency(kind: TargetKind) {
    let Some(program) = program(GO_VAR) else {
        return;
    };
    let target = start_target(kind, 3).await;
    let what = format!("etcd's Go client on {}", describe(&target));
    let mut command = tokio::process::Command::new(program);
    command.arg("--endpoints").arg(target.endpoints().join(","));
    run_checks(&what, command).await;
    target.stop();
}

fn describe(target: &Target) -> String {
    let info = target.cluster.info();
    match &info.source {
        Some(source) => format!("{} members of {} ({source})", info.size, info.target),
        None => format!("{} members of {}", info.size, info.target),
    }
}

/// Curator's recipe checks against `cluster`, every server in the connect string.
async fn curator_recipes(what: &str, cluster: &Cluster, jar: &Path) {
    let java = zookeeper::resolve_java(None).expect("java (scripts/install-deps.sh)");
    let mut command = tokio::process::Command::new(java);
    command
        .arg("-Xmx256m")
        .arg("-jar")
        .arg(jar)
        .arg(cluster.endpoints().join(","));
    run_checks(what, command).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_go_client_concurrency_on_etcd() {
    etcd_concurrency(TargetKind::Etcd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_go_client_concurrency_on_raft() {
    etcd_concurrency(TargetKind::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_recipes_on_zookeeper() {
    let Some(jar) = program(JAVA_VAR) else {
        return;
    };
    let work = tempfile::TempDir::new().unwrap();
    let spec = ClusterSpec::new(3, DiskKind::Tmpfs, common::LONG_TTL, work.path().into());
    let options = zookeeper::ZkOptions::default();
    let start = zookeeper::start(&spec, &options);
    let mut cluster = within(ZK_START_BOUND, "starting ZooKeeper", start)
        .await
        .unwrap_or_else(|e| panic!("starting a 3-server ZooKeeper: {e}"));
    let what = format!(
        "Curator on 3 ZooKeeper servers ({})",
        cluster.info().source.as_deref().unwrap_or("?")
    );
    curator_recipes(&what, &cluster, &jar).await;
    cluster
        .check_alive()
        .expect("every ZooKeeper server still runs");
    cluster.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_recipes_on_zab() {
    let Some(jar) = program(JAVA_VAR) else {
        return;
    };
    let target = start_target(TargetKind::Zab, 3).await;
    let what = format!("Curator on {}", describe(&target));
    curator_recipes(&what, &target.cluster, &jar).await;
    target.stop();
}
