//! End-to-end tests of `coordbench gate`: quick gates on 1-member raft clusters on
//! 127.0.0.1. Same build and options on both sides passes (exit 0), judged on its pairs by
//! the paired signed-rank test; a candidate on an emulated hdd against a tmpfs baseline
//! breaches throughput and p50 (exit 3), judged unpaired (too few pairs for its
//! false-alarm budget), and gate.md names them and the test; junit.xml parses with one
//! testcase per threshold and point; the runs were interleaved; each side's repeats are
//! written for benchstat, which reads them and agrees with the gate's unpaired p-value; a
//! candidate whose runs fail exits 1; a bad spec exits 2 in one line.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use quick_xml::events::Event;
use quick_xml::Reader;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");

/// Gates run one at a time: on 2 cores, gates running side by side make each other's p99
/// noisy enough to blur the A/B verdict.
static ONE_GATE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_GATE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn gate(spec: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .arg("gate")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("coordbench runs")
}

#[path = "common/output.rs"]
mod output;
use output::describe;
#[path = "common/interop_build.rs"]
mod interop_build;

/// Go's benchstat on the gate's baseline.txt and candidate.txt reads 8 throughput repeats a
/// side and, when they hold no ties (with ties it approximates, coordbench does not),
/// finds gate.json's unpaired p-value to the 3 decimals it prints. Skipped (a failure
/// under `CI`) without benchstat (scripts/build-interop.sh builds it).
fn benchstat_agrees(out: &Path, gate_json: &serde_json::Value) {
    let Some(benchstat) = interop_build::program("COORDBENCH_INTEROP_BENCHSTAT") else {
        return;
    };
    let o = Command::new(benchstat)
        .args(["-format", "csv", "-filter", ".unit:throughput_ops_s"])
        .args(["baseline.txt", "candidate.txt"])
        .current_dir(out)
        .output()
        .expect("benchstat runs");
    assert!(o.status.success(), "{}", describe(&o));
    let csv = String::from_utf8_lossy(&o.stdout);
    let row = csv
        .lines()
        .find(|l| l.starts_with("Gate/raft/kv-put,"))
        .unwrap_or_else(|| panic!("no row for the point: {csv}"));
    let last = row.rsplit(',').next().unwrap();
    assert!(last.ends_with(" n=8"), "{row}");
    let theirs: f64 = last[2..].split(' ').next().unwrap().parse().unwrap();
    let figure = gate_json["comparison"]["points"][0]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == "throughput_ops_s")
        .unwrap();
    let values = |side: &str| -> Vec<f64> {
        let all = figure[side].as_array().unwrap();
        all.iter().map(|v| v.as_f64().unwrap()).collect()
    };
    let pooled = [values("base_values"), values("cand_values")].concat();
    let mut distinct = pooled.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() == pooled.len() {
        let ours = figure["p_value"].as_f64().unwrap();
        assert!((ours - theirs).abs() <= 0.0005 + 1e-12, "{ours} vs {row}");
    }
}

/// A quick gate: one point (raft kv-put, 1 member), `repeats` repeats of 1 s per side.
/// Its two relative limits at false_alarm 0.01 are each held to 0.005 at the strictest:
/// 8 pairs reach it (2^-8) and the paired test decides; 5 pairs do not (2^-5), and the
/// unpaired test decides, failing only if a side wins all 25 pairings of a figure and
/// moves it beyond a wide limit; a slow emulated hdd against tmpfs does both.
fn spec(dir: &Path, candidate: &str, repeats: u32) -> std::path::PathBuf {
    // p50, not p99: a 1 s run of a few hundred operations (fewer on the hdd) cannot
    // support a p99, which needs 1,000 (docs/reference.md, "Percentiles shown").
    let thresholds = "throughput_ops_s = { max_drop = \"30%\" }\np50_us = { max_rise = \"50%\" }\nviolations = { max = 0 }";
    spec_with(dir, candidate, repeats, thresholds)
}

/// The same point for tests of the plumbing (failures, resume, the script): 3 repeats and
/// only an absolute limit, so it cannot fail on noise and runs quickly.
fn plumbing_spec(dir: &Path, candidate: &str) -> std::path::PathBuf {
    spec_with(dir, candidate, 3, "violations = { max = 0 }")
}

fn spec_with(dir: &Path, candidate: &str, repeats: u32, thresholds: &str) -> std::path::PathBuf {
    let text = format!(
        r#"
name = "tiny"
targets = ["raft"]
workload = "kv-put"
false_alarm = 0.01
repeats = {repeats}
warmup = "0s"
duration = "1s"
[options]
cluster_size = 1
clients = 4
disk = "tmpfs"
[candidate]
{candidate}
[thresholds]
{thresholds}
"#
    );
    let path = dir.join("gate.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// (testcases, failures) in junit.xml.
fn junit_counts(path: &Path) -> (usize, usize) {
    let xml = std::fs::read_to_string(path).unwrap();
    let mut reader = Reader::from_str(&xml);
    let (mut cases, mut failures) = (0, 0);
    loop {
        match reader.read_event().expect("junit.xml parses") {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => match e.name().as_ref() {
                b"testcase" => cases += 1,
                b"failure" => failures += 1,
                _ => {}
            },
            _ => {}
        }
    }
    (cases, failures)
}

/// The sides' runs in the order they started, from each run's started_at.
fn run_order(out: &Path) -> Vec<String> {
    let mut runs = Vec::new();
    for side in ["baseline", "candidate"] {
        for entry in std::fs::read_dir(out.join(side)).unwrap() {
            let dir = entry.unwrap().path();
            let Ok(text) = std::fs::read_to_string(dir.join("run.json")) else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let started = v["started_at"].as_str().unwrap().to_string();
            runs.push((
                started,
                format!("{side}/{}", dir.file_name().unwrap().to_string_lossy()),
            ));
        }
    }
    runs.sort();
    runs.into_iter().map(|(_, name)| name).collect()
}

#[test]
fn an_a_a_gate_passes_and_an_hdd_candidate_breaches_throughput_and_p50() {
    let _serial = one_at_a_time();
    let tmp = TempDir::new().unwrap();
    let same = spec(tmp.path(), "", 8);
    let out = tmp.path().join("aa");
    let o = gate(&same, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("PASSED: 3 checks"), "{stdout}");
    let md = std::fs::read_to_string(out.join("gate.md")).unwrap();
    assert!(
        md.contains("| ✓ | throughput_ops_s max_drop 30% | raft kv-put |"),
        "{md}"
    );
    // The row names the test that decided it: the pairs, as the runs interleaved.
    let row = |threshold: &str| {
        md.lines()
            .find(|l| l.contains(threshold))
            .unwrap_or_else(|| panic!("no {threshold} row: {md}"))
            .to_string()
    };
    for threshold in ["throughput_ops_s max_drop 30%", "p50_us max_rise 50%"] {
        assert!(
            row(threshold).ends_with("| paired Wilcoxon signed-rank, 8 pairs |"),
            "{md}"
        );
    }
    assert!(
        row("violations max 0").ends_with("| every candidate repeat against the limit |"),
        "{md}"
    );
    assert!(md.contains("baseline/report.md"), "{md}");
    assert_eq!(junit_counts(&out.join("junit.xml")), (3, 0));
    // Pair by pair, the side that goes first alternates.
    let expected: Vec<String> = (1..=8)
        .flat_map(|r| {
            let sides = if r % 2 == 1 {
                ["baseline", "candidate"]
            } else {
                ["candidate", "baseline"]
            };
            sides.map(|side| format!("{side}/raft-r{r}"))
        })
        .collect();
    assert_eq!(run_order(&out), expected);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("gate.json")).unwrap()).unwrap();
    assert_eq!(json["passed"], true);
    assert_eq!(json["schema"], "coordbench.gate/1");
    assert_eq!(
        json["checks"][0]["test"],
        "paired Wilcoxon signed-rank, 8 pairs"
    );
    // Each side's repeats for benchstat: 8 throughput lines, in Go's benchmark format.
    let baseline = std::fs::read_to_string(out.join("baseline.txt")).unwrap();
    let throughput: Vec<&str> = baseline
        .lines()
        .filter(|l| l.ends_with(" throughput_ops_s"))
        .collect();
    assert_eq!(throughput.len(), 8, "{baseline}");
    for line in throughput {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(&fields[..2], ["BenchmarkGate/raft/kv-put", "1"], "{line}");
        assert!(fields[2].parse::<f64>().unwrap() > 0.0, "{line}");
    }
    assert!(out.join("candidate.txt").is_file());
    benchstat_agrees(&out, &json);

    // An hdd slowed to 40 ms per sync: every write waits for it, so its p50 is far above a
    // debug build's tmpfs p50 on a loaded 2-core machine in every pairing.
    let hdd = spec(tmp.path(), "disk = \"hdd\"\nsync_delay = \"40ms\"", 5);
    let out = tmp.path().join("ab");
    let o = gate(&hdd, &out, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let md = std::fs::read_to_string(out.join("gate.md")).unwrap();
    assert!(md.contains("FAILED: 2 of 3 checks breached"), "{md}");
    assert!(
        md.contains("| ✗ | throughput_ops_s max_drop 30% | raft kv-put |"),
        "{md}"
    );
    assert!(
        md.contains("| ✗ | p50_us max_rise 50% | raft kv-put |"),
        "{md}"
    );
    // 5 pairs cannot reach this gate's strictest level (2^-5 > 0.01 / 2): unpaired.
    assert!(
        md.contains("| Mann-Whitney U, unpaired, 5 vs 5 repeats |"),
        "{md}"
    );
    assert!(
        md.contains("| ✓ | violations max 0 | raft kv-put |"),
        "{md}"
    );
    assert!(md.contains("disk tmpfs -> hdd"), "{md}");
    assert_eq!(junit_counts(&out.join("junit.xml")), (3, 2));
}

/// A candidate engine that spins per committed command (the test build's slowdown hook,
/// engines/node/src/slowdown.rs, set through a wrapper as `engine_bin`) breaches the
/// deterministic cost, which the gate counts under valgrind once per side's binary and records
/// in every run (`engine_cost`).
#[test]
fn a_candidate_engine_with_a_known_per_commit_slowdown_breaches_the_deterministic_cost() {
    let _serial = one_at_a_time();
    let tmp = TempDir::new().unwrap();
    let slow = tmp.path().join("slow-coordbench");
    std::fs::write(
        &slow,
        format!("#!/bin/sh\nCOORDBENCH_TEST_COMMIT_SPIN=300 exec {BIN} \"$@\"\n"),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let spec = spec_with(
        tmp.path(),
        &format!("engine_bin = \"{}\"", slow.display()),
        3,
        "engine_instructions_per_op = { max_rise = \"1%\" }",
    );
    // One check and a count that does not vary: 3 repeats a side decide it at 0.1.
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace(
            "[options]\n",
            "[options]\nengine_cost = true\nengine_cost_ops = 100\n",
        )
        .replace("false_alarm = 0.01", "false_alarm = 0.1");
    std::fs::write(&spec, text).unwrap();
    let out = tmp.path().join("cost");
    let o = gate(&spec, &out, &[]);
    let spin_of = |side: &str| -> serde_json::Value {
        let run = std::fs::read_to_string(out.join(format!("{side}/raft-r1/run.json")))
            .unwrap_or_default();
        let run: serde_json::Value = serde_json::from_str(&run).unwrap_or_default();
        run["engine_cost"]["commit_spin"].clone()
    };
    // A count without the spin is a build without the hook, not a gate that missed it.
    assert_eq!(
        (spin_of("baseline"), spin_of("candidate")),
        (serde_json::json!(0), serde_json::json!(300)),
        "{BIN} did not spin while counted: built without coordbench-node's test-slowdown \
         feature, which the dev-dependencies turn on for `cargo test` builds only"
    );
    assert_eq!(o.status.code(), Some(3), "{}", describe(&o));
    let md = std::fs::read_to_string(out.join("gate.md")).unwrap();
    assert!(
        md.contains("| ✗ | engine_instructions_per_op max_rise 1% | raft kv-put |"),
        "{md}"
    );
    let costs = |side: &str| -> Vec<f64> {
        (1..=3)
            .map(|r| {
                let run = std::fs::read_to_string(out.join(format!("{side}/raft-r{r}/run.json")))
                    .unwrap();
                let run: serde_json::Value = serde_json::from_str(&run).unwrap();
                run["engine_cost"]["instructions_per_op"].as_f64().unwrap()
            })
            .collect()
    };
    let (base, cand) = (costs("baseline"), costs("candidate"));
    // The gate counts each side's binary once and every repeat records that count
    // (crates/bench/src/engine_cost.rs); the two binaries are counted apart.
    assert!(
        base.iter().chain(&cand).all(|c| *c > 0.0),
        "{base:?} {cand:?}"
    );
    assert!(
        base.iter().all(|b| *b == base[0]) && cand.iter().all(|c| *c == cand[0]),
        "one count per binary: {base:?} {cand:?}"
    );
    assert!(cand[0] > base[0] * 1.01, "{base:?} {cand:?}");
}

#[test]
fn a_candidate_whose_runs_fail_exits_1_and_bad_specs_exit_2() {
    let _serial = one_at_a_time();
    let tmp = TempDir::new().unwrap();
    // /bin/true is executable but serves nothing: every candidate cluster fails to start.
    let broken = plumbing_spec(tmp.path(), "engine_bin = \"/bin/true\"");
    let o = gate(&broken, &tmp.path().join("broken"), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));

    let bad = [
        (
            "[thresholds]\nthroughput_ops_s = { max_drop = 5 }",
            "thresholds.throughput_ops_s.max_drop: write a percentage",
        ),
        (
            "[thresholds]\nthroughput = { max_drop = \"5%\" }",
            "thresholds.throughput: unknown figure",
        ),
        (
            "[candidate]\nclients = 0\n[thresholds]\np99_us = { max_rise = \"5%\" }",
            "candidate.clients",
        ),
    ];
    for (tail, expected) in bad {
        let path = tmp.path().join("bad.toml");
        let text = format!("targets = [\"raft\"]\nworkload = \"kv-put\"\nrepeats = 5\n{tail}\n");
        std::fs::write(&path, text).unwrap();
        let o = gate(&path, &tmp.path().join("bad"), &[]);
        assert_eq!(o.status.code(), Some(2), "{tail}: {}", describe(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("bad.toml:") && stderr.contains(expected),
            "{tail}: {stderr}"
        );
    }
}

/// scripts/perf-gate.sh as CI runs it, with both revisions' builds already in its cache
/// (building a release twice is too slow for the test command): the gate runs with each
/// side's members served by its revision's build, and passes for the same revision.
#[test]
fn the_perf_gate_script_gates_one_revision_against_another() {
    let _serial = one_at_a_time();
    let tmp = TempDir::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(
        head.status.success(),
        "not a git checkout: {}",
        describe(&head)
    );
    let sha = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let cache = tmp.path().join("cache");
    std::fs::create_dir_all(cache.join(&sha)).unwrap();
    let cached = cache.join(&sha).join("coordbench");
    std::fs::copy(BIN, &cached).unwrap();
    let script = |args: &[&str]| {
        Command::new(root.join("scripts/perf-gate.sh"))
            .args(args)
            .env("PERF_GATE_CACHE", &cache)
            .env("PERF_GATE_SPEC", plumbing_spec(tmp.path(), ""))
            .env("PERF_GATE_OUT", tmp.path().join("out"))
            .stdin(Stdio::null())
            .output()
            .expect("the script runs")
    };
    let o = script(&["HEAD", &sha]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/gate.json")).unwrap())
            .unwrap();
    let engine = ["--engine-bin", cached.to_str().unwrap()];
    assert_eq!(json["baseline_options"], serde_json::json!(engine));
    assert_eq!(json["candidate_options"], serde_json::json!(engine));

    let o = script(&["no-such-revision", "HEAD"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-revision is not a commit"));
    let o = script(&["HEAD"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
}

/// Ctrl-C during a gate keeps what was measured (exit 130, no verdict written); the same
/// command later runs only what is missing and judges all of it.
#[test]
fn an_interrupted_gate_resumes_where_it_stopped() {
    let _serial = one_at_a_time();
    let tmp = TempDir::new().unwrap();
    let spec = plumbing_spec(tmp.path(), "");
    let out = tmp.path().join("gate");
    let mut child = Command::new(BIN)
        .arg("gate")
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("coordbench starts");
    // The second run of the schedule is the candidate's first: interrupt it while it starts
    // its cluster or measures (its directory appears as it begins; it lasts over a second).
    let second = out.join("candidate/raft-r1");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !second.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the second run never started"
        );
        assert!(child.try_wait().unwrap().is_none(), "the gate ended early");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", describe(&o));
    assert!(
        !out.join("gate.md").exists(),
        "an interrupted gate gives no verdict"
    );
    let run = |dir: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(dir).join("run.json")).unwrap())
            .unwrap()
    };
    assert_eq!(run("baseline/raft-r1")["complete"], true);
    assert_eq!(
        run("candidate/raft-r1")["complete"],
        false,
        "the interrupted run is written"
    );

    let o = gate(&spec, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("(1 already complete)"), "{stderr}");
    assert_eq!(run("candidate/raft-r1")["complete"], true);
    assert_eq!(junit_counts(&out.join("junit.xml")), (1, 0));
}
