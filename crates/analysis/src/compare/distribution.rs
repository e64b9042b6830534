//! Whole latency distributions side by side: every interval of every repeat's latency.hlog
//! merged into one histogram per side, read at a ladder of percentiles up to the maximum,
//! so a tail regression shows even when the medians agree. Each percentile is also judged
//! over the repeats (each repeat's own merged log is one sample), like any other figure.
//! A percentile is read only where both merged sides support it ([`tails::supported`]),
//! and judged over the repeats only where every repeat does; the maximum is always read.

use hdrhistogram::Histogram;
use serde::Serialize;

use super::figures::{Better, Figure, Scale};
use super::load::Run;
use super::verdict::{judge, Judged};
use crate::report::cdf::merge_log;
use coordbench_results::tails;

/// Percentiles read from the merged histograms; 100 is the maximum.
pub const PERCENTILES: [f64; 7] = [50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0];

/// One percentile of both sides.
#[derive(Debug, Clone, Serialize)]
pub struct Percentile {
    pub percentile: f64,
    /// Value at this percentile of the side's merged histogram, µs.
    pub base_us: u64,
    pub cand_us: u64,
    /// Judged over the repeats' own values at this percentile (those that support it).
    pub judged: Judged,
}

/// A side's distribution: the merged sample sizes and the percentiles read.
#[derive(Debug, Clone, Serialize)]
pub struct Distribution {
    /// Operations in each side's merged histogram.
    pub base_n: u64,
    pub cand_n: u64,
    pub percentiles: Vec<Percentile>,
    /// Percentiles of the ladder left out: a side's sample cannot support them.
    pub withheld: Vec<f64>,
}

/// The distribution comparison of one point; `None` when either side has no latency.hlog
/// with samples (copied summaries, workloads without latencies).
pub fn compare(base: &[&Run], cand: &[&Run], alpha: f64) -> Option<Distribution> {
    let (base_merged, base_runs) = histograms(base)?;
    let (cand_merged, cand_runs) = histograms(cand)?;
    let n = base_merged.len().min(cand_merged.len());
    let shown = |p: f64| p >= 100.0 || tails::supported(n, p / 100.0);
    let withheld = PERCENTILES.iter().copied().filter(|&p| !shown(p)).collect();
    let each = |runs: &[Histogram<u64>], p: f64| -> Vec<f64> {
        runs.iter()
            .filter(|h| p >= 100.0 || tails::supported(h.len(), p / 100.0))
            .map(|h| value_at(h, p) as f64)
            .collect()
    };
    let rows = PERCENTILES
        .iter()
        .copied()
        .filter(|&p| shown(p))
        .map(|percentile| {
            let at = |h: &Histogram<u64>| value_at(h, percentile);
            let figure = Figure {
                name: format!("latency p{}", trim(percentile)),
                better: Better::Lower,
                scale: Scale::Ratio,
            };
            let judged = judge(
                &figure,
                each(&base_runs, percentile),
                each(&cand_runs, percentile),
                alpha,
            );
            Percentile {
                percentile,
                base_us: at(&base_merged),
                cand_us: at(&cand_merged),
                judged,
            }
        })
        .collect();
    Some(Distribution {
        base_n: base_merged.len(),
        cand_n: cand_merged.len(),
        percentiles: rows,
        withheld,
    })
}

/// `99.9`, `50`, `100`.
pub fn trim(p: f64) -> String {
    let s = format!("{p:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn value_at(h: &Histogram<u64>, percentile: f64) -> u64 {
    if percentile >= 100.0 {
        h.max()
    } else {
        h.value_at_percentile(percentile)
    }
}

/// The side's merged histogram and each run's own; `None` if no run has samples.
fn histograms(runs: &[&Run]) -> Option<(Histogram<u64>, Vec<Histogram<u64>>)> {
    let mut merged = Histogram::<u64>::new(3).ok()?;
    let mut each = Vec::new();
    for run in runs {
        let mut h = Histogram::<u64>::new(3).ok()?;
        // A run without a readable log is left out of the distribution, not of the figures.
        if merge_log(&run.hlog(), &mut h).is_ok() && !h.is_empty() {
            merged.add(&h).ok()?;
            each.push(h);
        }
    }
    (!each.is_empty()).then_some((merged, each))
}
