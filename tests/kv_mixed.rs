//! The kv-mixed workload through the `coordbench` binary: on the null target, and against
//! 3-member raft and zab clusters of real `coordbench serve` processes on 127.0.0.1 (short
//! runs, tmpfs). The read share follows --read-ratio within tolerance, ratios 0 and 1 run
//! one kind only, summary.csv has the read_* and write_* columns, latency.hlog carries
//! tagged read and write histograms beside the combined one, and run.json records the
//! election timing asked for and what the members ran with.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// Cluster start, warm-up, window and teardown, with room for a loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(120);

/// Runs kv-mixed with `args` into `out`; returns its summary row.
fn run(out: &Path, args: &[&str]) -> HashMap<String, String> {
    let mut argv = vec![
        "run",
        "--workload",
        "kv-mixed",
        "--warmup",
        "300ms",
        "--quiet",
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    argv.extend_from_slice(args);
    let cwd = out.parent().expect("parent");
    let (status, stderr) = common::run_coordbench(&argv, cwd, RUN_BOUND);
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

/// The share of reads among the successful operations, checking the kinds add up.
fn read_share(row: &HashMap<String, String>) -> f64 {
    let (reads, writes, ops) = (num(row, "read_ops"), num(row, "write_ops"), num(row, "ops"));
    assert_eq!(reads + writes, ops, "{row:?}");
    assert!(ops > 0.0, "{row:?}");
    reads / ops
}

/// latency.hlog's entries: (untagged, tagged read, tagged write).
fn hlog_entries(dir: &Path) -> (usize, usize, usize) {
    let text = std::fs::read_to_string(dir.join("latency.hlog")).expect("latency.hlog");
    let data: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let tagged = |tag: &str| data.iter().filter(|l| l.starts_with(tag)).count();
    let untagged = data
        .iter()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .count();
    (untagged, tagged("Tag=read,"), tagged("Tag=write,"))
}

#[test]
fn null_target_reads_at_the_ratio_and_degenerates_at_zero_and_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let null = ["--target", "null", "--duration", "1s", "--rate", "20000"];
    let mixed = dir.path().join("mixed");
    let row = run(&mixed, &[&null[..], &["--read-ratio", "0.7"]].concat());
    let share = read_share(&row);
    assert!((share - 0.7).abs() < 0.02, "read share {share}: {row:?}");
    assert_eq!(num(&row, "read_ratio"), 0.7);
    for column in [
        "read_p50_us",
        "read_p99_us",
        "write_p50_us",
        "write_p99_us",
        "read_errors",
        "write_errors",
    ] {
        assert!(num(&row, column) >= 0.0, "{column}: {row:?}");
    }
    assert!(num(&row, "read_p50_us") <= num(&row, "read_p99_us"));
    let (untagged, reads, writes) = hlog_entries(&mixed);
    assert!(untagged > 0 && reads == untagged && writes == untagged);

    let writes_only = run(
        &dir.path().join("zero"),
        &[&null[..], &["--read-ratio", "0"]].concat(),
    );
    assert_eq!(read_share(&writes_only), 0.0);
    assert_eq!(writes_only["read_p50_us"], "", "no reads, no read latency");
    let reads_only = run(
        &dir.path().join("one"),
        &[&null[..], &["--read-ratio", "1"]].concat(),
    );
    assert_eq!(read_share(&reads_only), 1.0);
    assert_eq!(reads_only["write_p99_us"], "");

    // Other workloads keep their columns empty and their latency.hlog untagged.
    let put = dir.path().join("put");
    let mut argv = vec!["run", "--workload", "kv-put", "--quiet", "--out"];
    argv.push(put.to_str().expect("utf-8"));
    argv.extend_from_slice(&null);
    let (status, stderr) = common::run_coordbench(&argv, dir.path(), RUN_BOUND);
    assert!(status.success(), "{stderr}");
    let row = common::summary_row(&put.join("summary.csv"));
    assert_eq!(
        (row["read_ops"].as_str(), row["read_ratio"].as_str()),
        ("", "")
    );
    let (_, reads, writes) = hlog_entries(&put);
    assert_eq!((reads, writes), (0, 0));
}

/// A short kv-mixed run on a 3-member `target` with a non-default election timing;
/// returns the row and run.json.
fn engine_run(target: &str, consistency: &str) -> (HashMap<String, String>, serde_json::Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let row = run(
        &out,
        &[
            "--target",
            target,
            "--cluster-size",
            "3",
            "--disk",
            "tmpfs",
            "--clients",
            "8",
            "--duration",
            "2s",
            "--read-ratio",
            "0.7",
            "--consistency",
            consistency,
            "--election-timeout",
            "150-300",
            "--heartbeat",
            "15ms",
        ],
    );
    let text = std::fs::read_to_string(out.join("run.json")).expect("run.json");
    (row, serde_json::from_str(&text).expect("run.json parses"))
}

fn assert_mixed(target: &str, row: &HashMap<String, String>) {
    assert_eq!(num(row, "errors"), 0.0, "{target}: {row:?}");
    let share = read_share(row);
    // Thousands of operations: the share's standard deviation is about 0.01.
    assert!((share - 0.7).abs() < 0.05, "{target}: read share {share}");
    assert!(num(row, "read_p99_us") > 0.0 && num(row, "write_p99_us") > 0.0);
}

#[test]
fn raft_runs_kv_mixed_with_the_election_timing_recorded() {
    let (row, record) = engine_run("raft", "linearizable");
    assert_mixed("raft", &row);
    assert_eq!(record["config"]["election_timeout"], "150-300");
    assert_eq!(record["config"]["heartbeat_ms"], 15);
    let effective = &record["cluster"]["election_timing"];
    assert_eq!(effective["election_timeout_min_ms"], 150, "{effective}");
    assert_eq!(effective["election_timeout_max_ms"], 300, "{effective}");
    assert_eq!(effective["heartbeat_ms"], 15, "{effective}");
    assert!(effective["note"].is_null(), "{effective}");
}

#[test]
fn zab_runs_kv_mixed_with_the_election_timing_recorded() {
    let (row, record) = engine_run("zab", "serializable");
    assert_mixed("zab", &row);
    assert_eq!(record["config"]["consistency"], "serializable");
    let effective = &record["cluster"]["election_timing"];
    assert_eq!(effective["election_timeout_min_ms"], 150, "{effective}");
    assert!(
        effective["note"]
            .as_str()
            .is_some_and(|n| n.contains("initLimit")),
        "{effective}"
    );
}
