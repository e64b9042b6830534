//! Thresholds: the limits a gate holds a candidate to, written per figure in a spec's
//! `[thresholds]` table (`throughput_ops_s = { max_drop = "5%" }`), with the gate's
//! false-alarm bound (`false_alarm = 0.05`). [`super::checks`] evaluates them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use toml::Spanned;

use super::figures::Figure;
use coordbench_results::spec_error::{line_of, SpecError};

/// The default bound on the chance that a gate with no real change fails (any check).
pub const DEFAULT_FALSE_ALARM: f64 = 0.05;

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

/// Reads the `[thresholds]` table (and `false_alarm`, if set) of any TOML file: a gate
/// spec, or a file of its own.
pub fn load(file: &Path) -> Result<(Vec<Threshold>, f64), SpecError> {
    #[derive(serde::Deserialize)]
    struct OnlyThresholds {
        thresholds: Option<RawThresholds>,
        false_alarm: Option<Spanned<f64>>,
    }
    let text = std::fs::read_to_string(file).map_err(|source| SpecError::Read {
        file: file.display().to_string(),
        source,
    })?;
    let raw: OnlyThresholds = toml::from_str(&text).map_err(|e| SpecError::Invalid {
        file: file.display().to_string(),
        line: e.span().map_or(1, |s| line_of(&text, s.start)),
        field: "thresholds".into(),
        message: coordbench_results::outcome::one_line(e.message()),
    })?;
    let false_alarm = match raw.false_alarm {
        Some(f) => probability(*f.get_ref()).map_err(|m| SpecError::Invalid {
            file: file.display().to_string(),
            line: line_of(&text, f.span().start),
            field: "false_alarm".into(),
            message: m,
        })?,
        None => DEFAULT_FALSE_ALARM,
    };
    let Some(raw) = raw.thresholds.filter(|t| !t.is_empty()) else {
        return Err(SpecError::Invalid {
            file: file.display().to_string(),
            line: 1,
            field: "thresholds".into(),
            message: "no [thresholds] table; add e.g. throughput_ops_s = { max_drop = \"5%\" }"
                .into(),
        });
    };
    Ok((parse(file, &text, &raw)?, false_alarm))
}

/// A probability strictly between 0 and 1 (alpha, false_alarm).
pub fn probability(p: f64) -> Result<f64, String> {
    if p > 0.0 && p < 1.0 {
        Ok(p)
    } else {
        Err("a probability between 0 and 1, e.g. 0.05".into())
    }
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

pub fn percent(f: f64) -> String {
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

pub fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
