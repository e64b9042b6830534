//! What a gate leaves in its directory besides the two sides' runs: `gate.md` (a table
//! ready for a pull-request comment: one ✓/✗ line per threshold and point, both sides'
//! figures, links to both sides' charts), `gate.json`, `junit.xml` ([`super::junit`]) and
//! each side's repeats in Go's benchmark format for benchstat (`baseline.txt`,
//! `candidate.txt`: [`coordbench_analysis::compare::benchfmt`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use coordbench_results::files;
use coordbench_results::record::RecordHeader;

use super::schedule::Side;
use coordbench_analysis::compare::benchfmt;
use coordbench_analysis::compare::checks::{Check, CheckOutcome};
use coordbench_analysis::compare::render;
use coordbench_analysis::compare::thresholds::Threshold;
use coordbench_analysis::compare::Comparison;

/// gate.json.
#[derive(Debug, Serialize)]
pub struct GateRecord<'a> {
    /// Written once both sides have run: complete, with the gate's times.
    #[serde(flatten)]
    pub header: RecordHeader,
    pub name: &'a str,
    pub spec_file: String,
    pub quick: bool,
    /// True when no threshold was breached and every check could be judged.
    pub passed: bool,
    pub breached: usize,
    pub duration_s: f64,
    /// Options each side adds to the spec's, as `coordbench run` arguments.
    pub baseline_options: Vec<String>,
    pub candidate_options: Vec<String>,
    pub thresholds: &'a [Threshold],
    /// The bound on a false breach anywhere in the gate (Holm over its relative checks).
    pub false_alarm: f64,
    pub checks: &'a [Check],
    pub comparison: &'a Comparison,
}

/// Writes gate.md, gate.json, junit.xml, baseline.txt and candidate.txt into `dir`;
/// returns their paths.
pub fn write(dir: &Path, record: &GateRecord) -> anyhow::Result<Vec<PathBuf>> {
    let md = dir.join("gate.md");
    std::fs::write(&md, markdown(dir, record))
        .with_context(|| format!("writing {}", md.display()))?;
    let json = dir.join("gate.json");
    files::write_json(&json, record)?;
    let junit = dir.join("junit.xml");
    let xml = super::junit::document(record.name, record.checks, record.duration_s)
        .context("encoding junit.xml")?;
    std::fs::write(&junit, xml).with_context(|| format!("writing {}", junit.display()))?;
    let mut written = vec![md, json, junit];
    for (side, name) in [
        (benchfmt::Side::Baseline, "baseline.txt"),
        (benchfmt::Side::Candidate, "candidate.txt"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, benchfmt::side(record.comparison, side))
            .with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The summary line: `PASSED: 12 checks` or `FAILED: 2 of 12 checks breached`.
pub fn verdict_line(record: &GateRecord) -> String {
    let total = record.checks.len();
    if record.breached > 0 {
        format!("FAILED: {} of {total} checks breached", record.breached)
    } else if record.passed {
        format!("PASSED: {total} checks")
    } else {
        let unjudged = record
            .checks
            .iter()
            .filter(|c| c.outcome == CheckOutcome::NoVerdict)
            .count();
        format!("NOT JUDGED: {unjudged} of {total} checks had too few repeats")
    }
}

fn markdown(dir: &Path, r: &GateRecord) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Gate `{}`: {}\n", r.name, verdict_line(r));
    let repeats: Vec<usize> = r
        .comparison
        .points
        .iter()
        .map(|p| p.cand_dirs.len())
        .collect();
    let _ = writeln!(
        md,
        "Baseline and candidate ran interleaved in one session ({} points, {} repeats per side), in {:.0} s. \
         A relative limit fails only when the change is significantly beyond it: with enough pairs, \
         the paired Wilcoxon signed-rank test of each repeat's candidate/baseline log-ratio against the limit; \
         otherwise the unpaired Mann-Whitney U test, when the change is also beyond the limit \
         (the test column names which decided). \
         Significance is held to a {} chance of any false breach in the whole gate (Holm). \
         Verdicts in the tables: {}, alpha {}. \
         baseline.txt and candidate.txt hold every figure's repeats in Go's benchmark format, \
         for `benchstat baseline.txt candidate.txt`.\n",
        r.comparison.points.len(),
        repeats.iter().max().copied().unwrap_or(0),
        r.duration_s,
        r.false_alarm,
        r.comparison.method,
        r.comparison.alpha,
    );
    let side = |opts: &[String]| {
        if opts.is_empty() {
            "the spec's options".to_string()
        } else {
            format!("`{}`", opts.join(" "))
        }
    };
    let _ = writeln!(
        md,
        "- baseline: {}\n- candidate: {}\n",
        side(&r.baseline_options),
        side(&r.candidate_options)
    );
    let _ = writeln!(md, "## Thresholds\n");
    let _ = writeln!(
        md,
        "| | threshold | point | baseline | candidate | change | test |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    for c in r.checks {
        let mark = match c.outcome {
            CheckOutcome::Passed => "✓",
            CheckOutcome::Breached => "✗",
            CheckOutcome::NoVerdict => "?",
        };
        let _ = writeln!(
            md,
            "| {mark} | {} | {} | {} | {} | {} | {} |",
            c.threshold,
            c.point,
            figure(c.base_median),
            figure(c.cand_median),
            c.detail,
            c.test
        );
    }
    let _ = writeln!(md, "\n## Charts\n");
    for s in [Side::Baseline, Side::Candidate] {
        let _ = writeln!(md, "- {}: {}", s.dir_name(), chart_links(dir, s));
    }
    let _ = writeln!(md, "\n## Every figure\n");
    md.push_str(&render::markdown(r.comparison, None));
    md
}

fn figure(v: f64) -> String {
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Links to a side's report and PNG charts, relative to the gate directory.
fn chart_links(dir: &Path, side: Side) -> String {
    let name = side.dir_name();
    let mut links = vec![format!("[report]({name}/report.md)")];
    let mut charts: Vec<String> = std::fs::read_dir(dir.join(name).join("charts"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|f| f.ends_with(".png"))
                .collect()
        })
        .unwrap_or_default();
    charts.sort();
    for chart in charts {
        let stem = chart.trim_end_matches(".png");
        links.push(format!("[{stem}]({name}/charts/{chart})"));
    }
    links.join(" · ")
}
