//! One figure of one point judged: the sides' medians, the Hodges–Lehmann ratio (or
//! difference, for counts) with its distribution-free confidence interval, the exact
//! Mann-Whitney p-value over the repeats, and the verdict. docs/reference.md ("Comparing runs")
//! states the method.

use serde::Serialize;

use super::figures::{Better, Figure, Scale};
use super::stats::{self, Interval};

/// What the repeats say.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    /// No significant difference ("~").
    Same,
    /// Too few repeats for the test to reach alpha at all. `base` and `cand` count the
    /// repeats that measured the figure; `*_short` the repeats whose sample was too small for
    /// this latency percentile ([`coordbench_results::tails::supported`]), so that a reader
    /// is told to run longer windows, not more repeats.
    NoVerdict {
        base: usize,
        cand: usize,
        need: usize,
        #[serde(default, skip_serializing_if = "is_zero")]
        base_short: usize,
        #[serde(default, skip_serializing_if = "is_zero")]
        cand_short: usize,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Verdict {
    /// `better`, `worse`, `~`, `no verdict: 1 repeat, need 3`, or, when repeats lacked the
    /// operations a percentile needs, `no verdict: 1 of 3 baseline and 3 of 3 candidate
    /// repeats had enough operations beyond this percentile, need 3 each (longer windows)`.
    pub fn text(&self) -> String {
        match self {
            Verdict::Better => "better".into(),
            Verdict::Worse => "worse".into(),
            Verdict::Same => "~".into(),
            Verdict::NoVerdict {
                base,
                cand,
                need,
                base_short,
                cand_short,
            } if base_short + cand_short > 0 => format!(
                "no verdict: {base} of {} baseline and {cand} of {} candidate repeats had enough \
                 operations beyond this percentile, need {need} each (longer windows)",
                base + base_short,
                cand + cand_short
            ),
            Verdict::NoVerdict {
                base, cand, need, ..
            } if base == cand => {
                let s = if *base == 1 { "" } else { "s" };
                format!("no verdict: {base} repeat{s}, need {need}")
            }
            Verdict::NoVerdict {
                base, cand, need, ..
            } => {
                format!("no verdict: {base} and {cand} repeats, need {need} each")
            }
        }
    }

    /// Notes how many repeats per side could not support the figure (a latency percentile
    /// beyond their sample), so that a missing verdict names that cause.
    pub fn with_short(self, base_short: usize, cand_short: usize) -> Verdict {
        match self {
            Verdict::NoVerdict {
                base, cand, need, ..
            } => Verdict::NoVerdict {
                base,
                cand,
                need,
                base_short,
                cand_short,
            },
            other => other,
        }
    }
}

/// One figure of one point, both sides.
#[derive(Debug, Clone, Serialize)]
pub struct Judged {
    pub figure: String,
    pub better: Better,
    /// `ratio` (cand / base) or `shift` (cand − base): how `estimate` and the interval read.
    pub scale: Scale,
    pub base_values: Vec<f64>,
    pub cand_values: Vec<f64>,
    pub base_median: f64,
    pub cand_median: f64,
    /// Hodges–Lehmann estimate with its confidence interval, when the repeats allow one.
    pub interval: Option<Interval>,
    pub p_value: Option<f64>,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// (baseline, candidate) values of the runs that ran as a pair (same repeat of a
    /// gate), in repeat order; empty when the comparison is not paired.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<(f64, f64)>,
}

impl Judged {
    /// The ratio of the sides' medians, if this figure is compared as a ratio: the change a
    /// reader sees between the baseline and candidate columns (the Hodges–Lehmann estimate,
    /// the centre of the interval, is in `interval.estimate`).
    pub fn ratio(&self) -> Option<f64> {
        match self.scale {
            Scale::Ratio => (self.base_median > 0.0).then(|| self.cand_median / self.base_median),
            Scale::Shift => None,
        }
    }
}

/// Judges `figure` from each side's repeat values (both non-empty).
pub fn judge(figure: &Figure, base: Vec<f64>, cand: Vec<f64>, alpha: f64) -> Judged {
    let base_median = stats::median(&base).unwrap_or(f64::NAN);
    let cand_median = stats::median(&cand).unwrap_or(f64::NAN);
    // Ratios need positive values; a figure that was zero somewhere is compared as a shift.
    let positive = base.iter().chain(&cand).all(|v| *v > 0.0);
    let scale = if figure.scale == Scale::Ratio && positive {
        Scale::Ratio
    } else {
        Scale::Shift
    };
    let decidable = stats::reaches_alpha(stats::min_p_value(base.len(), cand.len()), alpha);
    let (interval, p_value, verdict) = if !decidable {
        let need = stats::min_samples(alpha);
        (
            None,
            None,
            Verdict::NoVerdict {
                base: base.len(),
                cand: cand.len(),
                need,
                base_short: 0,
                cand_short: 0,
            },
        )
    } else {
        let interval = match scale {
            Scale::Ratio => stats::ratio_interval(&base, &cand, alpha),
            Scale::Shift => stats::shift_interval(&base, &cand, alpha),
        };
        let test = stats::mann_whitney(&base, &cand);
        let p = test.as_ref().map(|t| t.p_value);
        let verdict = match test {
            Some(t) if stats::reaches_alpha(t.p_value, alpha) => {
                // U counts pairs where the candidate is larger.
                let cand_larger = t.u > (base.len() * cand.len()) as f64 / 2.0;
                if cand_larger == (figure.better == Better::Higher) {
                    Verdict::Better
                } else {
                    Verdict::Worse
                }
            }
            _ => Verdict::Same,
        };
        (interval, p, verdict)
    };
    Judged {
        figure: figure.name.clone(),
        better: figure.better,
        scale,
        base_values: base,
        cand_values: cand,
        base_median,
        cand_median,
        interval,
        p_value,
        verdict,
        pairs: Vec::new(),
    }
}
