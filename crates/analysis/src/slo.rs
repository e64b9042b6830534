//! Service-level objectives a capacity search holds a window to: `p99<10ms`,
//! `p99.9<=50ms`, `max<1s`, `errors<0.1%`. Parsed with the column of whatever is wrong
//! (`--slo 'p99<1Oms': column 5: ...`), and judged against one window's figures.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// What an objective bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    P50,
    P90,
    P99,
    P999,
    Max,
    /// Failed operations as a fraction of all operations in the window.
    Errors,
}

impl Metric {
    const NAMES: [(&'static str, Metric); 7] = [
        ("p50", Metric::P50),
        ("p90", Metric::P90),
        ("p99.9", Metric::P999),
        ("p999", Metric::P999),
        ("p99", Metric::P99),
        ("max", Metric::Max),
        ("errors", Metric::Errors),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P90 => "p90",
            Metric::P99 => "p99",
            Metric::P999 => "p99.9",
            Metric::Max => "max",
            Metric::Errors => "errors",
        }
    }
}

/// One objective: `metric` below (or at most) `bound`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slo {
    pub metric: Metric,
    /// `<=` rather than `<`.
    pub inclusive: bool,
    /// Latency metrics: microseconds; errors: a fraction (0.001 for 0.1%).
    pub bound: f64,
}

/// A window's figures, as an objective reads them (latencies in µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Figures {
    pub p50_us: Option<u64>,
    pub p90_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub p999_us: Option<u64>,
    pub max_us: Option<u64>,
    pub ops: u64,
    pub errors: u64,
}

/// A bad `--slo`: the text, the 1-based column of the problem, and what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--slo '{text}': column {column}: {message}")]
pub struct SloError {
    pub text: String,
    pub column: usize,
    pub message: String,
}

impl Slo {
    /// Parses `METRIC < VALUE` or `METRIC <= VALUE` (spaces allowed).
    pub fn parse(text: &str) -> Result<Slo, SloError> {
        let err = |at: usize, message: String| SloError {
            text: text.to_string(),
            column: at + 1,
            message,
        };
        let start = text.len() - text.trim_start().len();
        let rest = &text[start..];
        let Some((name, metric)) = Metric::NAMES.iter().find(|(n, _)| rest.starts_with(n)) else {
            return Err(err(
                start,
                "expected a metric: p50, p90, p99, p99.9, max or errors".into(),
            ));
        };
        let mut at = start + name.len();
        at += text[at..].len() - text[at..].trim_start().len();
        let inclusive = text[at..].starts_with("<=");
        if !inclusive && !text[at..].starts_with('<') {
            return Err(err(at, format!("expected < or <= after {name} (an objective is an upper bound, e.g. {name}<10ms)")));
        }
        at += if inclusive { 2 } else { 1 };
        at += text[at..].len() - text[at..].trim_start().len();
        let value = text[at..].trim_end();
        let bound = match metric {
            Metric::Errors => parse_percent(value),
            _ => parse_latency_us(value),
        }
        .map_err(|m| err(at, m))?;
        Ok(Slo {
            metric: *metric,
            inclusive,
            bound,
        })
    }

    /// The figure this objective reads, if the window has it.
    pub fn measured(&self, f: &Figures) -> Option<f64> {
        let latency = match self.metric {
            Metric::P50 => f.p50_us,
            Metric::P90 => f.p90_us,
            Metric::P99 => f.p99_us,
            Metric::P999 => f.p999_us,
            Metric::Max => f.max_us,
            Metric::Errors => {
                let all = f.ops + f.errors;
                return Some(if all == 0 {
                    0.0
                } else {
                    f.errors as f64 / all as f64
                });
            }
        };
        latency.map(|us| us as f64)
    }

    /// Whether the window meets the objective (a figure it lacks does not).
    pub fn met(&self, f: &Figures) -> bool {
        match self.measured(f) {
            Some(v) if self.inclusive => v <= self.bound,
            Some(v) => v < self.bound,
            None => false,
        }
    }

    /// A latency objective's bound; `None` for errors.
    pub fn latency_bound(&self) -> Option<Duration> {
        (self.metric != Metric::Errors).then(|| Duration::from_secs_f64(self.bound / 1e6))
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.inclusive { "<=" } else { "<" };
        match self.metric {
            Metric::Errors => write!(f, "errors{op}{}%", trim(self.bound * 100.0)),
            m => write!(f, "{}{op}{}ms", m.name(), trim(self.bound / 1000.0)),
        }
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `10ms`, `500us`, `1.5s` → µs.
fn parse_latency_us(value: &str) -> Result<f64, String> {
    let hint = "write a number and a unit (us, ms, s), e.g. 10ms";
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let scale = match unit.trim() {
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "" => return Err(format!("'{value}' has no unit: {hint}")),
        _ => return Err(format!("'{value}' is not a latency: {hint}")),
    };
    match number.parse::<f64>() {
        Ok(n) if n > 0.0 && n.is_finite() => Ok(n * scale),
        _ => Err(format!("'{value}' is not a latency above zero: {hint}")),
    }
}

/// `0.1%` → 0.001.
fn parse_percent(value: &str) -> Result<f64, String> {
    let hint = "write a percentage, e.g. 0.1%";
    let Some(number) = value.strip_suffix('%') else {
        return Err(format!("'{value}' is not a percentage: {hint}"));
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n > 0.0 && n <= 100.0 => Ok(n / 100.0),
        _ => Err(format!("'{value}' is not a percentage in (0, 100]: {hint}")),
    }
}

/// clap's value parser for `--slo`.
pub fn parse_arg(text: &str) -> Result<Slo, String> {
    Slo::parse(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_parse_with_or_without_spaces() {
        let p99 = Slo::parse("p99<10ms").unwrap();
        assert_eq!(
            (p99.metric, p99.inclusive, p99.bound),
            (Metric::P99, false, 10_000.0)
        );
        let tail = Slo::parse(" p99.9 <= 1.5s ").unwrap();
        assert_eq!(
            (tail.metric, tail.inclusive, tail.bound),
            (Metric::P999, true, 1.5e6)
        );
        assert_eq!(Slo::parse("p999<500us").unwrap().metric, Metric::P999);
        let errors = Slo::parse("errors<0.1%").unwrap();
        assert_eq!(errors.metric, Metric::Errors);
        assert!((errors.bound - 0.001).abs() < 1e-12);
        assert_eq!(p99.to_string(), "p99<10ms");
        assert_eq!(errors.to_string(), "errors<0.1%");
    }

    #[test]
    fn errors_name_the_column_and_what_to_write() {
        for (text, column, words) in [
            ("p98<10ms", 1, "expected a metric"),
            ("p99>10ms", 4, "expected < or <="),
            ("p99<1Oms", 5, "not a latency"),
            ("p99 < 10", 7, "has no unit"),
            ("p99<0ms", 5, "above zero"),
            ("errors<0.1", 8, "not a percentage"),
            ("errors<=200%", 9, "in (0, 100]"),
        ] {
            let e = Slo::parse(text).expect_err(text);
            assert_eq!(e.column, column, "{text}: {e}");
            assert!(e.message.contains(words), "{text}: {e}");
            let line = e.to_string();
            assert!(
                line.starts_with(&format!("--slo '{text}': column {column}: ")),
                "{line}"
            );
            assert!(!line.contains('\n'));
        }
    }

    #[test]
    fn a_window_meets_an_objective_only_below_its_bound() {
        let f = Figures {
            p99_us: Some(10_000),
            ops: 999,
            errors: 1,
            ..Figures::default()
        };
        assert!(!Slo::parse("p99<10ms").unwrap().met(&f));
        assert!(Slo::parse("p99<=10ms").unwrap().met(&f));
        assert!(Slo::parse("errors<0.2%").unwrap().met(&f));
        assert!(!Slo::parse("errors<0.1%").unwrap().met(&f));
        // A percentile the window did not measure does not meet its objective.
        assert!(!Slo::parse("p90<1s").unwrap().met(&f));
    }
}
