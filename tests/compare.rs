//! `coordbench compare` on hand-made result directories, where known samples give known
//! verdicts: a significant drop, a significant improvement, no difference ("~"), too few
//! repeats ("no verdict"), runs paired by configuration across sweeps, a tail regression in
//! the merged latency.hlog that the medians do not show, `--thresholds` (exit 3),
//! `--paired` thresholds judged on a gate side's repeat pairs, every output format, and bad
//! input refused in one line (exit 2).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");

fn coordbench(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("coordbench runs")
}

#[path = "common/output.rs"]
mod output;
use output::describe;

/// One hand-made run: its configuration and the figures its summary.csv holds.
struct FakeRun<'a> {
    target: &'a str,
    disk: &'a str,
    throughput: f64,
    p99_us: u64,
    errors: u64,
    /// Latencies (µs) written to latency.hlog, if any.
    latencies: &'a [(u64, u64)],
}

fn write_run(dir: &Path, run: &FakeRun) {
    std::fs::create_dir_all(dir).unwrap();
    let record = serde_json::json!({
        "schema": "coordbench.run/1",
        "complete": true,
        "config": { "target": run.target, "workload": "kv-put", "disk": run.disk, "clients": 16, "seed": 1 },
        "results": { "errors_by_kind": if run.errors > 0 { serde_json::json!({"timeout": run.errors}) } else { serde_json::json!({}) } },
    });
    std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
    // A 10 s window's operations: enough to support p99 (docs/reference.md).
    let csv = format!(
        "target,workload,disk,ops,throughput_ops_s,p50_us,p99_us,errors,violations,complete\n{},kv-put,{},{},{},{},{},{},0,true\n",
        run.target,
        run.disk,
        (run.throughput * 10.0) as u64,
        run.throughput,
        run.p99_us / 4,
        run.p99_us,
        run.errors
    );
    std::fs::write(dir.join("summary.csv"), csv).unwrap();
    if !run.latencies.is_empty() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for &(value, count) in run.latencies {
            h.record_n(value, count).unwrap();
        }
        let mut out = Vec::new();
        let mut serializer = V2DeflateSerializer::new();
        let mut log = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut out, &mut serializer)
            .unwrap();
        log.write_histogram(&h, Duration::ZERO, Duration::from_secs(1), None)
            .unwrap();
        drop(log);
        std::fs::write(dir.join("latency.hlog"), out).unwrap();
    }
}

/// A directory of repeats: `side/r1`, `side/r2`, ... with the given throughputs.
fn repeats(root: &Path, name: &str, target: &str, throughputs: &[f64]) -> PathBuf {
    let side = root.join(name);
    for (i, t) in throughputs.iter().enumerate() {
        let run = FakeRun {
            target,
            disk: "tmpfs",
            throughput: *t,
            p99_us: 5000,
            errors: 0,
            latencies: &[],
        };
        write_run(&side.join(format!("r{}", i + 1)), &run);
    }
    side
}

fn line_of<'a>(stdout: &'a str, starts: &str) -> &'a str {
    stdout
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(starts))
        .unwrap_or_else(|| panic!("no line starting {starts:?} in\n{stdout}"))
}

#[test]
fn known_samples_give_known_verdicts() {
    let tmp = TempDir::new().unwrap();
    let base = repeats(
        tmp.path(),
        "base",
        "raft",
        &[1000.0, 1010.0, 990.0, 1005.0, 995.0],
    );
    let worse = repeats(
        tmp.path(),
        "worse",
        "raft",
        &[900.0, 905.0, 895.0, 910.0, 890.0],
    );
    let better = repeats(
        tmp.path(),
        "better",
        "raft",
        &[1100.0, 1090.0, 1110.0, 1095.0, 1105.0],
    );
    let same = repeats(
        tmp.path(),
        "same",
        "raft",
        &[1002.0, 992.0, 1008.0, 997.0, 1003.0],
    );
    let one = repeats(tmp.path(), "one", "raft", &[500.0]);

    let verdict = |cand: &Path| {
        let o = coordbench(&["compare", base.to_str().unwrap(), cand.to_str().unwrap()]);
        assert!(o.status.success(), "{}", describe(&o));
        line_of(&String::from_utf8_lossy(&o.stdout), "throughput_ops_s").to_string()
    };
    let w = verdict(&worse);
    assert!(w.ends_with("worse"), "{w}");
    assert!(w.contains("-10.0%"), "{w}");
    assert!(
        w.contains("0.008"),
        "5 vs 5 completely separated: p = 2/252: {w}"
    );
    assert!(verdict(&better).ends_with("better"));
    let s = verdict(&same);
    assert!(s.ends_with('~'), "{s}");
    let n = verdict(&one);
    assert!(
        n.ends_with("no verdict: 5 and 1 repeats, need 3 each"),
        "{n}"
    );
    // Lower is better for latency: equal p99s on both sides are "~".
    let o = coordbench(&["compare", base.to_str().unwrap(), worse.to_str().unwrap()]);
    let p99 = line_of(&String::from_utf8_lossy(&o.stdout), "p99_us").to_string();
    assert!(p99.ends_with('~'), "{p99}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("noisy"));

    // Candidate repeats of 950 operations cannot support p99 (10 must lie beyond it): the
    // missing verdict names that cause, not the number of repeats.
    let short = repeats(tmp.path(), "short", "raft", &[1000.0, 95.0, 96.0]);
    let o = coordbench(&["compare", base.to_str().unwrap(), short.to_str().unwrap()]);
    assert!(o.status.success(), "{}", describe(&o));
    let p99 = line_of(&String::from_utf8_lossy(&o.stdout), "p99_us").to_string();
    assert!(
        p99.ends_with(
            "no verdict: 5 of 5 baseline and 1 of 3 candidate repeats had enough operations \
             beyond this percentile, need 3 each (longer windows)"
        ),
        "{p99}"
    );

    // Repeats 30% apart are named too noisy to judge, whatever the verdict.
    let wild = repeats(tmp.path(), "wild", "raft", &[800.0, 1040.0, 900.0, 950.0]);
    let o = coordbench(&["compare", base.to_str().unwrap(), wild.to_str().unwrap()]);
    assert!(o.status.success(), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        line_of(&stdout, "noisy:"),
        "noisy: throughput_ops_s: too noisy to judge (candidate repeats ×1.30 > ×1.2)",
        "{stdout}"
    );
}

#[test]
fn sweeps_of_three_repeats_get_a_verdict_per_point_and_one_repeat_gets_none() {
    let tmp = TempDir::new().unwrap();
    // Two sweep-like directories with two targets each; the candidate is slower on zab only.
    let make = |name: &str, repeats: usize, zab_factor: f64| {
        let dir = tmp.path().join(name);
        let mut points = Vec::new();
        for target in ["raft", "zab"] {
            for r in 1..=repeats {
                let point = format!("{target}-r{r}");
                let factor = if target == "zab" { zab_factor } else { 1.0 };
                let throughput = (1000.0 + r as f64 * 7.0) * factor;
                let run = FakeRun {
                    target,
                    disk: "tmpfs",
                    throughput,
                    p99_us: 4000 + r as u64,
                    errors: 0,
                    latencies: &[],
                };
                write_run(&dir.join(&point), &run);
                points.push(serde_json::json!({ "name": point, "target": target, "repeat": r, "status": "complete" }));
            }
        }
        let record = serde_json::json!({ "schema": "coordbench.sweep/1", "complete": true, "points": points });
        std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
        dir
    };
    let a = make("a", 3, 1.0);
    let b = make("b", 3, 0.8);
    let o = coordbench(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(o.status.success(), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let sections: Vec<&str> = stdout.split("\nraft kv-put").collect();
    assert_eq!(sections.len(), 2, "{stdout}");
    let (raft, zab) = sections[1]
        .split_once("\nzab kv-put")
        .expect("a zab section");
    assert!(line_of(raft, "throughput_ops_s").ends_with('~'), "{raft}");
    let z = line_of(zab, "throughput_ops_s");
    assert!(
        z.ends_with("worse") && z.contains("0.100"),
        "3 vs 3 separated: p = 0.1: {z}"
    );
    assert!(line_of(zab, "p99_us").ends_with('~'));

    let a1 = make("a1", 1, 1.0);
    let b1 = make("b1", 1, 0.8);
    let o = coordbench(&["compare", a1.to_str().unwrap(), b1.to_str().unwrap()]);
    assert!(o.status.success(), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("throughput_ops_s"))
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines
            .iter()
            .all(|l| l.ends_with("no verdict: 1 repeat, need 3")),
        "{stdout}"
    );
    assert!(!stdout.contains("worse"), "{stdout}");
}

#[test]
fn a_tail_regression_shows_in_the_distribution_when_the_medians_agree() {
    let tmp = TempDir::new().unwrap();
    let side = |name: &str, tail_us: u64| {
        let dir = tmp.path().join(name);
        for r in 1..=4u64 {
            let latencies = [(1000 + r, 9_900), (tail_us + r * 10, 100)];
            let run = FakeRun {
                target: "zab",
                disk: "tmpfs",
                throughput: 1000.0 + r as f64,
                p99_us: 2000,
                errors: 0,
                latencies: &latencies,
            };
            write_run(&dir.join(format!("r{r}")), &run);
        }
        dir
    };
    let base = side("base", 2_000);
    let cand = side("cand", 50_000);
    let o = coordbench(&["compare", base.to_str().unwrap(), cand.to_str().unwrap()]);
    assert!(o.status.success(), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(line_of(&stdout, "p50 ").ends_with('~'), "{stdout}");
    let tail = line_of(&stdout, "p99.9 ");
    assert!(tail.ends_with("worse"), "{stdout}");
    assert!(line_of(&stdout, "max ").ends_with("worse"), "{stdout}");
    // 4 repeats of 10,000 operations: 40,000 support p99.9 but not p99.99 or beyond.
    assert!(
        stdout.contains(
            "baseline n=40,000, candidate n=40,000; p99.99, p99.999 withheld: fewer than 10"
        ),
        "{stdout}"
    );
    assert!(
        !stdout
            .lines()
            .any(|l| l.trim_start().starts_with("p99.99 ")),
        "{stdout}"
    );
}

#[test]
fn the_sides_difference_is_named_and_thresholds_fail_with_exit_3() {
    let tmp = TempDir::new().unwrap();
    let side = |name: &str, disk: &str, throughput: f64, errors: u64| {
        let dir = tmp.path().join(name);
        for r in 1..=4u64 {
            let run = FakeRun {
                target: "raft",
                disk,
                throughput: throughput + r as f64,
                p99_us: 3000 + r,
                errors,
                latencies: &[],
            };
            write_run(&dir.join(format!("r{r}")), &run);
        }
        dir
    };
    let base = side("tmpfs", "tmpfs", 5000.0, 0);
    let cand = side("hdd", "hdd", 900.0, 2);
    let thresholds = tmp.path().join("t.toml");
    std::fs::write(
        &thresholds,
        "[thresholds]\nthroughput_ops_s = { max_drop = \"5%\" }\np99_us = { max_rise = \"10%\" }\n\"errors.timeout\" = { max = 0 }\n",
    )
    .unwrap();
    let args = [
        "compare",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--thresholds",
        thresholds.to_str().unwrap(),
    ];
    let o = coordbench(&args);
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("differs:   disk tmpfs -> hdd"), "{stdout}");
    assert!(
        line_of(&stdout, "✗ throughput_ops_s max_drop 5%").contains("raft kv-put"),
        "{stdout}"
    );
    assert!(
        line_of(&stdout, "✓ p99_us max_rise 10%").contains("p=0.500 > 0.050"),
        "{stdout}"
    );
    assert!(
        line_of(&stdout, "✗ errors.timeout max 0").contains("4 of 4 repeats above"),
        "{stdout}"
    );

    let mut json_args = args.to_vec();
    json_args.extend(["--format", "json"]);
    let o = coordbench(&json_args);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON output parses");
    let figures = &v["comparison"]["points"][0]["figures"];
    let throughput = figures
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == "throughput_ops_s")
        .unwrap();
    assert_eq!(throughput["verdict"], "worse");
    assert!(
        throughput["interval"]["high"].as_f64().unwrap() < 0.2,
        "{throughput}"
    );
    assert_eq!(v["comparison"]["alpha"], 0.1);

    let o = coordbench(&[
        "compare",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--format",
        "markdown",
    ]);
    assert!(o.status.success());
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("| throughput_ops_s"), "{md}");
    assert!(md.contains("### raft kv-put"), "{md}");
}

/// A gate side as `coordbench gate` writes it: a sweep run.json listing runs `raft-rN` with
/// their repeat index, and the run directories.
fn gate_side(root: &Path, name: &str, throughputs: &[f64]) -> PathBuf {
    let side = root.join(name);
    let mut points = Vec::new();
    for (i, t) in throughputs.iter().enumerate() {
        let run = FakeRun {
            target: "raft",
            disk: "tmpfs",
            throughput: *t,
            p99_us: 5000,
            errors: 0,
            latencies: &[],
        };
        let point = format!("raft-r{}", i + 1);
        write_run(&side.join(&point), &run);
        points.push(serde_json::json!({ "name": point, "target": "raft", "repeat": i + 1 }));
    }
    let record = serde_json::json!({ "schema": "coordbench.sweep/1", "points": points });
    std::fs::write(side.join("run.json"), record.to_string()).unwrap();
    side
}

#[test]
fn paired_thresholds_use_the_repeats_pairs() {
    // The level drifts ±30% from pair to pair; the candidate is 12% below its partner in
    // every pair. Unpaired, the sides overlap: no significant drop. Paired, every pair's
    // ratio is below 0.95: p = 2^-8, the one relative check breaches.
    let levels = [1000.0, 1300.0, 760.0, 1150.0, 900.0, 1250.0, 800.0, 1050.0];
    let wobble = [0.0, 0.01, -0.01, 0.005, -0.005, 0.0, 0.008, -0.008];
    let cand: Vec<f64> = levels
        .iter()
        .zip(wobble)
        .map(|(b, w)| b * (0.88 + w))
        .collect();
    let tmp = TempDir::new().unwrap();
    let base = gate_side(tmp.path(), "baseline", &levels);
    let cand = gate_side(tmp.path(), "candidate", &cand);
    let thresholds = tmp.path().join("t.toml");
    std::fs::write(
        &thresholds,
        "[thresholds]\nthroughput_ops_s = { max_drop = \"5%\" }\n",
    )
    .unwrap();
    let compare = |base: &str, cand: &str, extra: &[&str]| {
        let mut args = vec![
            "compare",
            base,
            cand,
            "--thresholds",
            thresholds.to_str().unwrap(),
        ];
        args.extend(extra);
        coordbench(&args)
    };
    let (b, c) = (base.to_str().unwrap(), cand.to_str().unwrap());
    let o = compare(b, c, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        line_of(&stdout, "✓ throughput_ops_s max_drop 5%")
            .ends_with("(Mann-Whitney U, unpaired, 8 vs 8 repeats)"),
        "{stdout}"
    );
    let o = compare(b, c, &["--paired"]);
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = line_of(&stdout, "✗ throughput_ops_s max_drop 5%");
    assert!(line.contains("p=0.0039 <= 0.050"), "{stdout}");
    assert!(
        line.ends_with("(paired Wilcoxon signed-rank, 8 pairs)"),
        "{stdout}"
    );

    // Run directories named one by one pair too: their repeat is in the side's run.json.
    let runs = |side: &Path, repeats: &[usize]| -> String {
        let dirs: Vec<String> = repeats
            .iter()
            .map(|r| side.join(format!("raft-r{r}")).display().to_string())
            .collect();
        dirs.join(",")
    };
    let picked = [8, 2, 3, 5, 6, 7, 1];
    let o = compare(
        &runs(&base, &picked),
        &runs(&cand, &picked),
        &["--paired", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["thresholds"][0]["test"],
        "paired Wilcoxon signed-rank, 7 pairs"
    );
    let pairs = &v["comparison"]["points"][0]["figures"][0]["pairs"];
    assert_eq!(pairs[0][0], 1000.0, "pairs in repeat order: {pairs}");
    assert_eq!(pairs[0][1], 880.0, "{pairs}");
}

#[test]
fn bad_input_is_refused_in_one_line() {
    let tmp = TempDir::new().unwrap();
    let base = repeats(tmp.path(), "base", "raft", &[1.0, 2.0, 3.0]);
    let other = repeats(tmp.path(), "other", "zab", &[1.0, 2.0, 3.0]);
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let bad_thresholds = tmp.path().join("bad.toml");
    std::fs::write(
        &bad_thresholds,
        "[thresholds]\nthroughput_ops_s = { max_drop = \"5%\" }\np99_us = { max_rise = 10 }\n",
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "compare".into(),
                base.display().to_string(),
                tmp.path().join("nope").display().to_string(),
            ],
            "no such directory",
        ),
        (
            vec![
                "compare".into(),
                base.display().to_string(),
                empty.display().to_string(),
            ],
            "holds no coordbench run",
        ),
        (
            vec![
                "compare".into(),
                base.display().to_string(),
                other.display().to_string(),
                "--alpha".into(),
                "2".into(),
            ],
            "between 0 and 1",
        ),
        (
            vec![
                "compare".into(),
                base.display().to_string(),
                other.display().to_string(),
                "--thresholds".into(),
                bad_thresholds.display().to_string(),
            ],
            "bad.toml:3: thresholds.p99_us.max_rise: write a percentage",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = coordbench(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", describe(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    // Different targets on each side still pair up: the target is the sides' difference.
    let o = coordbench(&["compare", base.to_str().unwrap(), other.to_str().unwrap()]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("target raft -> zab"));
}
