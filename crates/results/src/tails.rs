//! Which latency percentiles a sample can support. A percentile p of n operations is shown
//! only when at least [`MIN_BEYOND`] operations lie beyond it (n·(1−p) ≥ 10): p99 needs
//! 1,000 operations, p99.9 10,000, p99.99 100,000. Below that the "percentile" is one of the
//! few slowest operations, or the maximum itself, and says nothing about the tail. Every
//! surface that prints or draws a percentile (the run's console table, reports, `compare`)
//! asks [`supported`]; where it says no they show [`WITHHELD`].

/// Operations that must lie beyond a percentile for it to be shown.
pub const MIN_BEYOND: u64 = 10;

/// What a withheld percentile is shown as, in tables and on the console.
pub const WITHHELD: &str = "–";

/// Relative slack on the comparison, so that 1 − 0.9999 (a hair under 1/10,000 in floating
/// point) still lets 100,000 operations support p99.99.
const SLACK: f64 = 1e-9;

/// True when `n` operations support percentile `p` (a fraction, 0.99 for p99):
/// n·(1−p) ≥ [`MIN_BEYOND`]. The median of 20 operations is supported; p100 (the maximum)
/// is never a percentile and is always shown by its callers as `max`.
pub fn supported(n: u64, p: f64) -> bool {
    let beyond = 1.0 - p;
    beyond > 0.0 && n as f64 * beyond >= MIN_BEYOND as f64 * (1.0 - SLACK)
}

/// The fewest operations that support percentile `p` (below 1): 1,000 for p99.
pub fn min_ops(p: f64) -> u64 {
    (MIN_BEYOND as f64 * (1.0 - SLACK) / (1.0 - p)).ceil() as u64
}

/// True when percentile `p` of `n` operations, `timeouts` of them timed out (and recorded
/// at the timeout, the slowest values), is one of the timeouts: then it is the limit, not
/// a latency measured.
pub fn at_timeout(n: u64, timeouts: u64, p: f64) -> bool {
    timeouts > 0 && (n as f64) * (1.0 - p) < timeouts as f64
}

/// The highest percentile `n` operations support (1 − 10/n), `None` below 10 operations.
pub fn highest(n: u64) -> Option<f64> {
    (n >= MIN_BEYOND).then(|| 1.0 - MIN_BEYOND as f64 / n as f64)
}

/// `value` when `n` operations support percentile `p`, else `None`.
pub fn shown<T>(n: u64, p: f64, value: Option<T>) -> Option<T> {
    value.filter(|_| supported(n, p))
}

/// The sample size as printed beside percentiles: `n=1,365`.
pub fn n_label(n: u64) -> String {
    format!("n={}", thousands(n))
}

/// 100000 as `100,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_percentile_needs_ten_operations_beyond_it() {
        for (p, n) in [
            (0.5, 20),
            (0.9, 100),
            (0.99, 1_000),
            (0.999, 10_000),
            (0.9999, 100_000),
            (0.99999, 1_000_000),
        ] {
            assert!(supported(n, p), "p{p} at n={n}");
            assert!(!supported(n - 1, p), "p{p} at n={}", n - 1);
            assert_eq!(min_ops(p), n, "p{p}");
        }
    }

    #[test]
    fn nothing_supports_the_maximum_or_an_empty_sample() {
        assert!(!supported(u64::MAX, 1.0));
        assert!(!supported(0, 0.5));
        assert!(!supported(9, 0.0));
        assert!(supported(10, 0.0));
    }

    #[test]
    fn shown_withholds_and_highest_is_the_edge() {
        assert_eq!(shown(999, 0.99, Some(5)), None);
        assert_eq!(shown(1_000, 0.99, Some(5)), Some(5));
        assert_eq!(highest(9), None);
        let top = highest(1_365).unwrap();
        assert!(supported(1_365, top - 1e-12) && !supported(1_365, top + 1e-6));
    }

    #[test]
    fn a_percentile_beyond_the_successes_is_a_timeout() {
        assert!(!at_timeout(1_000, 0, 0.99));
        assert!(!at_timeout(1_000, 10, 0.99));
        assert!(at_timeout(1_000, 11, 0.99));
        assert!(at_timeout(1_606, 1_396, 0.5));
    }

    #[test]
    fn sizes_are_printed_with_thousands_separators() {
        assert_eq!(n_label(1_365), "n=1,365");
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(0), "0");
    }
}
