//! Thresholds: the limits a gate holds a candidate to, written per figure in a spec's
//! `[thresholds]` table (`throughput_ops_s = { max_drop = "5%" }`), and their evaluation
//! against a [`Comparison`], one check per threshold and point.
//!
//! A relative limit (`max_drop`, `max_rise`) is breached only when the difference is
//! significant (the figure's verdict is not "~") and its estimate is beyond the limit, as
//! criterion's noise threshold and benchstat's "~" intend. An absolute limit (`max`, `min`)
//! is a bound on every candidate repeat: one violation in one repeat is a breach.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use toml::Spanned;

use super::figures::{Figure, Scale};
use super::verdict::{Judged, Verdict};
use super::Comparison;
use crate::sweep::spec::SpecError;

/// One limit on one figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "rule", content = "limit", rename_all = "snake_case")]
pub enum Rule {
    /// The figure may fall by at most this fraction (0.05 for "5%").
    MaxDrop(f64),
    /// The figure may rise by at most this fraction.
    MaxRise(f64),
    /// No candidate repeat may exceed this value.
    Max(f64),
    /// No candidate repeat may fall below this value.
    Min(f64),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Threshold {
    pub figure: String,
    #[serde(flatten)]
    pub rule: Rule,
}

impl Threshold {
    /// `throughput_ops_s max_drop 5%`.
    pub fn name(&self) -> String {
        match self.rule {
            Rule::MaxDrop(f) => format!("{} max_drop {}", self.figure, percent(f)),
            Rule::MaxRise(f) => format!("{} max_rise {}", self.figure, percent(f)),
            Rule::Max(v) => format!("{} max {}", self.figure, number(v)),
            Rule::Min(v) => format!("{} min {}", self.figure, number(v)),
        }
    }
}

/// The `[thresholds]` table as toml gives it: figure → inline table, with spans.
pub type RawThresholds = BTreeMap<String, Spanned<BTreeMap<String, Spanned<toml::Value>>>>;

/// Checks a `[thresholds]` table. `text` is the whole file, for line numbers in errors.
pub fn parse(file: &Path, text: &str, raw: &RawThresholds) -> Result<Vec<Threshold>, SpecError> {
    let invalid = |offset: usize, field: String, message: String| SpecError::Invalid {
        file: file.display().to_string(),
        line: line_of(text, offset),
        field,
        message,
    };
    let mut thresholds = Vec::new();
    for (name, rules) in raw {
        let field = format!("thresholds.{name}");
        if Figure::named(name).is_none() {
            return Err(invalid(
                rules.span().start,
                field,
                format!(
                    "unknown figure; expected errors.<kind> or one of {}",
                    Figure::names().join(", ")
                ),
            ));
        }
        if rules.get_ref().is_empty() {
            return Err(invalid(
                rules.span().start,
                field,
                "give a limit: max_drop, max_rise, max or min".into(),
            ));
        }
        for (key, value) in rules.get_ref() {
            let at = |m: String| invalid(value.span().start, format!("{field}.{key}"), m);
            let rule = match key.as_str() {
                "max_drop" => Rule::MaxDrop(fraction(value.get_ref(), 100.0).map_err(at)?),
                "max_rise" => Rule::MaxRise(fraction(value.get_ref(), f64::INFINITY).map_err(at)?),
                "max" => Rule::Max(bound(value.get_ref()).map_err(at)?),
                "min" => Rule::Min(bound(value.get_ref()).map_err(at)?),
                _ => {
                    return Err(at(
                        "unknown limit; expected max_drop, max_rise, max or min".into()
                    ))
                }
            };
            thresholds.push(Threshold {
                figure: name.clone(),
                rule,
            });
        }
    }
    Ok(thresholds)
}

/// Reads the `[thresholds]` table of any TOML file (a gate spec, or a file of its own).
pub fn load(file: &Path) -> Result<Vec<Threshold>, SpecError> {
    #[derive(serde::Deserialize)]
    struct OnlyThresholds {
        thresholds: Option<RawThresholds>,
    }
    let text = std::fs::read_to_string(file).map_err(|source| SpecError::Read {
        file: file.display().to_string(),
        source,
    })?;
    let raw: OnlyThresholds = toml::from_str(&text).map_err(|e| SpecError::Invalid {
        file: file.display().to_string(),
        line: e.span().map_or(1, |s| line_of(&text, s.start)),
        field: "thresholds".into(),
        message: crate::app::one_line(e.message()),
    })?;
    let Some(raw) = raw.thresholds.filter(|t| !t.is_empty()) else {
        return Err(SpecError::Invalid {
            file: file.display().to_string(),
            line: 1,
            field: "thresholds".into(),
            message: "no [thresholds] table; add e.g. throughput_ops_s = { max_drop = \"5%\" }"
                .into(),
        });
    };
    parse(file, &text, &raw)
}

fn line_of(text: &str, offset: usize) -> usize {
    crate::sweep::spec::line_of(text, offset)
}

/// `"5%"` → 0.05; the percentage must be at least 0 and below `below` (a drop of 100%
/// would allow anything).
fn fraction(value: &toml::Value, below: f64) -> Result<f64, String> {
    let wrong = || "write a percentage such as \"5%\"".to_string();
    let text = value.as_str().ok_or_else(wrong)?;
    let number = text.trim().strip_suffix('%').ok_or_else(wrong)?;
    match number.trim().parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 && p < below => Ok(p / 100.0),
        _ if below.is_finite() => Err(format!("a percentage from 0% to below {below}%")),
        _ => Err("a percentage of 0% or more".into()),
    }
}

fn bound(value: &toml::Value) -> Result<f64, String> {
    match value {
        toml::Value::Integer(i) => Ok(*i as f64),
        toml::Value::Float(f) if f.is_finite() => Ok(*f),
        _ => Err("write a number, e.g. max = 0".into()),
    }
}

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
    /// Why, in a few words: `-14.2% [-16.0%, -12.1%], p=0.008`.
    pub detail: String,
    pub base_median: f64,
    pub cand_median: f64,
}

/// Every threshold at every point that measured its figure, point by point.
pub fn evaluate(thresholds: &[Threshold], comparison: &Comparison) -> Vec<Check> {
    let mut checks = Vec::new();
    for point in &comparison.points {
        for threshold in thresholds {
            let Some(judged) = point.figures.iter().find(|j| j.figure == threshold.figure) else {
                continue;
            };
            let (outcome, detail) = check(threshold, judged);
            checks.push(Check {
                threshold: threshold.name(),
                point: point.label.clone(),
                outcome,
                detail,
                base_median: judged.base_median,
                cand_median: judged.cand_median,
            });
        }
    }
    checks
}

fn check(threshold: &Threshold, judged: &Judged) -> (CheckOutcome, String) {
    match threshold.rule {
        Rule::Max(limit) => absolute(judged, |v| v > limit, "above"),
        Rule::Min(limit) => absolute(judged, |v| v < limit, "below"),
        Rule::MaxDrop(f) => relative(judged, |change| change < -f),
        Rule::MaxRise(f) => relative(judged, |change| change > f),
    }
}

fn absolute(judged: &Judged, beyond: impl Fn(f64) -> bool, word: &str) -> (CheckOutcome, String) {
    let outside: Vec<f64> = judged
        .cand_values
        .iter()
        .copied()
        .filter(|v| beyond(*v))
        .collect();
    let repeats = judged.cand_values.len();
    match outside.first() {
        None => (
            CheckOutcome::Passed,
            format!("all {repeats} repeats within"),
        ),
        Some(first) => (
            CheckOutcome::Breached,
            format!(
                "{} of {repeats} repeats {word} the limit (e.g. {})",
                outside.len(),
                number(*first)
            ),
        ),
    }
}

/// The relative change cand/base − 1 and whether the verdict makes it significant.
fn relative(judged: &Judged, beyond: impl Fn(f64) -> bool) -> (CheckOutcome, String) {
    if let Verdict::NoVerdict { .. } = judged.verdict {
        return (CheckOutcome::NoVerdict, judged.verdict.text());
    }
    let change = match (judged.scale, judged.ratio()) {
        (Scale::Ratio, Some(r)) => r - 1.0,
        _ if judged.base_median == 0.0 && judged.cand_median == 0.0 => 0.0,
        _ if judged.base_median == 0.0 => f64::INFINITY.copysign(judged.cand_median),
        _ => judged.cand_median / judged.base_median - 1.0,
    };
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
    let p = judged
        .p_value
        .map(|p| format!(", p={p:.3}"))
        .unwrap_or_default();
    let detail = format!("{}{interval}{p}", signed_percent(change));
    let significant = matches!(judged.verdict, Verdict::Better | Verdict::Worse);
    if significant && beyond(change) {
        (CheckOutcome::Breached, detail)
    } else {
        (
            CheckOutcome::Passed,
            if significant {
                detail
            } else {
                format!("{detail} (~)")
            },
        )
    }
}

fn percent(f: f64) -> String {
    format!("{}%", number(f * 100.0))
}

pub fn signed_percent(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 {
            "+inf%".into()
        } else {
            "-inf%".into()
        };
    }
    format!("{:+.1}%", f * 100.0)
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
