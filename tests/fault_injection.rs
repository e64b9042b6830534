//! `--fault kill-leader` through the `coordbench` binary on a fresh 3-member cluster of every
//! target (tmpfs): the leader is SIGKILLed during the window, a new leader is found at a
//! higher term, probe writes resume, the victim is restarted and rejoins, and the figures
//! land in failover.csv, run.json and summary.csv. Timing figures are only checked for
//! order and presence here; their values are measurements (see RESULTS.md).

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// Start, warm-up, an 8 s window with its faults, recovery and teardown, on a loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(150);

fn rows(path: &Path) -> Vec<HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let headers = r.headers().expect("header").clone();
    r.records()
        .map(|rec| {
            let rec = rec.expect("row");
            headers
                .iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn num(row: &HashMap<String, String>, col: &str) -> Option<u64> {
    row.get(col).and_then(|v| v.parse().ok())
}

fn kill_leader_run(target: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let argv = [
        "run",
        "--target",
        target,
        "--cluster-size",
        "3",
        "--disk",
        "tmpfs",
        "--workload",
        "kv-put",
        "--clients",
        "2",
        "--duration",
        "8s",
        "--warmup",
        "500ms",
        "--fault",
        "kill-leader",
        "--fault-every",
        "1s",
        "--quiet",
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    let (status, stderr) = common::run_coordbench(&argv, dir.path(), RUN_BOUND);
    assert!(status.success(), "{target}: exit {status}: {stderr}");

    let faults = rows(&out.join("failover.csv"));
    let recovered: Vec<_> = faults
        .iter()
        .filter(|f| f["cut_short"] == "false")
        .collect();
    assert!(
        !recovered.is_empty(),
        "{target}: no fault ran to recovery: {faults:?}"
    );
    for f in &recovered {
        let (old, new) = (num(f, "old_term").expect("old_term"), num(f, "new_term"));
        assert!(
            new.is_some_and(|n| n > old),
            "{target}: new term {new:?} not above {old}: {f:?}"
        );
        assert_ne!(
            f["new_leader"], f["victim"],
            "{target}: the killed member leads again: {f:?}"
        );
        let detect = num(f, "detect_us").expect("detected");
        let elected = num(f, "new_leader_us").expect("a new leader");
        let rejoined = num(f, "rejoined_us").expect("the victim rejoined");
        assert!(
            detect <= elected && elected < rejoined,
            "{target}: out of order: {f:?}"
        );
        assert!(
            num(f, "first_write_us").is_some(),
            "{target}: writes did not resume: {f:?}"
        );
        assert!(
            num(f, "unavailable_us").is_some(),
            "{target}: no gap measured: {f:?}"
        );
    }
    let summary = rows(&out.join("summary.csv"));
    let s = &summary[0];
    assert_eq!(
        num(s, "faults"),
        Some(faults.len() as u64),
        "{target}: {s:?}"
    );
    assert!(num(s, "new_leader_p50_us").is_some() && num(s, "unavailable_max_us").is_some());
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).expect("run.json"))
            .expect("run.json parses");
    assert_eq!(run["complete"], true, "{target}: {}", run["error"]);
    assert_eq!(
        run["faults"]["unrecovered"], 0,
        "{target}: {}",
        run["faults"]
    );
    assert_eq!(run["config"]["fault"], "kill-leader");
}

#[test]
fn kill_leader_on_raft() {
    kill_leader_run("raft");
}

#[test]
fn kill_leader_on_zab() {
    kill_leader_run("zab");
}

#[test]
fn kill_leader_on_etcd() {
    kill_leader_run("etcd");
}

#[test]
fn kill_leader_on_zookeeper() {
    kill_leader_run("zookeeper");
}
