//! When a figure is too noisy to trust, said the same way on every surface: the run's
//! console, a report's figures table and `compare`. Two signs, each a named threshold:
//! the load generator waited for a CPU for more than [`CPU_WAIT_SHARE`] of the window
//! (run.json `generator.runqueue_wait_s`: its clients' timings then include the wait),
//! and a point's repeats differ by more than [`REPEAT_SPREAD`] (largest / smallest).

/// The share of the measured window the generator may spend waiting for a CPU (runnable
/// but not running) before its figures are called noisy: 5%.
pub const CPU_WAIT_SHARE: f64 = 0.05;

/// The largest / smallest ratio of a point's repeats beyond which they are called noisy:
/// 1.2 (one repeat 20% above another).
pub const REPEAT_SPREAD: f64 = 1.2;

/// The share of `window_s` spent waiting for a CPU, when it is over [`CPU_WAIT_SHARE`].
pub fn cpu_wait(runqueue_wait_s: f64, window_s: f64) -> Option<f64> {
    // Also refuses a NaN window.
    if window_s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let share = runqueue_wait_s / window_s;
    (share > CPU_WAIT_SHARE).then_some(share)
}

/// largest / smallest of `values` when it is over [`REPEAT_SPREAD`]: the repeats disagree.
/// Needs two positive values; a zero among them (no throughput at all) counts as noisy
/// when the others are not zero.
pub fn repeat_spread(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if hi <= 0.0 {
        return None;
    }
    let ratio = if lo > 0.0 { hi / lo } else { f64::INFINITY };
    (ratio > REPEAT_SPREAD).then_some(ratio)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_wait_beyond_five_percent_of_the_window_is_noise() {
        assert_eq!(cpu_wait(0.25, 5.0), None);
        assert!(cpu_wait(0.26, 5.0).is_some_and(|s| (s - 0.052).abs() < 1e-9));
        assert_eq!(cpu_wait(1.0, 0.0), None);
    }

    #[test]
    fn repeats_more_than_a_fifth_apart_are_noise() {
        assert_eq!(repeat_spread(&[100.0]), None);
        assert_eq!(repeat_spread(&[100.0, 120.0]), None);
        assert!(repeat_spread(&[100.0, 121.0, 110.0]).is_some_and(|r| (r - 1.21).abs() < 1e-9));
        assert_eq!(repeat_spread(&[0.0, 0.0]), None);
        assert_eq!(repeat_spread(&[0.0, 5.0]), Some(f64::INFINITY));
    }
}
