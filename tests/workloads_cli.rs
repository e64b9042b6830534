//! The election, discovery and config-watch workloads and the lock herd figures, run through
//! the `coordbench` binary for ~2 s each against a single-member etcd, ZooKeeper, raft and
//! zab started per run on 127.0.0.1 (tmpfs). Assertions are on the checkers and the herd
//! columns of summary.csv: no split brain, no missed version on the etcd API, every
//! membership change propagated, herd-free notifications per release at most 1.2 and naive
//! ones close to the number of waiters.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Start, 0.5 s warm-up, 2 s window, catching up and teardown, with room for a loaded
/// machine.
const RUN_BOUND: Duration = Duration::from_secs(90);

/// Runs one workload against a fresh single-member `target`; returns its summary row.
fn run(target: &str, args: &[&str]) -> HashMap<String, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let mut argv = vec![
        "run",
        "--target",
        target,
        "--cluster-size",
        "1",
        "--disk",
        "tmpfs",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--quiet",
        "--out",
    ];
    argv.push(out.to_str().expect("utf-8 path"));
    argv.extend_from_slice(args);
    let (status, stderr) = common::run_coordbench(&argv, dir.path(), RUN_BOUND);
    assert!(
        status.success(),
        "coordbench {argv:?}: {status:?}\n{stderr}"
    );
    common::summary_row(&out.join("summary.csv"))
}

fn num(row: &HashMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column} is not a number: {:?}", row[column]))
}

/// Every workload on one target. `every_version`: the target's watches deliver every
/// version (etcd API), so none may be missed; ZooKeeper's one-shot watches may coalesce.
fn workloads_on(target: &str, every_version: bool) {
    let started = Instant::now();
    let clients = "8";
    // A 10 ms hold lets every naive waiter re-arm its watch before the next release (with
    // no hold, waiters still retrying miss releases and learn of them by reading).
    let lock = ["--workload", "lock", "--clients", clients, "--hold", "10ms"];
    let naive = run(target, &[&lock[..], &["--recipe", "naive"]].concat());
    let herd_free = run(target, &lock);
    for row in [&naive, &herd_free] {
        assert_eq!(num(row, "violations"), 0.0, "{target}: {row:?}");
        assert!(num(row, "ops") > 0.0, "{target}: {row:?}");
    }
    let waiters = num(&naive, "waiters");
    let herd = num(&naive, "notifications_per_release");
    assert!(
        waiters >= 5.0,
        "{target}: only {waiters} waiters per release with 8 clients"
    );
    assert!(
        herd >= 0.6 * waiters && herd <= 2.5 * waiters,
        "{target}: naive lock: {herd} notifications per release, {waiters} waiters"
    );
    let herd_free_notifications = num(&herd_free, "notifications_per_release");
    assert!(
        herd_free_notifications <= 1.2,
        "{target}: herd-free lock: {herd_free_notifications} notifications per release"
    );

    let election = run(
        target,
        &["--workload", "election", "--clients", "4", "--term", "20ms"],
    );
    assert!(num(&election, "ops") >= 5.0, "{target}: {election:?}");
    assert_eq!(
        num(&election, "split_brains"),
        0.0,
        "{target}: {election:?}"
    );
    assert!(
        num(&election, "handover_p50_us") > 0.0,
        "{target}: {election:?}"
    );
    assert!(
        num(&election, "notifications_per_release") <= 1.2,
        "{target}: {election:?}"
    );
    assert!(
        !election["observer_p99_us"].is_empty(),
        "{target}: no observer latency"
    );

    let discovery = run(
        target,
        &[
            "--workload",
            "discovery",
            "--instances",
            "4",
            "--churn",
            "20",
            "--watchers",
            "3",
        ],
    );
    assert!(num(&discovery, "ops") >= 20.0, "{target}: {discovery:?}");
    assert_eq!(
        num(&discovery, "unpropagated"),
        0.0,
        "{target}: {discovery:?}"
    );
    assert!(
        num(&discovery, "propagation_max_us") > 0.0,
        "{target}: {discovery:?}"
    );
    assert!(
        num(&discovery, "requests_per_change") >= 1.0,
        "{target}: {discovery:?}"
    );

    let watch = run(
        target,
        &[
            "--workload",
            "config-watch",
            "--rate",
            "20",
            "--watchers",
            "200",
            "--conns",
            "4",
        ],
    );
    assert!(num(&watch, "ops") >= 20.0, "{target}: {watch:?}");
    assert!(
        num(&watch, "updates_delivered_per_s") >= 10.0,
        "{target}: {watch:?}"
    );
    assert!(
        !watch["notify_last_p99_us"].is_empty(),
        "{target}: {watch:?}"
    );
    // One-shot watches may coalesce, but every watcher ends on the last version.
    assert_eq!(num(&watch, "missed_versions"), 0.0, "{target}: {watch:?}");
    if every_version {
        assert_eq!(
            num(&watch, "coalesced_versions"),
            0.0,
            "{target}: {watch:?}"
        );
    }
    eprintln!("{target}: every workload in {:?}", started.elapsed());
}

#[test]
fn workloads_on_etcd() {
    workloads_on("etcd", true);
}

#[test]
fn workloads_on_raft() {
    workloads_on("raft", true);
}

#[test]
fn workloads_on_zookeeper() {
    workloads_on("zookeeper", false);
}

#[test]
fn workloads_on_zab() {
    workloads_on("zab", false);
}
