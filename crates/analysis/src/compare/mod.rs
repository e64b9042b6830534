//! `coordbench compare BASE CAND`: judges whether a candidate's figures differ from a
//! baseline's beyond noise, point by point, using repeats as samples (as Go's benchstat
//! does): exact Mann-Whitney U, Hodges–Lehmann ratio with a distribution-free confidence
//! interval, and "no verdict" when there are too few repeats to decide. docs/reference.md
//! ("Comparing runs") states the method, its alpha and its minimum repeats.
//!
//! Each side is any mix of run, sweep and gate-side directories ([`load`]); runs are paired
//! by configuration ([`points`]); every figure that matters is judged ([`figures`],
//! [`verdict`]), and so is the whole latency distribution ([`distribution`]). [`thresholds`]
//! turns a comparison into pass/fail lines for `--thresholds` and `coordbench gate`
//! ([`checks`]); a gate's runs also pair by repeat ([`Pairing`]), and its checks then use
//! the paired test of [`signed_rank`]. [`benchfmt`] writes samples for Go's benchstat.

pub mod args;
pub mod benchfmt;
pub mod checks;
pub mod distribution;
pub mod figures;
pub mod load;
pub mod points;
pub mod render;
pub mod signed_rank;
pub mod stats;
pub mod thresholds;
pub mod verdict;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

pub use args::{CompareArgs, CompareFormat};
use coordbench_results::noise;
use coordbench_results::outcome::{Outcome, UsageError};

/// The default significance level: each direction at 0.05 (see docs/reference.md).
pub const DEFAULT_ALPHA: f64 = 0.10;

/// The method, as every output states it.
pub const METHOD: &str = "exact Mann-Whitney U over repeats (two-sided); Hodges-Lehmann ratio with distribution-free confidence interval";

/// A whole comparison: what `compare` prints and `gate` judges.
#[derive(Debug, Serialize)]
pub struct Comparison {
    pub method: &'static str,
    pub alpha: f64,
    /// Repeats per side below which no verdict is given.
    pub min_repeats: usize,
    pub base: SideInfo,
    pub cand: SideInfo,
    /// Configuration fields the sides differ in (the change under test).
    pub differences: Vec<Difference>,
    pub points: Vec<PointComparison>,
    /// Points only one side measured.
    pub only_base: Vec<String>,
    pub only_cand: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct SideInfo {
    pub paths: Vec<String>,
    pub runs: usize,
    /// Run directories left out because they did not complete.
    pub incomplete: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Difference {
    pub field: String,
    pub base: String,
    pub cand: String,
}

#[derive(Debug, Serialize)]
pub struct PointComparison {
    pub label: String,
    pub key: BTreeMap<String, String>,
    pub base_dirs: Vec<String>,
    pub cand_dirs: Vec<String>,
    pub figures: Vec<verdict::Judged>,
    /// Latency percentiles of the merged latency.hlog of each side.
    pub distribution: Option<distribution::Distribution>,
    /// What was too noisy to judge with confidence ([`noisy`]), one line each.
    pub noisy: Vec<String>,
}

/// Whether runs of the two sides are paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    /// Independent samples (`coordbench compare` of any result directories).
    Unpaired,
    /// Runs of a point with the same repeat index ran back to back as a pair (a gate's
    /// sides): each figure also carries its pairs ([`verdict::Judged::pairs`]).
    ByRepeat,
}

/// A comparison that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Load(#[from] load::LoadError),
    #[error("{0}")]
    Unmatched(String),
}

/// Compares the runs under `base` with those under `cand`, unpaired.
pub fn compare(base: &[PathBuf], cand: &[PathBuf], alpha: f64) -> Result<Comparison, CompareError> {
    compare_with(base, cand, alpha, Pairing::Unpaired)
}

/// [`compare`], with the sides' runs paired as `pairing` says.
pub fn compare_with(
    base: &[PathBuf],
    cand: &[PathBuf],
    alpha: f64,
    pairing: Pairing,
) -> Result<Comparison, CompareError> {
    let base_side = load::side(base)?;
    let cand_side = load::side(cand)?;
    let matching = points::match_sides(&base_side.runs, &cand_side.runs);
    if matching.points.is_empty() {
        return Err(CompareError::Unmatched(format!(
            "no point of the baseline ({} complete runs) matches one of the candidate ({}); baseline has {}, candidate has {}",
            base_side.runs.len(),
            cand_side.runs.len(),
            list(&matching.only_base),
            list(&matching.only_cand),
        )));
    }
    let points = matching
        .points
        .iter()
        .map(|p| point(p, alpha, pairing))
        .collect();
    Ok(Comparison {
        method: METHOD,
        alpha,
        min_repeats: stats::min_samples(alpha),
        base: side_info(base, &base_side),
        cand: side_info(cand, &cand_side),
        differences: matching
            .differences
            .iter()
            .map(|(field, b, c)| Difference {
                field: field.clone(),
                base: b.clone(),
                cand: c.clone(),
            })
            .collect(),
        points,
        only_base: matching.only_base,
        only_cand: matching.only_cand,
    })
}

fn point(p: &points::Point, alpha: f64, pairing: Pairing) -> PointComparison {
    let figures: Vec<verdict::Judged> = figures::present(&p.base, &p.cand)
        .iter()
        .filter_map(|f| {
            let base: Vec<f64> = p.base.iter().filter_map(|r| f.value(r)).collect();
            let cand: Vec<f64> = p.cand.iter().filter_map(|r| f.value(r)).collect();
            // Runs without a percentile's value had too small a sample for it.
            let short = match f.is_percentile() {
                true => (p.base.len() - base.len(), p.cand.len() - cand.len()),
                false => (0, 0),
            };
            if base.is_empty() || cand.is_empty() {
                return None;
            }
            let mut judged = verdict::judge(f, base, cand, alpha);
            judged.verdict = judged.verdict.with_short(short.0, short.1);
            if pairing == Pairing::ByRepeat {
                judged.pairs = pairs(f, &p.base, &p.cand);
            }
            Some(judged)
        })
        .collect();
    let dirs = |runs: &[&load::Run]| runs.iter().map(|r| r.dir.display().to_string()).collect();
    PointComparison {
        label: p.label.clone(),
        key: p.key.iter().cloned().collect(),
        base_dirs: dirs(&p.base),
        cand_dirs: dirs(&p.cand),
        noisy: noisy(&figures, &p.base, &p.cand),
        figures,
        distribution: distribution::compare(&p.base, &p.cand, alpha),
    }
}

/// The figure's values of the runs with the same repeat index on both sides, in repeat
/// order. None at all when a side holds a repeat index twice (the pairing is ambiguous)
/// or a run has none.
fn pairs(f: &figures::Figure, base: &[&load::Run], cand: &[&load::Run]) -> Vec<(f64, f64)> {
    let by_repeat = |runs: &[&load::Run]| -> Option<BTreeMap<u32, Option<f64>>> {
        let mut map = BTreeMap::new();
        for r in runs {
            if map.insert(r.repeat?, f.value(r)).is_some() {
                return None;
            }
        }
        Some(map)
    };
    let (Some(b), Some(c)) = (by_repeat(base), by_repeat(cand)) else {
        return Vec::new();
    };
    b.iter()
        .filter_map(|(repeat, bv)| Some(((*bv)?, (*c.get(repeat)?)?)))
        .collect()
}

/// The point's noise ([`coordbench_results::noise`]): each ratio figure whose repeats on a
/// side differ by more than the threshold, and the runs whose generator waited for a CPU
/// beyond its share of the window.
fn noisy(figures: &[verdict::Judged], base: &[&load::Run], cand: &[&load::Run]) -> Vec<String> {
    let mut lines = Vec::new();
    for f in figures.iter().filter(|f| f.scale == figures::Scale::Ratio) {
        let sides = [("baseline", &f.base_values), ("candidate", &f.cand_values)];
        let spread: Vec<String> = sides
            .iter()
            .filter_map(|(side, values)| {
                let ratio = noise::repeat_spread(values)?;
                Some(format!("{side} repeats ×{ratio:.2}"))
            })
            .collect();
        if !spread.is_empty() {
            lines.push(format!(
                "{}: too noisy to judge ({} > ×{})",
                f.figure,
                spread.join(", "),
                noise::REPEAT_SPREAD
            ));
        }
    }
    for (side, runs) in [("baseline", base), ("candidate", cand)] {
        let waited = runs
            .iter()
            .filter(|r| {
                r.cpu_wait_share
                    .is_some_and(|s| noise::cpu_wait(s, 1.0).is_some())
            })
            .count();
        if waited > 0 {
            lines.push(format!(
                "{side}: the generator waited for a CPU over {:.0}% of the window in {waited} of {} runs: latencies include the wait",
                noise::CPU_WAIT_SHARE * 100.0,
                runs.len()
            ));
        }
    }
    lines
}

fn side_info(paths: &[PathBuf], side: &load::Side) -> SideInfo {
    SideInfo {
        paths: paths.iter().map(|p| p.display().to_string()).collect(),
        runs: side.runs.len(),
        incomplete: side
            .incomplete
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    }
}

fn list(labels: &[String]) -> String {
    if labels.is_empty() {
        "nothing else".into()
    } else {
        labels.join("; ")
    }
}

/// `coordbench compare BASE CAND`.
pub fn run(args: &CompareArgs) -> Result<Outcome, UsageError> {
    let pairing = if args.paired {
        Pairing::ByRepeat
    } else {
        Pairing::Unpaired
    };
    let comparison = compare_with(&args.base_paths(), &args.cand_paths(), args.alpha, pairing)
        .map_err(|e| UsageError(coordbench_results::outcome::one_line(&e.to_string())))?;
    let checks = match &args.thresholds {
        Some(file) => {
            let (limits, false_alarm) =
                thresholds::load(file).map_err(|e| UsageError(e.to_string()))?;
            Some(checks::evaluate(&limits, &comparison, false_alarm))
        }
        None => None,
    };
    let text = match args.format {
        CompareFormat::Table => render::table(&comparison, checks.as_deref()),
        CompareFormat::Markdown => render::markdown(&comparison, checks.as_deref()),
        CompareFormat::Json => render::json(&comparison, checks.as_deref()),
    };
    print!("{text}");
    let Some(checks) = checks else {
        return Ok(Outcome::Complete);
    };
    let unjudged = checks
        .iter()
        .filter(|c| c.outcome == checks::CheckOutcome::NoVerdict)
        .count();
    if checks
        .iter()
        .any(|c| c.outcome == checks::CheckOutcome::Breached)
    {
        return Ok(Outcome::Breached);
    }
    if unjudged > 0 {
        return Err(UsageError(format!(
            "{unjudged} threshold checks could not be judged: too few repeats (need {} per side)",
            comparison.min_repeats
        )));
    }
    Ok(Outcome::Complete)
}
