//! `timeseries.csv`: per 1 s interval of the measured window, what the clients completed.

use std::path::Path;

use coordbench_results::files::{self, FileError};
use serde::Serialize;

use crate::runner::RunOutcome;

#[derive(Debug, Serialize)]
struct IntervalRow {
    /// Seconds since the start of measurement (interval start).
    second: u64,
    ops: u64,
    throughput_ops_s: f64,
    p50_us: Option<u64>,
    p99_us: Option<u64>,
    max_us: Option<u64>,
    errors: u64,
}

pub fn write(path: &Path, outcome: &RunOutcome) -> Result<(), FileError> {
    let seconds = outcome.window.as_secs_f64().ceil() as u64;
    // Empty intervals are written too: a stalled server shows as zeros, not as a gap.
    let rows = (0..seconds).map(|second| match outcome.intervals.get(&second) {
        Some(s) => {
            let h = (!s.latency.is_empty()).then_some(&s.latency);
            IntervalRow {
                second,
                ops: s.ops,
                throughput_ops_s: s.ops as f64 / interval_len(outcome, second),
                p50_us: h.map(|h| h.value_at_quantile(0.5)),
                p99_us: h.map(|h| h.value_at_quantile(0.99)),
                max_us: h.map(|h| h.max()),
                errors: s.errors_total(),
            }
        }
        None => IntervalRow {
            second,
            ops: 0,
            throughput_ops_s: 0.0,
            p50_us: None,
            p99_us: None,
            max_us: None,
            errors: 0,
        },
    });
    files::write_csv_rows(path, rows)
}

/// The last interval of a window that is not a whole number of seconds is shorter.
fn interval_len(outcome: &RunOutcome, second: u64) -> f64 {
    (outcome.window.as_secs_f64() - second as f64).clamp(1e-9, 1.0)
}
