//! The register workload through the `coordbench` binary on a 3-member raft cluster and
//! ZooKeeper ensemble and a 1-member zab (tmpfs): linearizable reads give a linearizable
//! history whose every operation is in history.jsonl; the verdict and its figures are in
//! summary.csv and run.json alike. ZooKeeper's sync() reads (`--consistency sync`) run
//! and get a verdict, which may be false (docs/reference.md, Reads).

mod common;

use std::path::Path;
use std::time::Duration;

use coordbench_workloads::linearizability::read_jsonl;

/// Start, 0.5 s warm-up, 3 s window, the check and teardown, with room for a loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(120);

/// Runs the register workload against a fresh `target` and returns its directory.
fn run(dir: &Path, target: &str, size: &str, args: &[&str]) -> std::path::PathBuf {
    let out = dir.join("out");
    let mut argv = vec![
        "run",
        "--target",
        target,
        "--cluster-size",
        size,
        "--disk",
        "tmpfs",
        "--workload",
        "register",
        "--clients",
        "6",
        "--duration",
        "3s",
        "--warmup",
        "500ms",
        "--quiet",
        "--out",
    ];
    argv.push(out.to_str().expect("utf-8 path"));
    argv.extend_from_slice(args);
    let (status, stderr) = common::run_coordbench(&argv, dir, RUN_BOUND);
    assert!(
        status.success(),
        "coordbench {argv:?}: {status:?}\n{stderr}"
    );
    out
}

fn assert_linearizable_run(out: &Path) {
    let row = common::summary_row(&out.join("summary.csv"));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let register = &record["results"]["register"];
    assert_eq!(row["linearizable"], "true", "{register}");
    assert_eq!(register["linearizable"], "true");
    assert_eq!(row["stale_reads"], "0");
    let history = read_jsonl(&out.join("history.jsonl")).expect("history.jsonl reads");
    assert_eq!(register["ops"].as_u64(), Some(history.len() as u64));
    // Setup's writes, the clients' operations (all three kinds), the final reads.
    let kinds = |kind: &str| {
        history
            .iter()
            .filter(|op| serde_json::to_value(&op.call).unwrap()["kind"] == kind)
            .count()
    };
    assert!(
        kinds("read") > 10 && kinds("write") > 10 && kinds("cas") > 5,
        "{register}"
    );
    let ops: u64 = row["ops"].parse().unwrap();
    assert!(
        history.len() as u64 > ops,
        "the history covers warm-up and window"
    );
}

#[test]
fn raft_register_history_is_linearizable() {
    let dir = tempfile::tempdir().unwrap();
    assert_linearizable_run(&run(dir.path(), "raft", "3", &[]));
}

#[test]
fn zab_register_history_is_linearizable() {
    let dir = tempfile::tempdir().unwrap();
    assert_linearizable_run(&run(dir.path(), "zab", "1", &[]));
}

#[test]
fn zookeeper_register_history_with_quorum_reads_is_linearizable() {
    let dir = tempfile::tempdir().unwrap();
    assert_linearizable_run(&run(dir.path(), "zookeeper", "3", &[]));
}

#[test]
fn zookeeper_sync_reads_are_judged_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), "zookeeper", "3", &["--consistency", "sync"]);
    let row = common::summary_row(&out.join("summary.csv"));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["config"]["consistency"], "sync");
    // ZooKeeper's answer either way; what matters is that the history was judged.
    assert!(
        ["true", "false"].contains(&row["linearizable"].as_str()),
        "{:?}",
        row["linearizable"]
    );
}

#[test]
fn bad_register_options_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--workload", "register", "--keys", "0"][..],
        &["--workload", "register", "--check-budget", "0s"],
        &[
            "--workload",
            "register",
            "--target",
            "zookeeper",
            "--zk-client",
            "async",
        ],
    ] {
        let mut argv = vec!["run", "--quiet"];
        argv.extend_from_slice(args);
        let (status, stderr) = common::run_coordbench(&argv, dir.path(), RUN_BOUND);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}
