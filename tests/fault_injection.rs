//! `--fault` through the `coordbench` binary on a fresh 3-member cluster (tmpfs): on raft,
//! four kinds (kill, pause and partition of the leader, and a restart of every member) in
//! one run, every kind in failover.csv and in run.json's per-kind summaries; on etcd,
//! ZooKeeper and zab, `kill-leader` alone (members talk directly, no proxy): the leader is
//! SIGKILLed during the window, a new leader is found at a higher term, probe writes
//! resume, the victim is restarted and rejoins, and the figures land in failover.csv,
//! run.json and summary.csv. Timing figures are only checked for order and presence here;
//! their values are measurements (see RESULTS.md). On zab, restarts whose outage outlasts
//! the session TTL: the probe writes come back on new sessions.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// Start, warm-up, a window of up to 15 s with its faults, recovery and teardown, on a
/// loaded machine.
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

/// Runs `coordbench run` on `target` with `extra` arguments; returns the results directory
/// (inside the returned temporary directory).
fn fault_run(target: &str, extra: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let mut argv = vec![
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
        "--warmup",
        "500ms",
        "--quiet",
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    argv.extend_from_slice(extra);
    let (status, stderr) = common::run_coordbench(&argv, dir.path(), RUN_BOUND);
    assert!(status.success(), "{target}: exit {status}: {stderr}");
    (dir, out)
}

/// `window`: long enough for a restarted member to rejoin before the run ends (a
/// ZooKeeper JVM on a loaded 2-core machine takes several seconds).
fn kill_leader_run(target: &str, window: &str) {
    let extra = [
        "--duration",
        window,
        "--fault",
        "kill-leader",
        "--fault-every",
        "1s",
    ];
    let (_dir, out) = fault_run(target, &extra);
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
        assert_eq!(f["victims"], f["old_leader"], "{target}: {f:?}");
        assert_ne!(
            f["new_leader"], f["victims"],
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
        // The workload's own clients stalled around the kill (requests to the killed
        // leader, or through it), and resumed no earlier than their stall ended.
        let gap = num(f, "workload_gap_us").expect("the workload's gap");
        let resumed = num(f, "workload_resumed_us").expect("the workload resumed");
        assert!(
            gap > 0 && gap % 10_000 == 0,
            "{target}: gap in 10 ms ticks: {f:?}"
        );
        assert!(resumed <= gap + 1_000_000, "{target}: {f:?}");
    }
    let summary = rows(&out.join("summary.csv"));
    let s = &summary[0];
    assert_eq!(
        num(s, "faults"),
        Some(faults.len() as u64),
        "{target}: {s:?}"
    );
    assert!(num(s, "new_leader_p50_us").is_some() && num(s, "unavailable_max_us").is_some());
    let run = common::run_json(&out);
    assert_eq!(run["complete"], true, "{target}: {}", run["error"]);
    assert_eq!(
        run["faults"]["unrecovered"], 0,
        "{target}: {}",
        run["faults"]
    );
    assert_eq!(run["config"]["fault"], "kill-leader");
    assert_eq!(
        run["faults"]["by_kind"]["kill-leader"]["faults"],
        faults.len()
    );

    // The report of the run draws its failover CDF.
    let report = ["report", out.to_str().expect("utf-8 path")];
    let (status, stderr) = common::run_coordbench(&report, &out, Duration::from_secs(60));
    assert!(status.success(), "{target}: report: {stderr}");
    let svg = std::fs::read_to_string(out.join("charts/failover-cdf.svg")).expect("failover chart");
    let elected = faults
        .iter()
        .filter(|f| num(f, "new_leader_us").is_some())
        .count();
    assert!(
        svg.contains(&format!(
            "{}: new leader ({elected} faults)",
            legend_name(target)
        )),
        "{target}: legend of the failover chart"
    );
}

#[test]
fn four_fault_kinds_in_one_raft_run() {
    let kinds = [
        "kill-leader",
        "pause-leader",
        "partition-leader",
        "restart-all",
    ];
    let list = kinds.join(",");
    let extra = [
        "--duration",
        "15s",
        "--fault",
        list.as_str(),
        "--fault-every",
        "2s",
        "--fault-duration",
        "1s",
    ];
    let (_dir, out) = fault_run("raft", &extra);
    let faults = rows(&out.join("failover.csv"));
    // The first round uses every kind once, in the seeded order.
    let first_round: Vec<&str> = faults.iter().take(4).map(|f| f["fault"].as_str()).collect();
    let mut sorted = first_round.clone();
    sorted.sort_unstable();
    let mut expected = kinds.to_vec();
    expected.sort_unstable();
    assert_eq!(
        sorted, expected,
        "first round {first_round:?} of {faults:?}"
    );
    for f in faults.iter().filter(|f| f["cut_short"] == "false") {
        let partition = f["fault"] == "partition-leader";
        // A 1 s partition may end before raft's 1-2 s election timeout lets anyone notice;
        // killed and paused members are silent at once.
        assert!(
            (partition || num(f, "effect_us").is_some()) && num(f, "rejoined_us").is_some(),
            "{f:?}"
        );
        assert_eq!(!f["partition"].is_empty(), partition, "{f:?}");
        assert_eq!(
            num(f, "minority_acked_writes").is_some(),
            partition,
            "{f:?}"
        );
        if partition {
            assert_eq!(num(f, "minority_acked_writes"), Some(0), "{f:?}");
        }
        if f["fault"] == "restart-all" {
            assert_eq!(f["victims"], "m1+m2+m3", "{f:?}");
        }
    }
    let run = common::run_json(&out);
    assert_eq!(run["complete"], true, "{}", run["error"]);
    assert_eq!(run["config"]["fault"], list.as_str());
    assert_eq!(run["config"]["fault_duration_ms"], 1000);
    let faults_json = &run["faults"];
    assert_eq!(faults_json["faults"], faults.len(), "{faults_json}");
    assert_eq!(faults_json["unrecovered"], 0, "{faults_json}");
    assert_eq!(faults_json["minority_acked_writes"], 0, "{faults_json}");
    let by_kind = faults_json["by_kind"].as_object().expect("by_kind");
    for kind in kinds {
        let of_kind = faults.iter().filter(|f| f["fault"] == kind).count();
        assert_eq!(by_kind[kind]["faults"], of_kind, "{kind}: {faults_json}");
        assert!(
            by_kind[kind]["rejoined_p50_us"].is_u64(),
            "{kind}: {faults_json}"
        );
    }
    assert!(
        by_kind["restart-all"]["new_leader_p50_us"].is_u64(),
        "{faults_json}"
    );
    let settings = run["cluster"]["settings"].to_string();
    assert!(
        settings.contains("peer-proxy"),
        "partitions need the proxy: {settings}"
    );
}

#[test]
fn kill_leader_on_zab() {
    kill_leader_run("zab", "8s");
}

#[test]
fn kill_leader_on_etcd() {
    kill_leader_run("etcd", "8s");
}

#[test]
fn kill_leader_on_zookeeper() {
    kill_leader_run("zookeeper", "20s");
}

/// Outages that outlast the session TTL: on zab at a 2 s TTL every restart-all keeps the
/// members down 5 s, so no probe put is acknowledged for over two TTLs and every probe
/// session is lost (expired); the probes open new ones, so the next restart-all still gets
/// its first-write figure.
#[test]
fn probes_reopen_sessions_an_outage_outlasted() {
    let extra = [
        "--duration",
        "20s",
        "--ttl",
        "2s",
        "--fault",
        "restart-all",
        "--fault-every",
        "2s",
        "--fault-duration",
        "5s",
    ];
    let (_dir, out) = fault_run("zab", &extra);
    let faults = rows(&out.join("failover.csv"));
    // A restart that healed within a few seconds of the window's end may leave the probes
    // no time to reopen sessions and write (about 1 s each): only the others must show it.
    let recovered: Vec<_> = faults
        .iter()
        .filter(|f| f["cut_short"] == "false")
        .filter(|f| {
            let at = f["at_s"].parse::<f64>().unwrap_or(f64::MAX);
            num(f, "healed_us").is_some_and(|h| at + h as f64 / 1e6 + 3.0 <= 20.0)
        })
        .collect();
    assert!(
        recovered.len() >= 2,
        "two restarts ran to recovery with time left after: {faults:?}"
    );
    for f in &recovered {
        assert!(
            num(f, "probe_sessions_lost").is_some_and(|n| n > 0),
            "the outage outlasted the probes' sessions: {f:?}"
        );
        assert!(
            num(f, "first_write_us").is_some(),
            "writes resumed on new sessions: {f:?}"
        );
    }
    let run = common::run_json(&out);
    assert_eq!(run["complete"], true, "{}", run["error"]);
    let probes = &run["faults"]["probe_sessions"];
    let lost_per_fault: u64 = faults
        .iter()
        .filter_map(|f| num(f, "probe_sessions_lost"))
        .sum();
    let (lost, reopened) = (probes["lost"].as_u64(), probes["reopened"].as_u64());
    // Every probe was live when the first restart began; each recovered fault needed at
    // least one new session for its first write.
    assert!(
        lost.is_some_and(|l| l >= 4 && l >= lost_per_fault)
            && reopened.is_some_and(|r| r >= recovered.len() as u64),
        "{probes}"
    );
    assert_eq!(probes["gave_up"], serde_json::json!([]), "{probes}");
}

/// How report legends name a target: coordbench's own engines say so.
fn legend_name(target: &str) -> String {
    match target {
        "raft" | "zab" => format!("{target} (coordbench)"),
        other => other.to_string(),
    }
}
