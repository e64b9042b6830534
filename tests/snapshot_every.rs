//! `--snapshot-every N` reaches every started target as its own setting (raft and zab
//! `--snapshot-every`, etcd `--snapshot-count`, ZooKeeper `snapCount`), is recorded in
//! run.json's cluster settings, and the real servers snapshot at that cadence: a 3 s kv-put
//! run at N = 200 makes etcd and ZooKeeper log snapshots they would not take at their
//! defaults (10,000 and 100,000). Targets coordbench does not start refuse it in one line.

#[path = "common/output.rs"]
mod output;

use std::path::Path;
use std::process::{Command, Output};

use output::describe;

fn coordbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args(args)
        .output()
        .expect("run coordbench")
}

/// A short kv-put run with snapshots every 200 entries; its directory.
fn run(target: &str, out: &Path) {
    let o = coordbench(&[
        "run",
        "--target",
        target,
        "--workload",
        "kv-put",
        "--duration",
        "3s",
        "--warmup",
        "0s",
        "--disk",
        "disk",
        "--clients",
        "8",
        "--snapshot-every",
        "200",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
}

fn setting(out: &Path, key: &str) -> String {
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let settings = run["cluster"]["settings"].as_array().unwrap();
    let found = settings.iter().find(|s| s[0] == key);
    found
        .and_then(|s| s[1].as_str())
        .unwrap_or_else(|| panic!("no {key} in {settings:?}"))
        .into()
}

/// Lines of the members' logs that contain `needle`.
fn log_lines(out: &Path, needle: &str) -> usize {
    let logs = std::fs::read_dir(out.join("logs")).unwrap();
    logs.map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap_or_default())
        .map(|text| text.lines().filter(|l| l.contains(needle)).count())
        .sum()
}

#[test]
fn every_started_target_snapshots_at_the_asked_cadence() {
    let tmp = tempfile::tempdir().unwrap();
    let zk = tmp.path().join("zookeeper");
    run("zookeeper", &zk);
    assert_eq!(setting(&zk, "snapCount"), "200");
    // One snapshot at start-up; the rest came from the cadence.
    let snapshots = log_lines(&zk, "Snapshotting:");
    assert!(
        snapshots > 3,
        "{snapshots} ZooKeeper snapshots at snapCount=200"
    );

    let etcd = tmp.path().join("etcd");
    run("etcd", &etcd);
    assert_eq!(setting(&etcd, "snapshot-count"), "200");
    let saved = log_lines(&etcd, "saved snapshot");
    assert!(saved > 0, "etcd saved no snapshot at --snapshot-count=200");

    for engine in ["raft", "zab"] {
        let out = tmp.path().join(engine);
        run(engine, &out);
        assert_eq!(setting(&out, "snapshot-every-entries"), "200", "{engine}");
    }
}

#[test]
fn a_target_coordbench_does_not_start_refuses_it_in_one_line() {
    let o = coordbench(&[
        "run",
        "--target",
        "null",
        "--workload",
        "kv-put",
        "--snapshot-every",
        "200",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--snapshot-every applies to clusters coordbench starts"),
        "{stderr}"
    );
}
