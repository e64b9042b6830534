//! Value parsers the command lines share: each turns text into a checked value or a
//! message saying what to write instead.
//!
//! Every timing flag takes the same forms: a duration with its unit (`10s`, `500ms`,
//! `2m`, `1s 500ms`, `75us`) or a bare whole number of milliseconds (`150`), the form
//! `--election-timeout 150-300` takes its bounds in.

use std::time::Duration;

/// Hint appended to a duration that does not parse.
const DURATION_FORMS: &str = "write e.g. 10s, 500ms, 2m; a bare number is milliseconds";

/// A duration in any of the forms above; zero is allowed.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| format!("{s}: {e} ({DURATION_FORMS})"));
    }
    humantime::parse_duration(s).map_err(|e| format!("{e} ({DURATION_FORMS})"))
}

/// A duration greater than zero.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

pub fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err("must be a fraction in (0, 1], e.g. 0.2".into()),
    }
}

pub fn parse_read_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err("must be a probability in [0, 1], e.g. 0.7".into()),
    }
}

pub fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 10_000_000.0 => Ok(r),
        _ => Err("must be a number of operations per second in (0, 10000000]".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_a_bare_number_of_milliseconds() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("15", ms(15)),
            ("5000", ms(5000)),
            ("0", ms(0)),
            ("15ms", ms(15)),
            ("5s", ms(5000)),
            ("2m", ms(120_000)),
            ("1s 500ms", ms(1500)),
            ("75us", Duration::from_micros(75)),
            (" 20 ", ms(20)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for bad in ["", "5x", "-5", "1.5", "ms"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("a bare number is milliseconds"), "{bad}: {e}");
        }
        assert_eq!(parse_positive_duration("15"), Ok(ms(15)));
        assert!(parse_positive_duration("0")
            .unwrap_err()
            .contains("greater than zero"));
        assert!(parse_positive_duration("0s").is_err());
    }
}
