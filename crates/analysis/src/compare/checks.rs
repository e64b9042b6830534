//! Thresholds held against a comparison: one check per threshold and point that measured
//! its figure, with the gate's false alarms bounded as a whole.
//!
//! An absolute limit (`max`, `min`) bounds every candidate repeat: one repeat beyond it is
//! a breach (a violation is never noise). A relative limit (`max_drop`, `max_rise`) is
//! breached only when the change is significant in the limit's direction *and* its estimate
//! is beyond the limit, as criterion's noise threshold and benchstat's "~" intend.
//! Significance is held to the gate's `false_alarm` bound across all its relative checks
//! together (Holm's step-down procedure on the one-sided p-values), so a gate of many points
//! and thresholds does not fail by chance more often than a gate of one.

use serde::Serialize;

use super::figures::Scale;
use super::stats;
use super::thresholds::{number, signed_percent, Rule, Threshold};
use super::verdict::{Judged, Verdict};
use super::Comparison;

/// How one threshold fared at one point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    Passed,
    Breached,
    /// A relative limit with too few repeats to judge.
    NoVerdict,
}

/// One threshold at one point.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub threshold: String,
    pub point: String,
    pub outcome: CheckOutcome,
    /// Why, in a few words: `-14.2% [-16.0%, -12.1%], p=0.004 <= 0.0063`.
    pub detail: String,
    pub base_median: f64,
    pub cand_median: f64,
    /// Relative limits: the one-sided p-value in the limit's direction and the level Holm's
    /// procedure held it to.
    pub p_value: Option<f64>,
    pub level: Option<f64>,
}

/// A relative check before significance is decided.
struct Pending {
    index: usize,
    beyond: bool,
    p_one_sided: f64,
}

/// Every threshold at every point that measured its figure, point by point.
pub fn evaluate(thresholds: &[Threshold], comparison: &Comparison, false_alarm: f64) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut pending = Vec::new();
    for point in &comparison.points {
        for threshold in thresholds {
            let Some(judged) = point.figures.iter().find(|j| j.figure == threshold.figure) else {
                continue;
            };
            let mut check = Check {
                threshold: threshold.name(),
                point: point.label.clone(),
                outcome: CheckOutcome::Passed,
                detail: String::new(),
                base_median: judged.base_median,
                cand_median: judged.cand_median,
                p_value: None,
                level: None,
            };
            match threshold.rule {
                Rule::Max(limit) => absolute(&mut check, judged, |v| v > limit, "above"),
                Rule::Min(limit) => absolute(&mut check, judged, |v| v < limit, "below"),
                Rule::MaxDrop(f) => pending.extend(relative(&mut check, judged, checks.len(), -f)),
                Rule::MaxRise(f) => pending.extend(relative(&mut check, judged, checks.len(), f)),
            }
            checks.push(check);
        }
    }
    holm(&mut checks, pending, false_alarm);
    checks
}

fn absolute(check: &mut Check, judged: &Judged, beyond: impl Fn(f64) -> bool, word: &str) {
    let outside: Vec<f64> = judged
        .cand_values
        .iter()
        .copied()
        .filter(|v| beyond(*v))
        .collect();
    let repeats = judged.cand_values.len();
    match outside.first() {
        None => check.detail = format!("all {repeats} repeats within"),
        Some(first) => {
            check.outcome = CheckOutcome::Breached;
            check.detail = format!(
                "{} of {repeats} repeats {word} the limit (e.g. {})",
                outside.len(),
                number(*first)
            );
        }
    }
}

/// Fills in the change; returns what significance must still decide. `limit` is signed:
/// −0.05 for a 5% drop, +0.10 for a 10% rise.
fn relative(check: &mut Check, judged: &Judged, index: usize, limit: f64) -> Option<Pending> {
    if let Verdict::NoVerdict { .. } = judged.verdict {
        check.outcome = CheckOutcome::NoVerdict;
        check.detail = judged.verdict.text();
        return None;
    }
    let change = relative_change(judged);
    let interval = judged
        .interval
        .as_ref()
        .filter(|_| judged.scale == Scale::Ratio)
        .map(|i| {
            format!(
                " [{}, {}]",
                signed_percent(i.low - 1.0),
                signed_percent(i.high - 1.0)
            )
        })
        .unwrap_or_default();
    check.detail = format!("{}{interval}", signed_percent(change));
    // The two-sided test's p halved, in the direction the limit guards.
    let p_two = judged.p_value.unwrap_or(1.0);
    let toward = change * limit > 0.0;
    let p_one_sided = if toward {
        p_two / 2.0
    } else {
        1.0 - p_two / 2.0
    };
    let beyond = if limit < 0.0 {
        change < limit
    } else {
        change > limit
    };
    Some(Pending {
        index,
        beyond,
        p_one_sided,
    })
}

/// cand/base − 1 of the sides' medians, as gate.md shows them.
fn relative_change(judged: &Judged) -> f64 {
    match (judged.scale, judged.ratio()) {
        (Scale::Ratio, Some(r)) => r - 1.0,
        _ if judged.base_median == 0.0 && judged.cand_median == 0.0 => 0.0,
        _ if judged.base_median == 0.0 => f64::INFINITY.copysign(judged.cand_median),
        _ => judged.cand_median / judged.base_median - 1.0,
    }
}

/// Holm's step-down procedure: the i-th smallest of k p-values is significant when it and
/// every smaller one reach false_alarm / (k − i). Bounds the chance of any false breach.
fn holm(checks: &mut [Check], mut pending: Vec<Pending>, false_alarm: f64) {
    pending.sort_by(|a, b| a.p_one_sided.total_cmp(&b.p_one_sided));
    let k = pending.len();
    let mut rejecting = true;
    for (i, p) in pending.iter().enumerate() {
        let level = false_alarm / (k - i) as f64;
        rejecting = rejecting && stats::reaches_alpha(p.p_one_sided, level);
        let check = &mut checks[p.index];
        check.p_value = Some(p.p_one_sided);
        check.level = Some(level);
        let relation = if rejecting { "<=" } else { ">" };
        check.detail.push_str(&format!(
            ", p={} {relation} {}",
            short(p.p_one_sided),
            short(level)
        ));
        if rejecting && p.beyond {
            check.outcome = CheckOutcome::Breached;
        } else if !rejecting && p.beyond {
            check.detail.push_str(" (not significant)");
        }
    }
}

fn short(p: f64) -> String {
    if p >= 0.01 {
        format!("{p:.3}")
    } else {
        format!("{p:.4}")
    }
}

/// The smallest repeats per side at which a gate with `relative_checks` relative checks can
/// breach at all at `false_alarm`: the smallest one-sided p of n vs n repeats, 1 / C(2n, n),
/// must reach the strictest Holm level, false_alarm / relative_checks.
pub fn min_gate_repeats(relative_checks: usize, false_alarm: f64) -> usize {
    let level = false_alarm / relative_checks.max(1) as f64;
    (1..=1000)
        .find(|&n| stats::reaches_alpha(stats::min_p_value(n, n) / 2.0, level))
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repeats_a_gate_needs_grow_with_its_checks() {
        assert_eq!(min_gate_repeats(1, 0.05), 3);
        assert_eq!(min_gate_repeats(2, 0.05), 4);
        assert_eq!(min_gate_repeats(8, 0.05), 5);
        assert_eq!(min_gate_repeats(40, 0.05), 6);
    }
}
