//! coordbench's unpaired test against Go's benchstat, which uses the same test
//! (Mann-Whitney U, two-sided, significant when p < 0.05): seeded A/A and A/B sample sets
//! are written in Go's benchmark format (the format of a gate's baseline.txt and
//! candidate.txt), benchstat judges them, and coordbench's p-values must equal benchstat's
//! to the three decimals it prints, with the same verdict ("~" or a change) on every one.
//!
//! The samples have no ties and at most 40 values per pair of sides, where both compute
//! the exact p-value (with ties, benchstat uses the normal approximation and coordbench the
//! exact distribution). scripts/build-interop.sh builds benchstat at the version
//! tests/interop/benchstat/go.mod pins; without it the test is skipped with a note (a
//! failure under `CI`).

#[path = "common/interop_build.rs"]
mod interop_build;
#[path = "common/output.rs"]
mod output;

use std::collections::BTreeMap;
use std::process::Command;

use coordbench_analysis::compare::benchfmt;
use coordbench_analysis::compare::figures::Figure;
use coordbench_analysis::compare::stats;
use coordbench_analysis::compare::verdict::{self, Verdict};
use coordbench_splitmix::SplitMix64;
use tempfile::TempDir;

const BENCHSTAT_VAR: &str = "COORDBENCH_INTEROP_BENCHSTAT";
/// benchstat's default alpha.
const ALPHA: f64 = 0.05;

/// One benchmark: both sides' samples.
struct Case {
    name: String,
    base: Vec<f64>,
    cand: Vec<f64>,
}

/// Uniform in [0, 1).
fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Throughput-like samples around 1000 ops/s, ±15% run to run; the candidate's scaled by
/// `factor` (1 for A/A).
fn cases(rng: &mut SplitMix64) -> Vec<Case> {
    let sizes = [
        (4, 4),
        (5, 5),
        (6, 6),
        (8, 8),
        (10, 10),
        (5, 8),
        (12, 9),
        (20, 20),
    ];
    let factors = [1.0, 1.0, 0.97, 0.93, 0.88, 1.06, 1.12];
    let mut cases = Vec::new();
    for (i, &(n, m)) in sizes.iter().cycle().take(56).enumerate() {
        let factor = factors[i % factors.len()];
        let mut draw = |len: usize, scale: f64| -> Vec<f64> {
            // Rounded to 0.001 as a run's summary would print them; distinct in practice.
            (0..len)
                .map(|_| ((1000.0 * scale * (0.85 + 0.3 * unit(rng))) * 1000.0).round() / 1000.0)
                .collect()
        };
        cases.push(Case {
            name: format!("Case{i:02}"),
            base: draw(n, 1.0),
            cand: draw(m, factor),
        });
    }
    cases
}

/// One side of every case in Go's benchmark format.
fn write_side(dir: &std::path::Path, file: &str, cases: &[Case], pick: fn(&Case) -> &[f64]) {
    let mut text = String::from("goos: linux\n");
    for case in cases {
        for v in pick(case) {
            text.push_str(&benchfmt::line(&case.name, *v, "throughput_ops_s"));
            text.push('\n');
        }
    }
    std::fs::write(dir.join(file), text).unwrap();
}

/// benchstat's CSV rows: benchmark name → (change column, p-value).
fn benchstat_verdicts(csv: &str) -> BTreeMap<String, (String, f64)> {
    let mut rows = BTreeMap::new();
    for line in csv.lines() {
        let fields: Vec<&str> = line.split(',').collect();
        let Some(p) = fields.last().and_then(|f| f.strip_prefix("p=")) else {
            continue;
        };
        let p: f64 = p
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("a p-value in {line}"));
        let change = fields[fields.len() - 2].to_string();
        rows.insert(fields[0].to_string(), (change, p));
    }
    rows
}

#[test]
fn mann_whitney_agrees_with_benchstat_on_a_a_and_a_b_samples() {
    let Some(benchstat) = interop_build::program(BENCHSTAT_VAR) else {
        return;
    };
    let tmp = TempDir::new().unwrap();
    let cases = cases(&mut SplitMix64::new(0x0be9_c5a7));
    for case in &cases {
        let pooled: Vec<f64> = case.base.iter().chain(&case.cand).copied().collect();
        let distinct: std::collections::BTreeSet<u64> =
            pooled.iter().map(|v| v.to_bits()).collect();
        assert_eq!(distinct.len(), pooled.len(), "{}: ties", case.name);
    }
    write_side(tmp.path(), "base.txt", &cases, |c| &c.base);
    write_side(tmp.path(), "cand.txt", &cases, |c| &c.cand);
    let o = Command::new(&benchstat)
        .args(["-format", "csv", "base.txt", "cand.txt"])
        .current_dir(tmp.path())
        .output()
        .expect("benchstat runs");
    assert!(o.status.success(), "{}", output::describe(&o));
    let theirs = benchstat_verdicts(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(theirs.len(), cases.len(), "{}", output::describe(&o));

    let figure = Figure::named("throughput_ops_s").unwrap();
    let (mut significant, mut same) = (0, 0);
    for case in &cases {
        let (change, p) = &theirs[&case.name];
        let ours = stats::mann_whitney(&case.base, &case.cand).unwrap();
        assert!(ours.exact);
        // benchstat prints p to 3 decimals: ours must round to the same.
        assert!(
            (ours.p_value - p).abs() <= 0.0005 + 1e-12,
            "{}: coordbench p={} benchstat p={p}",
            case.name,
            ours.p_value
        );
        let judged = verdict::judge(&figure, case.base.clone(), case.cand.clone(), ALPHA);
        let theirs_same = change == "~";
        assert_eq!(
            judged.verdict == Verdict::Same,
            theirs_same,
            "{}: coordbench {:?} (p={}), benchstat {change} (p={p})",
            case.name,
            judged.verdict,
            ours.p_value
        );
        if theirs_same {
            same += 1;
        } else {
            significant += 1;
            // The direction agrees too: benchstat's change is cand vs base.
            let up = judged.verdict == Verdict::Better;
            assert_eq!(up, change.starts_with('+'), "{}: {change}", case.name);
        }
    }
    // Both verdicts occur, so the agreement is not vacuous.
    assert!(significant >= 10 && same >= 10, "{significant} {same}");
}
