//! The figures a comparison judges, where each comes from, and which way is better.
//! Every figure is a summary.csv column (docs/reference.md documents them) except the error counts
//! by kind, `errors.<kind>`, which come from run.json `results.errors_by_kind`.

use super::load::Run;
use coordbench_results::tails;

/// Which direction is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
}

/// How two sides' values are related: as a ratio (positive quantities: rates, times,
/// sizes) or as a difference (counts, which are often zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    Ratio,
    Shift,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    pub name: String,
    pub better: Better,
    pub scale: Scale,
}

/// summary.csv columns compared, in output order.
const COLUMNS: &[(&str, Better, Scale)] = &[
    ("throughput_ops_s", Better::Higher, Scale::Ratio),
    ("p50_us", Better::Lower, Scale::Ratio),
    ("p99_us", Better::Lower, Scale::Ratio),
    ("p999_us", Better::Lower, Scale::Ratio),
    ("handover_p50_us", Better::Lower, Scale::Ratio),
    ("handover_p99_us", Better::Lower, Scale::Ratio),
    ("notifications_per_release", Better::Lower, Scale::Ratio),
    ("requests_per_release", Better::Lower, Scale::Ratio),
    ("propagation_p99_us", Better::Lower, Scale::Ratio),
    ("notify_last_p99_us", Better::Lower, Scale::Ratio),
    ("errors", Better::Lower, Scale::Shift),
    ("violations", Better::Lower, Scale::Shift),
    ("split_brains", Better::Lower, Scale::Shift),
    ("missed_versions", Better::Lower, Scale::Shift),
    ("unpropagated", Better::Lower, Scale::Shift),
    ("stale_writes_accepted", Better::Lower, Scale::Shift),
    ("server_cpu_us_per_op", Better::Lower, Scale::Ratio),
    ("client_cpu_us_per_op", Better::Lower, Scale::Ratio),
    ("engine_instructions_per_op", Better::Lower, Scale::Ratio),
    ("server_peak_rss_mb", Better::Lower, Scale::Ratio),
    ("detect_p50_us", Better::Lower, Scale::Ratio),
    ("new_leader_p50_us", Better::Lower, Scale::Ratio),
    ("new_leader_max_us", Better::Lower, Scale::Ratio),
    ("first_write_p50_us", Better::Lower, Scale::Ratio),
    ("unavailable_max_us", Better::Lower, Scale::Ratio),
];

/// The percentile a column of the run's own latency is (p50_us: 0.5); `None` for others,
/// whose percentiles are over other samples (handovers, propagations).
fn latency_percentile(column: &str) -> Option<f64> {
    match column {
        "p50_us" => Some(0.5),
        "p99_us" => Some(0.99),
        "p999_us" => Some(0.999),
        _ => None,
    }
}

/// The prefix of error counts by kind.
pub const ERRORS_BY_KIND: &str = "errors.";

impl Figure {
    /// A known figure by name: a compared column, or `errors.<kind>`.
    pub fn named(name: &str) -> Option<Figure> {
        if let Some(kind) = name.strip_prefix(ERRORS_BY_KIND) {
            return (!kind.is_empty()).then(|| Figure {
                name: name.to_string(),
                better: Better::Lower,
                scale: Scale::Shift,
            });
        }
        COLUMNS
            .iter()
            .find(|(c, _, _)| *c == name)
            .map(|&(c, better, scale)| Figure {
                name: c.to_string(),
                better,
                scale,
            })
    }

    /// Whether this figure is a latency percentile, which a run's sample may be too small
    /// to support ([`tails::supported`]).
    pub fn is_percentile(&self) -> bool {
        latency_percentile(&self.name).is_some()
    }

    /// Every figure's name, for error messages.
    pub fn names() -> Vec<&'static str> {
        COLUMNS.iter().map(|(c, _, _)| *c).collect()
    }

    /// The value one run measured, if it measured it. An error kind a run did not see
    /// counts as zero; a latency percentile the run's sample cannot support
    /// ([`tails::supported`]) was not measured.
    pub fn value(&self, run: &Run) -> Option<f64> {
        match self.name.strip_prefix(ERRORS_BY_KIND) {
            Some(kind) => Some(run.errors_by_kind.get(kind).copied().unwrap_or(0) as f64),
            None => {
                let value = run.summary.num(&self.name);
                match latency_percentile(&self.name) {
                    Some(p) => tails::shown(run.summary.latency_n(), p, value),
                    None => value,
                }
            }
        }
    }
}

/// The figures measured by at least one run of each side, in output order: the columns,
/// then every error kind either side saw.
pub fn present(base: &[&Run], cand: &[&Run]) -> Vec<Figure> {
    let measured = |f: &Figure, runs: &[&Run]| runs.iter().any(|r| f.value(r).is_some());
    let mut figures: Vec<Figure> = COLUMNS
        .iter()
        .filter_map(|(c, _, _)| Figure::named(c))
        .filter(|f| measured(f, base) && measured(f, cand))
        .collect();
    let mut kinds: Vec<&String> = base
        .iter()
        .chain(cand)
        .flat_map(|r| r.errors_by_kind.keys())
        .collect();
    kinds.sort();
    kinds.dedup();
    figures.extend(
        kinds
            .into_iter()
            .filter_map(|k| Figure::named(&format!("{ERRORS_BY_KIND}{k}"))),
    );
    figures
}
