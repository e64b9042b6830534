//! Latency CDFs from a run's latency.hlog: every interval histogram merged, then read back
//! as (latency, fraction of operations at or below it).

use std::path::Path;

use base64::Engine;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

/// Adds every interval of `path` into `into`.
pub fn merge_log(path: &Path, into: &mut Histogram<u64>) -> Result<(), String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(&text) {
        let entry = entry.map_err(|e| format!("{}: {e:?}", path.display()))?;
        let LogEntry::Interval(interval) = entry else {
            continue;
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(interval.encoded_histogram())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let h: Histogram<u64> = deserializer
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("{}: {e:?}", path.display()))?;
        into.add(&h)
            .map_err(|e| format!("{}: {e:?}", path.display()))?;
    }
    Ok(())
}

/// (latency in ms, fraction ≤ it), one point per recorded value bucket.
pub fn points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_recorded()
        .map(|v| {
            (
                h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0,
                v.quantile_iterated_to(),
            )
        })
        .collect()
}
