//! `coordbench simulate throughput`: calibrated on three real runs against the Raft engine
//! (kv-put on 1 and 3 members, kv-get on 3), the model writes throughput.csv, costs.json and
//! summary.md with the ZooKeeper paper's Table 1 beside it; its reads grow with members
//! and its writes do not; a calibration missing a run is one line and exit 2.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");

fn coordbench(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("coordbench runs")
}

fn run(out: &Path, workload: &str, members: &str) {
    let o = coordbench(&[
        "run",
        "--target",
        "raft",
        "--workload",
        workload,
        "--cluster-size",
        members,
        "--clients",
        "8",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--disk",
        "tmpfs",
        "--consistency",
        "serializable",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_model_is_calibrated_on_real_runs_and_put_beside_table_1() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    run(&runs.join("put-1"), "kv-put", "1");
    run(&runs.join("put-3"), "kv-put", "3");
    run(&runs.join("get-3"), "kv-get", "3");

    let model = dir.path().join("model");
    let o = coordbench(&[
        "simulate",
        "throughput",
        "--calibrate",
        runs.to_str().unwrap(),
        "--out",
        model.to_str().unwrap(),
        "--cores",
        "4",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = std::fs::read_to_string(model.join("summary.md")).unwrap();
    assert!(summary.contains("a model, not a measurement"), "{summary}");
    assert!(summary.contains("Table 1"), "{summary}");

    let costs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("costs.json")).unwrap()).unwrap();
    let raft = &costs["costs_us"]["raft"];
    for key in ["read_us", "write_leader_us", "write_follower_us"] {
        assert!(raft[key].as_f64().unwrap() > 0.0, "{key}: {raft}");
    }
    assert_eq!(costs["calibrated_from"].as_array().unwrap().len(), 3);

    let mut rows = csv::Reader::from_path(model.join("throughput.csv")).unwrap();
    let points: Vec<(u32, f64, f64)> = rows
        .deserialize::<(String, u32, f64, f64, f64, String)>()
        .map(|r| r.unwrap())
        .map(|(_, n, ratio, _, ops, _)| (n, ratio, ops))
        .collect();
    assert_eq!(points.len(), 5 * 4, "5 sizes x 4 read ratios");
    let at = |n: u32, ratio: f64| {
        points
            .iter()
            .find(|p| p.0 == n && p.1 == ratio)
            .map(|p| p.2)
            .unwrap()
    };
    assert!(at(13, 1.0) > at(3, 1.0) * 4.0, "reads scale with servers");
    assert!(at(13, 0.0) <= at(3, 0.0), "writes do not");

    // Without the kv-get run: one line naming what to add, exit 2.
    std::fs::remove_dir_all(runs.join("get-3")).unwrap();
    let o = coordbench(&[
        "simulate",
        "throughput",
        "--calibrate",
        runs.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no kv-get run"), "{stderr}");
}
