//! `coordbench simulate election`: the same seed writes the same election.csv byte for
//! byte (and another seed does not); the simulated election-time CDF has the shape of the
//! Raft paper's Figure 16 (150-150 ms: split votes stretching most elections past 1 s;
//! 150-300 ms: few split votes, no election over 600 ms; 150-155 ms on unequal links: median
//! under 400 ms); zab elects, mostly in one round, even with fixed timeouts; bad input is one line on stderr and exit
//! 2; a run writes its files and prints its seed.

use std::path::Path;
use std::process::Command;

use coordbench::cli::{Cli, Command as Sub};
use coordbench_analysis::simulate::args::{ElectionArgs, SimulateCommand};
use coordbench_analysis::simulate::election::{run_line, Setup, Trial};
use coordbench_analysis::simulate::summary::election_ms;
use tempfile::TempDir;

use clap::Parser;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");

fn simulate(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["simulate", "election"])
        .args(args)
        .output()
        .expect("coordbench runs")
}

fn election_args(extra: &[&str]) -> ElectionArgs {
    let mut argv = vec!["coordbench", "simulate", "election"];
    argv.extend_from_slice(extra);
    match Cli::try_parse_from(argv).expect("valid arguments").command {
        Sub::Simulate(SimulateCommand::Election(a)) => a,
        other => panic!("parsed as {other:?}"),
    }
}

fn csv_of(dir: &Path, seed: &str) -> Vec<u8> {
    let out = simulate(&[
        "--timeouts",
        "150-155,150-300",
        "--trials",
        "8",
        "--seed",
        seed,
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(dir.join("election.csv")).unwrap()
}

#[test]
fn the_same_seed_writes_the_same_election_csv() {
    let tmp = TempDir::new().unwrap();
    let a = csv_of(&tmp.path().join("a"), "42");
    let b = csv_of(&tmp.path().join("b"), "42");
    let c = csv_of(&tmp.path().join("c"), "43");
    assert_eq!(a, b, "same seed, same bytes");
    assert_ne!(a, c, "another seed draws other trials");
    let text = String::from_utf8(a).unwrap();
    assert_eq!(text.lines().count(), 1 + 2 * 8, "{text}");
}

/// Runs each line (its arguments, trials) on a thread of its own; election times in ms,
/// sorted, and the trials.
fn lines(specs: &[(&[&str], u32)]) -> Vec<(Vec<f64>, Vec<Trial>)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = specs
            .iter()
            .map(|(extra, trials)| {
                s.spawn(move || {
                    let args = election_args(extra);
                    let setup = Setup::from_args(&args).unwrap();
                    let t = run_line(&setup, &args.timeouts[0], *trials, 2014).unwrap();
                    (election_ms(&t, setup.cap_us as f64 / 1000.0), t)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn the_election_cdf_has_the_papers_shape() {
    let got = lines(&[
        // Equal links (the default): only the message jitter breaks the symmetry, so
        // split votes repeat; the cap keeps the test short.
        (&["--timeouts", "150-150", "--max-election", "2s"], 16),
        (&["--timeouts", "150-300"], 100),
        // Unequal links, 150-155: the paper's median (287 ms) needs a candidate that
        // reaches a majority before its rivals time out.
        (&["--timeouts", "150-155", "--link-spread", "50"], 40),
    ]);
    let (fixed, wide, narrow) = (&got[0], &got[1], &got[2]);
    let long = fixed.0.iter().filter(|&&ms| ms > 1000.0).count();
    assert!(
        long * 2 > fixed.0.len(),
        "150-150: few elections over 1 s: {:?}",
        fixed.0
    );
    let split = |t: &[Trial]| t.iter().filter(|t| t.split_votes > 0).count();
    assert_eq!(
        split(&fixed.1),
        fixed.1.len(),
        "150-150: every trial splits"
    );
    assert!(
        split(&wide.1) * 10 < wide.1.len(),
        "150-300: split votes are rare"
    );
    let max = wide.0.last().copied().unwrap();
    assert!(max < 600.0, "150-300 max {max} ms");
    // Nothing is faster than detection: half the minimum timeout after the crash at best.
    assert!(wide.0[0] >= 75.0, "{:?}", wide.0[0]);
    let median = narrow.0[narrow.0.len() / 2];
    assert!(median < 400.0, "150-155 median {median} ms, unequal links");
}

#[test]
fn zab_elects_mostly_in_one_round() {
    let args = election_args(&["--core", "zab", "--timeouts", "150-150"]);
    let setup = Setup::from_args(&args).unwrap();
    let trials = run_line(&setup, &args.timeouts[0], 10, 7).unwrap();
    for t in &trials {
        let ms = t.election_us.expect("zab elects") as f64 / 1000.0;
        assert!((75.0..1000.0).contains(&ms), "{t:?}");
        assert!(t.established_us >= t.election_us);
    }
    // Fixed timeouts split no votes in fast leader election: the best vote wins.
    let extra_rounds = trials.iter().filter(|t| t.split_votes > 0).count();
    assert!(extra_rounds * 5 < trials.len(), "{trials:?}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for bad in [
        &["--timeouts", "200-150"][..],
        &["--members", "2"],
        &["--members", "14"],
        &["--timeouts", "150-300", "--heartbeat", "200ms"],
        &["--trials", "0"],
        &["--jitter", "20ms"],
        &["--core", "paxos"],
    ] {
        let out = simulate(bad);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{bad:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_run_writes_its_files_and_prints_its_seed() {
    let tmp = TempDir::new().unwrap();
    let out = simulate(&[
        "--timeouts",
        "150-155",
        "--trials",
        "3",
        "--seed",
        "5",
        "--out",
        tmp.path().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("--seed 5"), "{stdout}");
    assert!(
        stdout.contains("median 287 ms"),
        "the paper's figure beside: {stdout}"
    );
    for f in [
        "election.csv",
        "summary.csv",
        "summary.json",
        "charts/cdf-150-155.svg",
        "charts/cdf-150-155.png",
        "charts/cdf-all.svg",
    ] {
        let len = std::fs::metadata(tmp.path().join(f))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 0, "{f} missing or empty");
    }
    let svg = std::fs::read_to_string(tmp.path().join("charts/cdf-150-155.svg")).unwrap();
    assert!(svg.contains("Raft paper, Fig. 16, 150-155 ms: median 287 ms"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["run"]["seed"], 5);
    assert_eq!(json["lines"][0]["trials"], 3);
}
