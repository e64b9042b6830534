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
//!
//! Which test gives a relative check its p-value: when the figure's runs came in pairs (a
//! gate's interleaved repeats, [`super::Pairing::ByRepeat`]) and there are enough pairs for
//! the paired test to reach the strictest level Holm can hold any check to (2^-n <=
//! false_alarm / relative checks), the paired Wilcoxon signed-rank test of the pairs'
//! log-ratios, shifted by the limit, decides alone: "at most a 5% drop" is breached when the
//! median log-ratio is significantly below ln 0.95. Otherwise the unpaired Mann-Whitney U
//! test decides as above. The choice depends only on counts, never on the values, so it
//! does not spend the false-alarm budget. Each check names the test that decided it.

use serde::Serialize;

use super::figures::Scale;
use super::signed_rank;
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
    /// The test that decided: `paired Wilcoxon signed-rank, 10 pairs`, `Mann-Whitney U,
    /// unpaired, 5 vs 5 repeats`, or `every candidate repeat against the limit`.
    pub test: String,
}

/// A relative check before significance is decided.
struct Pending {
    index: usize,
    /// The estimate is beyond the limit.
    beyond: bool,
    /// Significance alone breaches (the test was shifted by the limit); otherwise the
    /// estimate must also be `beyond`.
    shifted: bool,
    p_one_sided: f64,
}

/// How a relative check is judged: the pairs the paired test needs ([`min_gate_pairs`])
/// and the comparison's alpha (for intervals).
#[derive(Clone, Copy)]
struct Levels {
    min_pairs: usize,
    alpha: f64,
}

/// The test an absolute limit uses, as checks name it.
pub const ABSOLUTE_TEST: &str = "every candidate repeat against the limit";

/// Every threshold at every point that measured its figure, point by point.
pub fn evaluate(thresholds: &[Threshold], comparison: &Comparison, false_alarm: f64) -> Vec<Check> {
    let relative_checks = comparison
        .points
        .iter()
        .flat_map(|p| thresholds.iter().map(move |t| (p, t)))
        .filter(|(_, t)| matches!(t.rule, Rule::MaxDrop(_) | Rule::MaxRise(_)))
        .filter(|(p, t)| p.figures.iter().any(|j| j.figure == t.figure))
        .count();
    let levels = Levels {
        min_pairs: min_gate_pairs(relative_checks, false_alarm),
        alpha: comparison.alpha,
    };
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
                test: ABSOLUTE_TEST.into(),
            };
            let index = checks.len();
            match threshold.rule {
                Rule::Max(limit) => absolute(&mut check, judged, |v| v > limit, "above"),
                Rule::Min(limit) => absolute(&mut check, judged, |v| v < limit, "below"),
                Rule::MaxDrop(f) => pending.extend(relative(&mut check, judged, index, -f, levels)),
                Rule::MaxRise(f) => pending.extend(relative(&mut check, judged, index, f, levels)),
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
fn relative(
    check: &mut Check,
    judged: &Judged,
    index: usize,
    limit: f64,
    levels: Levels,
) -> Option<Pending> {
    if let Some(pending) = paired(check, judged, index, limit, levels) {
        return Some(pending);
    }
    check.test = format!(
        "Mann-Whitney U, unpaired, {} vs {} repeats",
        judged.base_values.len(),
        judged.cand_values.len()
    );
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
    // The sign of `limit` names the direction, even at 0 (`max_drop = "0%"` is −0.0).
    let guards_drop = limit.is_sign_negative();
    let toward = if guards_drop {
        change < 0.0
    } else {
        change > 0.0
    };
    let p_one_sided = if toward {
        p_two / 2.0
    } else {
        1.0 - p_two / 2.0
    };
    let beyond = if guards_drop {
        change < limit
    } else {
        change > limit
    };
    Some(Pending {
        index,
        beyond,
        shifted: false,
        p_one_sided,
    })
}

/// The paired judgement, when the figure's pairs can decide (a ratio figure with enough
/// pairs to reach the strictest Holm level): the signed-rank test of the pairs' log-ratios
/// shifted by ln(1 + limit), one-sided in the limit's direction. The change shown is the
/// pairs' Hodges–Lehmann ratio with its interval.
fn paired(
    check: &mut Check,
    judged: &Judged,
    index: usize,
    limit: f64,
    levels: Levels,
) -> Option<Pending> {
    let n = judged.pairs.len();
    if judged.scale != Scale::Ratio || n < levels.min_pairs {
        return None;
    }
    let (base, cand): (Vec<f64>, Vec<f64>) = judged.pairs.iter().copied().unzip();
    let logs = signed_rank::log_ratios(&base, &cand)?;
    let shift = (1.0 + limit).ln();
    let shifted: Vec<f64> = logs.iter().map(|d| d - shift).collect();
    let test = signed_rank::signed_rank(&shifted)?;
    let interval = signed_rank::walsh_interval(&logs, levels.alpha);
    let centre = interval.map_or_else(|| stats::median(&logs).unwrap_or(0.0), |i| i.estimate);
    let change = centre.exp() - 1.0;
    check.detail = match interval {
        Some(i) => format!(
            "{} [{}, {}]",
            signed_percent(change),
            signed_percent(i.low.exp() - 1.0),
            signed_percent(i.high.exp() - 1.0)
        ),
        None => signed_percent(change),
    };
    check.test = format!("paired Wilcoxon signed-rank, {n} pairs");
    Some(Pending {
        index,
        beyond: if limit.is_sign_negative() {
            change < limit
        } else {
            change > limit
        },
        shifted: true,
        p_one_sided: if limit.is_sign_negative() {
            test.p_below
        } else {
            test.p_above
        },
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
        if rejecting && (p.beyond || p.shifted) {
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

/// The fewest pairs with which the paired test can breach at all in a gate of
/// `relative_checks` relative checks: its smallest one-sided p, 2^-n, must reach the
/// strictest Holm level, false_alarm / relative_checks.
pub fn min_gate_pairs(relative_checks: usize, false_alarm: f64) -> usize {
    let level = false_alarm / relative_checks.max(1) as f64;
    (1..=1000)
        .find(|&n| stats::reaches_alpha(signed_rank::min_p_one_sided(n), level))
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::figures::Figure;
    use crate::compare::{verdict, PointComparison, SideInfo};

    /// A comparison of one point's throughput from (baseline, candidate) pairs.
    fn comparison(pairs: &[(f64, f64)], paired: bool) -> Comparison {
        let figure = Figure::named("throughput_ops_s").unwrap();
        let (base, cand): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
        let mut judged = verdict::judge(&figure, base, cand, 0.10);
        if paired {
            judged.pairs = pairs.to_vec();
        }
        let side = || SideInfo {
            paths: Vec::new(),
            runs: pairs.len(),
            incomplete: Vec::new(),
        };
        Comparison {
            method: crate::compare::METHOD,
            alpha: 0.10,
            min_repeats: 3,
            base: side(),
            cand: side(),
            differences: Vec::new(),
            points: vec![PointComparison {
                label: "raft kv-put".into(),
                key: Default::default(),
                base_dirs: Vec::new(),
                cand_dirs: Vec::new(),
                figures: vec![judged],
                distribution: None,
                noisy: Vec::new(),
            }],
            only_base: Vec::new(),
            only_cand: Vec::new(),
        }
    }

    fn drop_limit(percent: f64) -> Threshold {
        Threshold {
            figure: "throughput_ops_s".into(),
            rule: Rule::MaxDrop(percent / 100.0),
        }
    }

    /// Ten pairs whose level drifts ±30% from pair to pair while the candidate is 12% below
    /// its baseline partner every time (±1%): the sides' ranges overlap, so the unpaired
    /// test cannot tell them apart, but every pair's log-ratio is below ln 0.95.
    fn drifting_pairs() -> Vec<(f64, f64)> {
        let levels = [
            1000.0, 1300.0, 760.0, 1150.0, 900.0, 1250.0, 800.0, 1050.0, 950.0, 1200.0,
        ];
        let wobble = [
            0.0, 0.01, -0.01, 0.005, -0.005, 0.0, 0.008, -0.008, 0.003, -0.003,
        ];
        levels
            .iter()
            .zip(wobble)
            .map(|(b, w)| (*b, b * (0.88 + w)))
            .collect()
    }

    #[test]
    fn pairs_decide_when_they_can_reach_the_strictest_level() {
        let pairs = drifting_pairs();
        let checks = evaluate(&[drop_limit(5.0)], &comparison(&pairs, true), 0.05);
        assert_eq!(checks[0].test, "paired Wilcoxon signed-rank, 10 pairs");
        assert_eq!(checks[0].outcome, CheckOutcome::Breached, "{:?}", checks[0]);
        // Every shifted log-ratio is negative: the exact one-sided p is 2^-10.
        assert_eq!(checks[0].p_value, Some(1.0 / 1024.0));
        assert!(checks[0].detail.starts_with("-12."), "{}", checks[0].detail);

        // Unpaired, the same runs show no significant change.
        let checks = evaluate(&[drop_limit(5.0)], &comparison(&pairs, false), 0.05);
        assert_eq!(checks[0].test, "Mann-Whitney U, unpaired, 10 vs 10 repeats");
        assert_eq!(checks[0].outcome, CheckOutcome::Passed, "{:?}", checks[0]);

        // A 15% limit: the pairs show a drop, but not beyond it.
        let checks = evaluate(&[drop_limit(15.0)], &comparison(&pairs, true), 0.05);
        assert_eq!(checks[0].outcome, CheckOutcome::Passed, "{:?}", checks[0]);
        assert!(checks[0].p_value.unwrap() > 0.5);
    }

    #[test]
    fn a_zero_drop_limit_still_guards_drops() {
        // `max_drop = "0%"` is a limit of −0.0: any significant drop breaches it, a rise
        // never does.
        let pairs = drifting_pairs();
        let checks = evaluate(&[drop_limit(0.0)], &comparison(&pairs, true), 0.05);
        assert_eq!(checks[0].outcome, CheckOutcome::Breached, "{:?}", checks[0]);
        let risen: Vec<(f64, f64)> = pairs.iter().map(|(b, c)| (*c, *b)).collect();
        let checks = evaluate(&[drop_limit(0.0)], &comparison(&risen, true), 0.05);
        assert_eq!(checks[0].outcome, CheckOutcome::Passed, "{:?}", checks[0]);
        let checks = evaluate(&[drop_limit(0.0)], &comparison(&risen, false), 0.05);
        assert_eq!(checks[0].outcome, CheckOutcome::Passed, "{:?}", checks[0]);
    }

    #[test]
    fn too_few_pairs_for_the_budget_fall_back_to_the_unpaired_test() {
        // 5 pairs reach 2^-5 = 0.031 at best: enough for one check at 0.05, not for a
        // false_alarm of 0.01.
        let pairs = &drifting_pairs()[..5];
        let checks = evaluate(&[drop_limit(5.0)], &comparison(pairs, true), 0.05);
        assert_eq!(checks[0].test, "paired Wilcoxon signed-rank, 5 pairs");
        assert_eq!(checks[0].outcome, CheckOutcome::Breached);
        let checks = evaluate(&[drop_limit(5.0)], &comparison(pairs, true), 0.01);
        assert_eq!(checks[0].test, "Mann-Whitney U, unpaired, 5 vs 5 repeats");
        assert_eq!(checks[0].outcome, CheckOutcome::Passed);
    }

    #[test]
    fn the_repeats_a_gate_needs_grow_with_its_checks() {
        assert_eq!(min_gate_repeats(1, 0.05), 3);
        assert_eq!(min_gate_repeats(2, 0.05), 4);
        assert_eq!(min_gate_repeats(8, 0.05), 5);
        assert_eq!(min_gate_repeats(40, 0.05), 6);
    }

    #[test]
    fn the_pairs_a_gate_needs_grow_with_its_checks() {
        let checks = [1, 2, 3, 4, 6, 7, 12, 13];
        let pairs = checks.map(|k| min_gate_pairs(k, 0.05));
        assert_eq!(pairs, [5, 6, 6, 7, 7, 8, 8, 9]);
        // The gate test's spec: 2 relative checks at false_alarm 0.01.
        assert_eq!(min_gate_pairs(2, 0.01), 8);
    }
}
