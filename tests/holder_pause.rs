//! Holder pauses on every real target, through the `coordbench` binary: lock holders that
//! freeze past their session's TTL lose the lock to another client, resume and write to the
//! resource the lock protects. Unprotected (`--protect none`) the resource takes those stale
//! writes; fenced by tokens (`token`) or by the lock itself in the service (`txn`) it must
//! reject every one of them. Each mode runs on a fresh single-member cluster on 127.0.0.1
//! (tmpfs) with every acquisition pausing, so a few seconds show several unsafe sections.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

/// Start, the window, finishing paused holders and teardown, with room for a loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(90);

/// The fencing figures of one run, as run.json and summary.csv report them.
#[derive(Debug)]
struct Figures {
    unsafe_sections: u64,
    accepted: u64,
    rejected: u64,
    lost_locks: u64,
    violations: u64,
}

/// Runs the lock workload on a fresh single-member `target` with 3 clients on one lock,
/// every holder pausing for `pause` past `ttl`, under `protect`.
fn run(target: &str, ttl: &str, pause: &str, duration: &str, protect: &str) -> Figures {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let argv = [
        "run",
        "--target",
        target,
        "--cluster-size",
        "1",
        "--disk",
        "tmpfs",
        "--workload",
        "lock",
        "--clients",
        "3",
        "--ttl",
        ttl,
        "--holder-pause",
        pause,
        "--holder-pause-ratio",
        "1",
        "--protect",
        protect,
        "--warmup",
        "0s",
        "--duration",
        duration,
        "--quiet",
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    let (status, stderr) = common::run_coordbench(&argv, dir.path(), RUN_BOUND);
    assert!(
        status.success(),
        "coordbench {argv:?}: {status:?}\n{stderr}"
    );
    figures(&out, target, protect)
}

/// Reads the figures from run.json and checks summary.csv says the same.
fn figures(out: &Path, target: &str, protect: &str) -> Figures {
    let text = std::fs::read_to_string(out.join("run.json")).expect("run.json");
    let record: serde_json::Value = serde_json::from_str(&text).expect("run.json parses");
    let config = &record["config"];
    assert_eq!(config["protect"], protect, "{target}: {config}");
    assert_eq!(config["holder_pause_ratio"], 1.0, "{target}: {config}");
    assert!(
        config["holder_pause_ms"].as_f64().unwrap_or(0.0) > 0.0,
        "{target}"
    );
    let results = &record["results"];
    let f = &results["holder_pauses"];
    let n = |v: &serde_json::Value, name: &str| {
        v[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{target} {protect}: no {name} in {v}"))
    };
    let figures = Figures {
        unsafe_sections: n(f, "unsafe_sections"),
        accepted: n(f, "stale_writes_accepted"),
        rejected: n(f, "stale_writes_rejected"),
        lost_locks: n(f, "lost_locks"),
        violations: n(results, "violations"),
    };
    let mut summary = csv::Reader::from_path(out.join("summary.csv")).expect("summary.csv");
    let headers = summary.headers().expect("header").clone();
    let row = summary.records().next().expect("one row").expect("row");
    let column = |name: &str| -> u64 {
        let i = headers.iter().position(|h| h == name).expect(name);
        row[i]
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {:?}", &row[i]))
    };
    assert_eq!(
        (
            column("unsafe_sections"),
            column("stale_writes_accepted"),
            column("stale_writes_rejected"),
            column("lost_locks"),
        ),
        (
            figures.unsafe_sections,
            figures.accepted,
            figures.rejected,
            figures.lost_locks
        ),
        "{target} {protect}: summary.csv and run.json disagree"
    );
    figures
}

/// The three protections on one target.
fn stale_writes_fenced_only_when_protected(target: &str, ttl: &str, pause: &str, duration: &str) {
    let started = Instant::now();
    for protect in ["none", "token", "txn"] {
        let f = run(target, ttl, pause, duration, protect);
        eprintln!("{target} --protect {protect}: {f:?}");
        assert!(f.unsafe_sections > 0, "{target} {protect}: {f:?}");
        assert!(f.lost_locks > 0, "{target} {protect}: {f:?}");
        // The overlaps of paused sections are mutual exclusion lost from the clients' view,
        // whatever the resource then does with their writes.
        assert!(f.violations > 0, "{target} {protect}: {f:?}");
        if protect == "none" {
            assert!(f.accepted > 0, "{target} {protect}: {f:?}");
        } else {
            assert_eq!(f.accepted, 0, "{target} {protect}: {f:?}");
            assert!(f.rejected > 0, "{target} {protect}: {f:?}");
        }
    }
    eprintln!("{target}: three protections in {:?}", started.elapsed());
}

// etcd's shortest lease is 2 s with the launcher's 1 s election timeout (1.5 election
// timeouts, rounded up to whole seconds); the Raft engine follows etcd's rule. A pause of
// twice the TTL leaves the lease's expiry and the handover time to happen on a loaded
// machine, and 7 s fit two pauses that are overtaken.

#[test]
fn holder_pauses_on_etcd() {
    stale_writes_fenced_only_when_protected("etcd", "2s", "4s", "7s");
}

#[test]
fn holder_pauses_on_raft() {
    stale_writes_fenced_only_when_protected("raft", "2s", "4s", "7s");
}

// ZooKeeper's started ensembles follow the TTL (tickTime = TTL/5), so shorter runs do.

#[test]
fn holder_pauses_on_zookeeper() {
    stale_writes_fenced_only_when_protected("zookeeper", "1s", "2s", "4s");
}

#[test]
fn holder_pauses_on_zab() {
    stale_writes_fenced_only_when_protected("zab", "1s", "2s", "4s");
}
