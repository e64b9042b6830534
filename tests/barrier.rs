//! The barrier workload on every target, through the CLI: 6 clients pass 8 double barriers
//! on a 3-member cluster; every client passes every barrier (ops = clients × barriers,
//! run.json's barrier figures), nobody leaves early (0 violations), no errors, and the
//! window ends when the last barrier is passed.

use std::path::Path;
use std::process::Command;

const CLIENTS: u64 = 6;
const BARRIERS: u64 = 8;

fn barrier_run(target: &str) {
    let out = tempfile::tempdir().expect("tempdir");
    let run = Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args([
            "run",
            "--target",
            target,
            "--cluster-size",
            "3",
            "--disk",
            "tmpfs",
        ])
        .args(["--workload", "barrier", "--quiet", "--out"])
        .arg(out.path())
        .args([
            "--clients",
            &CLIENTS.to_string(),
            "--barriers",
            &BARRIERS.to_string(),
        ])
        .output()
        .expect("run coordbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "{target}: exit {}: {stderr}",
        run.status
    );
    check(target, out.path());
}

fn check(target: &str, dir: &Path) {
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let results = &run["results"];
    assert_eq!(results["ops"], CLIENTS * BARRIERS, "{target}: {results}");
    assert_eq!(results["errors"], 0, "{target}: {results}");
    assert_eq!(results["violations"], 0, "{target}: {results}");
    let barrier = &results["barrier"];
    assert_eq!(barrier["barriers_passed"], BARRIERS, "{target}: {barrier}");
    assert_eq!(barrier["passes"], CLIENTS * BARRIERS, "{target}: {barrier}");
    assert_eq!(run["config"]["warmup_s"], 0.0, "{target}: no warm-up");
    assert!(
        results["window_s"].as_f64().unwrap() < 60.0,
        "{target}: the window ends with the last barrier: {results}"
    );
}

#[test]
fn barrier_on_raft() {
    barrier_run("raft");
}

#[test]
fn barrier_on_zab() {
    barrier_run("zab");
}

#[test]
fn barrier_on_etcd() {
    barrier_run("etcd");
}

#[test]
fn barrier_on_zookeeper() {
    barrier_run("zookeeper");
}

#[test]
fn barrier_options_are_checked_in_one_line() {
    for (args, want) in [
        (
            &["--workload", "kv-put", "--barriers", "3"][..],
            "--barriers applies only to --workload barrier",
        ),
        (
            &["--workload", "barrier", "--ops", "3"][..],
            "omit --ops and --rate",
        ),
        (
            &["--workload", "barrier", "--clients", "1"][..],
            "at least 2 clients",
        ),
    ] {
        let run = Command::new(env!("CARGO_BIN_EXE_coordbench"))
            .args(["run", "--target", "null", "--quiet"])
            .args(args)
            .output()
            .expect("run coordbench");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
