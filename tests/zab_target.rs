//! The built-in Zab engine as a target: `coordbench run --target zab` starts three
//! `coordbench serve zab` processes (readiness by ruok/srvr, like a real ensemble) and runs
//! the lock workload through the ZooKeeper driver with both recipes, with no violation, and
//! mntr scraped from every member. The ZooKeeper conformance bodies that real ZooKeeper
//! passes (tests/common/zk_conformance.rs: kv, locks, elections, discovery, value watches)
//! run unchanged on a 3-member zab cluster. A thousand sessions open a bounded number at a
//! time (`--session-opens`).

mod common;

use std::time::{Duration, Instant};

use common::recipes::discovery_follows_registrations;
use common::zk_conformance::{
    abandoned_holder_hands_over, election_herd, elections_and_value_watches,
    kv_get_through_the_runner, kv_round_trip, lock_workload_is_safe, release_wakes_one_or_the_herd,
};
use common::{start_target, TargetKind};

const ZAB: TargetKind = TargetKind::Zab;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_round_trip_kv_reads_elections_and_value_watches() {
    let target = start_target(ZAB, 3).await;
    kv_round_trip(&target.endpoints()).await;
    kv_get_through_the_runner(target.coordinator.clone()).await;
    elections_and_value_watches(target.coordinator.clone()).await;
    target.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_workload_is_safe_with_both_recipes() {
    let target = start_target(ZAB, 3).await;
    lock_workload_is_safe(target.coordinator.clone()).await;
    target.stop();
}

/// The shortest TTL the members grant (2 ticks of ZooKeeper's default tickTime, 2 s: the
/// zab launcher does not derive tickTime from the spec's TTL as the ZooKeeper one does).
/// Slack over the TTL: two ticks and 1 s. A member proposes the touches of its sessions
/// once per tick (engines/zk-api/src/sessions.rs), so A's deadline may be set up to a tick
/// after its last packet, and the leader checks deadlines once per tick.
/// An abandoned session's service registration vanishes on the same terms, meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_sessions_release_locks_and_registrations_on_expiry() {
    let target = start_target(ZAB, 3).await;
    let ttl = ZAB.min_ttl();
    let tick = Duration::from_secs(2);
    let slack = 2 * tick + Duration::from_secs(1);
    tokio::join!(
        abandoned_holder_hands_over(target.coordinator.clone(), ttl, slack),
        discovery_follows_registrations(target.coordinator.clone(), ttl, slack),
    );
    target.stop();
}

/// The herd check of locks and of elections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_release_wakes_one_waiter_or_the_whole_herd() {
    let target = start_target(ZAB, 3).await;
    release_wakes_one_or_the_herd(target.coordinator.clone()).await;
    election_herd(target.coordinator.clone()).await;
    target.stop();
}

fn cli_lock_run(recipe: Option<&str>) {
    let out = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_coordbench"));
    cmd.args(["run", "--target", "zab", "--cluster-size", "3"])
        .args(["--workload", "lock", "--clients", "16", "--duration", "5s"])
        .args(["--disk", "tmpfs", "--quiet", "--out"])
        .arg(out.path());
    if let Some(r) = recipe {
        cmd.args(["--recipe", r]);
    }
    let run = cmd.output().expect("run coordbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "coordbench exited with {}: {stderr}",
        run.status
    );
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t.elapsed()
    );
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("run.json")).expect("run.json"),
    )
    .expect("json");
    assert_eq!(run["complete"], true);
    assert_eq!(run["config"]["recipe"], recipe.unwrap_or("zk-recipe"));
    assert_eq!(run["results"]["violations"], 0, "{}", run["results"]);
    assert!(
        run["results"]["ops"].as_u64().is_some_and(|n| n > 0),
        "{}",
        run["results"]
    );
    let delta = run["server_counters"]["delta"]
        .as_object()
        .expect("server counters scraped by mntr");
    assert_eq!(delta.len(), 3, "one entry per member: {delta:?}");
}

#[test]
fn cli_lock_run_on_three_members_with_the_zk_recipe() {
    cli_lock_run(None);
}

#[test]
fn cli_lock_run_on_three_members_with_the_naive_recipe() {
    cli_lock_run(Some("naive"));
}

/// A thousand lock clients, their sessions opened at most 100 at a time: every session
/// opens, the run completes, and run.json says how opening went.
#[test]
fn a_thousand_sessions_open_in_a_bounded_window() {
    let out = tempfile::tempdir().expect("tempdir");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_coordbench"));
    cmd.args(["run", "--target", "zab", "--cluster-size", "3"])
        .args(["--workload", "lock", "--clients", "1000", "--locks", "100"])
        .args([
            "--session-opens",
            "100",
            "--duration",
            "2s",
            "--warmup",
            "0s",
        ])
        .args(["--disk", "tmpfs", "--quiet", "--out"])
        .arg(out.path());
    let run = cmd.output().expect("run coordbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "exit {}: {stderr}", run.status);
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("run.json")).expect("run.json"),
    )
    .expect("json");
    assert_eq!(run["complete"], true, "{}", run["error"]);
    assert_eq!(run["config"]["session_opens"], 100);
    let opening = &run["results"]["session_opening"];
    assert_eq!(opening["sessions"], 1000, "{opening}");
    assert_eq!(opening["at_once"], 100, "{opening}");
    let open_ms = opening["open_s"].as_f64().expect("open_s") * 1000.0;
    let slowest = opening["slowest_open_ms"].as_f64().expect("slowest");
    assert!(0.0 < slowest && slowest <= open_ms, "{opening}");
    assert!(
        run["results"]["ops"].as_u64().is_some_and(|n| n > 0),
        "{}",
        run["results"]
    );
}

const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";

/// Runs `zkCli.sh -server <server> <args>` to completion (bounded); returns stdout + stderr.
async fn zkcli(server: &str, args: &[&str]) -> String {
    let mut cmd = tokio::process::Command::new(ZKCLI);
    cmd.arg("-server")
        .arg(server)
        .args(args)
        // Quiet, small and quick to start: a client needs little of the JVM.
        .env(
            "CLIENT_JVMFLAGS",
            "-Xmx128m -XX:TieredStopAtLevel=1 -Xshare:auto",
        )
        .env("ZOO_LOG4J_PROP", "ERROR,CONSOLE")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = common::within(
        Duration::from_secs(40),
        &format!("zkCli.sh {args:?}"),
        cmd.output(),
    )
    .await
    .expect("zkCli.sh runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn has_line(out: &str, line: &str) -> bool {
    out.lines().any(|l| l.trim_end() == line)
}

/// Debian's zkCli.sh (ZooKeeper 3.8's Java client) against one member of a 3-member zab
/// cluster: `create /a x`, then `get /a` prints x. Skipped where zkCli.sh is absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkcli_create_then_get_on_a_member() {
    if !coordbench_sim::tools::installed(ZKCLI) {
        return;
    }
    let target = start_target(ZAB, 3).await;
    let server = target.endpoints()[0].clone();
    let out = zkcli(&server, &["create", "/a", "x"]).await;
    assert!(has_line(&out, "Created /a"), "{out}");
    let out = zkcli(&server, &["get", "/a"]).await;
    assert!(has_line(&out, "x"), "{out}");
    eprintln!("zkCli.sh get /a:\n{out}");
    target.stop();
}
