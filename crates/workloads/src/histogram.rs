//! The one latency histogram shape used everywhere: microseconds from 1 µs to one hour,
//! three significant digits (the resolution docs/reference.md's "Percentiles" defines).

use hdrhistogram::Histogram;

/// Highest trackable latency: one hour in microseconds. Longer values saturate to it.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;

/// A fresh latency histogram in microseconds.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static bounds are valid")
}
