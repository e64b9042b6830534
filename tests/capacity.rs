//! Capacity planning end to end: the search against the null target's injected service
//! time (C servers taking D per request, so capacity is exactly C / D) finds that rate
//! within 5%; a search on the built-in Raft engine (real member processes) reports a max
//! rate and every window, leaving no member behind; `--preload-keys` writes every key (read
//! back through the driver) and held watchers and sessions open; bad objectives and
//! options are refused in one line with exit 2.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use common::{assert_gone, run_coordbench, start_target, summary_row, TargetKind};
use coordbench_drivers::{Consistency, SessionOptions};
use coordbench_workloads::kv::key_name;
use coordbench_workloads::preload::{fill_keys, Held, PRELOAD};

/// The null search measures the generator's own timing against a virtual server: it runs
/// alone, while the other tests (which start member processes) wait.
static ALONE: RwLock<()> = RwLock::new(());

fn capacity_json(out: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(out.join("capacity.json")).expect("capacity.json"),
    )
    .expect("capacity.json parses")
}

/// 8 servers taking 10 ms per put: 800 puts/s. Above it the backlog grows through the
/// window, and with it the median, past the objective; below it requests wait for no
/// server. The objective is on the median: a loaded 2-core machine stalls the generator
/// for tens of ms now and then, which its tail shows as schedule lag.
#[test]
fn null_search_finds_the_analytic_capacity_within_five_percent() {
    let _alone = ALONE.write().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap");
    let argv = [
        "capacity",
        "--target",
        "null",
        "--workload",
        "kv-put",
        "--service-time",
        "10ms",
        "--service-concurrency",
        "8",
        "--slo",
        "p50<40ms",
        "--duration",
        "1500ms",
        "--warmup",
        "500ms",
        "--fresh-warmup",
        "500ms",
        "--confirm-duration",
        "1500ms",
        "--start-rate",
        "790",
        "--precision",
        "3%",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let (status, stderr) = run_coordbench(&argv, dir.path(), Duration::from_secs(120));
    assert!(status.success(), "{stderr}");
    let c = capacity_json(&out);
    assert_eq!(c["complete"], true);
    assert_eq!(c["config"]["null_service"]["capacity_ops_s"], 800.0);
    let found = c["max_rate_ops_s"].as_f64().expect("a max rate");
    assert!(
        (found - 800.0).abs() / 800.0 <= 0.05,
        "found {found} ops/s, expected 800 within 5%"
    );
    let probes = c["probes"].as_array().unwrap();
    assert!(
        probes.iter().any(|p| p["passed"] == false),
        "some window failed"
    );
    assert!(probes
        .iter()
        .any(|p| p["kind"] == "confirm" && p["passed"] == true));
    for p in probes {
        assert!(out
            .join(p["dir"].as_str().unwrap())
            .join("run.json")
            .exists());
        if p["passed"] == false {
            let missed = p["failed"].as_array().unwrap();
            let named = |m: &serde_json::Value| {
                let m = m.as_str().unwrap();
                m.starts_with("p50<40ms (measured") || m.starts_with("rate (of")
            };
            assert!(!missed.is_empty() && missed.iter().all(named), "{p}");
            // A loaded machine may saturate the generator in a window; it says so.
            let saturated = p["generator_saturated"] == true;
            let limit = if saturated { "generator" } else { "target" };
            assert_eq!(p["limited_by"], limit, "{p}");
        }
    }
    let row = summary_row(&out.join("summary.csv"));
    assert_eq!(
        row["max_rate_ops_s"].parse::<f64>().unwrap().round(),
        found.round()
    );
    assert_eq!(row["probes"].split(';').count(), probes.len());
    assert_eq!(row["slo"], "p50<40ms");
}

/// A short search on one Raft member: a window after a passed one on the same member and
/// after a failed one on a fresh member (the pids in the windows' run.json), capacity.json
/// and summary.csv written, every member gone afterwards.
#[test]
fn capacity_on_raft_reports_a_max_rate_and_every_window() {
    let _shared = ALONE.read().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap");
    let argv = [
        "capacity",
        "--target",
        "raft",
        "--workload",
        "kv-put",
        "--cluster-size",
        "1",
        "--disk",
        "tmpfs",
        "--slo",
        "p99<200ms",
        "--slo",
        "errors<1%",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--fresh-warmup",
        "400ms",
        "--confirm-duration",
        "2s",
        "--start-rate",
        "100",
        "--max-rate",
        "200",
        "--clients",
        "8",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let (status, stderr) = run_coordbench(&argv, dir.path(), Duration::from_secs(90));
    assert!(status.success(), "{stderr}");
    let c = capacity_json(&out);
    assert_eq!(c["complete"], true);
    let probes = c["probes"].as_array().unwrap();
    assert_eq!(probes[0]["rate"], 100.0, "the first window at --start-rate");
    let last = probes.last().unwrap();
    assert_eq!(last["kind"], "confirm");
    let found = c["max_rate_ops_s"].as_f64().expect("a max rate");
    assert_eq!(
        (last["rate"].as_f64(), last["passed"].as_bool()),
        (Some(found), Some(true))
    );
    assert!(found <= 200.0, "never above --max-rate: {found}");
    let pids: Vec<u64> = probes
        .iter()
        .map(|p| {
            let run = common::run_json(&out.join(p["dir"].as_str().unwrap()));
            assert_eq!(run["complete"], true);
            run["cluster"]["members"][0]["pid"].as_u64().unwrap()
        })
        .collect();
    // The fresh-cluster rule (src/capacity/settle.rs): a window that passed leaves its cluster
    // to the next; one that failed (a loaded runner can fail even these) gets a fresh one,
    // whose window warms up for --fresh-warmup.
    let warmups: Vec<f64> = probes
        .iter()
        .map(|p| {
            let run = common::run_json(&out.join(p["dir"].as_str().unwrap()));
            run["config"]["warmup_s"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(warmups[0], 0.4, "{warmups:?}");
    for i in 1..probes.len() {
        let fresh = pids[i] != pids[i - 1];
        let before_passed = probes[i - 1]["passed"].as_bool().unwrap();
        assert_eq!(
            fresh, !before_passed,
            "window {i}: a fresh cluster exactly after a failed window: {pids:?} {probes:?}"
        );
        assert_eq!(warmups[i], if fresh { 0.4 } else { 0.2 }, "{warmups:?}");
    }
    let started: Vec<u32> = pids.iter().map(|p| *p as u32).collect();
    assert_gone(&started);
    let at_max = &c["at_max_rate"];
    assert!(
        at_max["throughput_ops_s"].as_f64().unwrap() > 0.75 * found,
        "{at_max}"
    );
    let row = summary_row(&out.join("summary.csv"));
    assert_eq!(row["target"], "raft");
    assert_eq!(row["slo"], "p99<200ms and errors<1%");
}

/// Every preloaded key is there with its value; held watchers and sessions open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The guard only keeps the null search from running meanwhile; no task here takes it.
#[allow(clippy::await_holding_lock)]
async fn preload_writes_every_key_and_holds_watchers_and_sessions() {
    let _shared = ALONE.read().unwrap_or_else(|p| p.into_inner());
    let target = start_target(TargetKind::Raft, 1).await;
    let batches = AtomicUsize::new(0);
    let written = AtomicUsize::new(0);
    let on_batch = |n: usize| {
        batches.fetch_add(1, Ordering::Relaxed);
        written.fetch_add(n, Ordering::Relaxed);
    };
    let keys = 2_345;
    let value = Arc::new(vec![b'v'; 100]);
    fill_keys(&target.coordinator, 0..keys, value, PRELOAD, &on_batch)
        .await
        .unwrap();
    assert_eq!(written.load(Ordering::Relaxed), keys);
    assert_eq!(
        batches.load(Ordering::Relaxed),
        keys.div_ceil(PRELOAD.batch)
    );
    let options = SessionOptions {
        ttl: Duration::from_secs(10),
    };
    let mut session = target.coordinator.open_session(0, &options).await.unwrap();
    for i in 0..keys {
        let got = session
            .get(&key_name(i), Consistency::Serializable)
            .await
            .unwrap();
        assert_eq!(got.as_deref(), Some(&[b'v'; 100][..]), "key {i}");
    }
    assert_eq!(
        session
            .get(&key_name(keys), Consistency::Serializable)
            .await
            .unwrap(),
        None
    );
    session.close().await.unwrap();
    let held = Held::open(&target.coordinator, 150, keys, 3).await.unwrap();
    held.close(Duration::from_secs(5)).await;
    target.stop();
}

/// The command line: a preloaded kv-get run reads the preloaded keys (no errors, every
/// read finds its key), and records what it preloaded.
#[test]
fn a_run_preloads_before_its_window() {
    let _shared = ALONE.read().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let argv = [
        "run",
        "--target",
        "raft",
        "--workload",
        "kv-get",
        "--cluster-size",
        "1",
        "--disk",
        "tmpfs",
        "--preload-keys",
        "3000",
        "--preload-watchers",
        "120",
        "--preload-sessions",
        "4",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--clients",
        "4",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let (status, stderr) = run_coordbench(&argv, dir.path(), Duration::from_secs(60));
    assert!(status.success(), "{stderr}");
    let row = summary_row(&out.join("summary.csv"));
    assert_eq!(row["preload_keys"], "3000");
    assert_eq!(row["preload_watchers"], "120");
    assert_eq!(row["preload_sessions"], "4");
    assert_eq!(row["errors"], "0");
    assert!(row["ops"].parse::<u64>().unwrap() > 0);
    assert_eq!(common::run_json(&out)["config"]["keys"], 3000);
}

/// Bad objectives and options: one line naming what to fix, exit 2, nothing started.
#[test]
fn bad_objectives_and_options_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, words) in [
        (
            vec!["--slo", "p99<1Oms"],
            "--slo 'p99<1Oms': column 5: '1Oms' is not a latency",
        ),
        (vec!["--slo", "p99>10ms"], "column 4: expected < or <="),
        (
            vec!["--slo", "p99<10ms", "--rate", "100"],
            "capacity cannot take --rate",
        ),
        (
            vec!["--slo", "p99<10ms", "--ops", "10"],
            "capacity cannot take --ops",
        ),
        (
            vec!["--slo", "p99<10ms", "--workload", "election"],
            "capacity needs a workload with a rate",
        ),
        (
            vec!["--slo", "p99<10ms", "--service-time", "1ms"],
            "apply only to --target null",
        ),
        (vec![], "--slo"),
    ] {
        let mut argv = vec!["capacity", "--target", "raft"];
        argv.extend(extra.iter().copied());
        if !argv.contains(&"--workload") {
            argv.extend(["--workload", "kv-put"]);
        }
        let (status, stderr) = run_coordbench(&argv, dir.path(), Duration::from_secs(20));
        assert_eq!(status.code(), Some(2), "{argv:?}: {stderr}");
        assert!(stderr.contains(words), "{argv:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    let spec = dir.path().join("cap.toml");
    std::fs::write(
        &spec,
        "targets = [\"null\"]\nworkload = \"kv-put\"\n\n[capacity]\nslo = [\"p99<1Oms\"]\n",
    )
    .unwrap();
    let (status, stderr) = run_coordbench(
        &["sweep", spec.to_str().unwrap()],
        dir.path(),
        Duration::from_secs(20),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cap.toml:4: capacity:") && stderr.contains("column 5"),
        "{stderr}"
    );
    assert!(!dir.path().join("results").exists(), "nothing ran");
}

/// The capacity report on a hand-made capacity sweep: the max rate per target and the
/// "what N× the load would need" paragraph, worked out from the planner's own load and keys
/// (`report --load --keys`) with the cost per key fitted in a hand-made state sweep
/// (`--state`); a bad load, or a `--state` with nothing to fit, is refused in one line.
#[test]
fn the_report_works_out_what_n_times_the_planners_load_needs() {
    let dir = tempfile::tempdir().unwrap();
    let (searches, states) = (dir.path().join("capacity"), dir.path().join("state"));
    let mut csv = String::from(
        "target,workload,cluster_size,disk,slo,max_rate_ops_s,limited_by,probes,throughput_ops_s,p99_us,complete\n",
    );
    for (target, size, rate) in [("raft", 3, 5000), ("raft", 5, 4000), ("etcd", 3, 2000)] {
        csv.push_str(&format!(
            "{target},kv-put,{size},disk,p99<20ms,{rate},target,{rate}:pass,{rate},9000,true\n"
        ));
    }
    std::fs::create_dir_all(&searches).unwrap();
    std::fs::write(searches.join("summary.csv"), csv).unwrap();
    // 40 MiB and 600 B per key.
    let mut csv = String::from(
        "target,workload,cluster_size,preload_keys,server_peak_rss_mb,throughput_ops_s,complete\n",
    );
    for keys in [1_000u64, 10_000, 100_000] {
        let mb = 40.0 + keys as f64 * 600.0 / (1024.0 * 1024.0);
        csv.push_str(&format!("raft,kv-get,1,{keys},{mb},500,true\n"));
    }
    std::fs::create_dir_all(&states).unwrap();
    std::fs::write(states.join("summary.csv"), csv).unwrap();
    let (path, state) = (searches.to_str().unwrap(), states.to_str().unwrap());
    let argv = [
        "report", path, "--load", "3000", "--keys", "50000", "--state", state,
    ];
    let (status, stderr) = run_coordbench(&argv, dir.path(), Duration::from_secs(60));
    assert!(status.success(), "{stderr}");
    let report = std::fs::read_to_string(searches.join("report.md")).unwrap();
    // 3,000/s on groups that take 5,000/s: 2× needs 2 groups, each member holding the
    // 50,000 keys (40 MiB + 28.6 MiB); 5× needs 3, each holding 5/3 of them.
    for line in [
        "| raft | 3 | disk | p99<20ms | 5000 | target | 9.00 | 1 |",
        "| raft | 3 | disk | 5000/s | 3000/s | 2 group(s), ≈ 69 MB per member | 3 group(s), ≈ 88 MB per member | 6 group(s), ≈ 88 MB per member |",
        "| etcd | 3 | disk | 2000/s | 3000/s | 3 group(s) | 8 group(s) | 15 group(s) |",
        "- etcd: no fitted cost per key (run a state sweep).",
        "R is the load given (`--load`)",
    ] {
        assert!(report.contains(line), "{line}\n{report}");
    }
    for (extra, words) in [
        (["--load", "0"], "must be a number of operations per second"),
        (
            ["--state", path],
            "no cost per key, watcher or session can be fitted",
        ),
    ] {
        let mut argv = vec!["report", path];
        argv.extend(extra);
        let (status, stderr) = run_coordbench(&argv, dir.path(), Duration::from_secs(20));
        assert_eq!(status.code(), Some(2), "{argv:?}: {stderr}");
        assert!(stderr.contains(words), "{argv:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}
