//! Latency CDFs from a run's latency.hlog: every interval histogram merged, then read back
//! as (latency, fraction of operations at or below it); one CDF chart per target. A line
//! stops at the highest fraction its sample supports and below its timeouts, which the
//! chart's footer counts instead ([`super::sample`]).

use std::path::Path;

use base64::Engine;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use super::chart::{shade, target_color, target_name, Line, LineChart, XScale};
use super::groups::{point_label, Series, XAxis};
use super::sample;
use super::table::Table;

/// Adds every untagged interval of `path` (the combined histograms; tagged ones are a
/// kind of operation alone, already in the combined one) into `into`.
pub fn merge_log(path: &Path, into: &mut Histogram<u64>) -> Result<(), String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(&text) {
        let entry = entry.map_err(|e| format!("{}: {e:?}", path.display()))?;
        let LogEntry::Interval(interval) = entry else {
            continue;
        };
        if interval.tag().is_some() {
            continue;
        }
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

/// The latency.hlog of every row of `rows` (a point's repeats) merged ([`Table::run_dir`]
/// says where each is). A run without its log (a copied summary, a failed write) is left
/// out.
pub fn merged(dir: &Path, table: &Table, rows: &[usize]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
    for run_dir in rows.iter().filter_map(|&r| table.run_dir(dir, r)) {
        let _ = merge_log(&run_dir.join("latency.hlog"), &mut h);
    }
    h
}

/// (latency in ms, fraction ≤ it), one point per recorded value bucket, up to the
/// fraction `top` (the fraction of all operations, timeouts included, so that a line
/// with timeouts ends below 1).
pub fn points(h: &Histogram<u64>, top: f64) -> Vec<(f64, f64)> {
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
        .take_while(|&(_, q)| q <= top + 1e-12)
        .collect()
}

/// A point's line as a chart may draw it, and what it leaves out; `None` when the sample
/// supports nothing. `read` turns the merged histogram and the highest drawable fraction
/// into the line's points.
pub fn drawn_line(
    dir: &Path,
    table: &Table,
    rows: &[usize],
    label: &str,
    read: impl Fn(&Histogram<u64>, f64) -> Vec<(f64, f64)>,
) -> Option<(Vec<(f64, f64)>, sample::Cut)> {
    let h = merged(dir, table, rows);
    let n = h.len();
    let timeouts = sample::timeouts(table, rows).min(n);
    let top = sample::drawable_to(n, timeouts)?;
    let points = read(&h, top);
    if points.is_empty() {
        return None;
    }
    let cut = sample::Cut {
        label: label.to_string(),
        n,
        timeouts,
        limit_ms: sample::op_timeout_ms(dir, table, rows),
        top,
    };
    Some((points, cut))
}

/// One CDF chart per target: a line per x value (and per other axis value), from the
/// merged latency.hlog of its repeats.
pub fn charts(dir: &Path, table: &Table, x: &XAxis, series: &[Series]) -> Vec<(String, LineChart)> {
    let mut targets: Vec<&str> = Vec::new();
    for s in series {
        if !targets.contains(&s.target.as_str()) {
            targets.push(&s.target);
        }
    }
    let mut charts = Vec::new();
    for target in targets {
        let mut lines = Vec::new();
        let mut cuts = Vec::new();
        let of_target: Vec<&Series> = series.iter().filter(|s| s.target == target).collect();
        let count: usize = of_target.iter().map(|s| s.points.len()).sum();
        for s in of_target {
            for p in &s.points {
                let mut label = point_label(x, s, p);
                if label.is_empty() {
                    label = target_name(target);
                }
                let Some((points, cut)) = drawn_line(dir, table, &p.rows, &label, points) else {
                    continue;
                };
                cuts.push(cut);
                let t = if count > 1 {
                    lines.len() as f64 / (count - 1) as f64
                } else {
                    0.0
                };
                lines.push(Line {
                    label,
                    color: shade(target_color(target), t),
                    dashed: s.variant % 2 == 1,
                    markers: false,
                    points,
                    bars: Vec::new(),
                });
            }
        }
        if lines.is_empty() {
            continue;
        }
        charts.push((
            target.to_string(),
            LineChart {
                title: format!("Latency CDF: {}", target_name(target)),
                x_label: "latency (ms, log scale)".into(),
                y_label: "fraction of operations at or below".into(),
                x_scale: XScale::Log10,
                y_range: Some((0.0, 1.02)),
                lines,
                notes: sample::notes(&cuts, 1.0),
            },
        ));
    }
    charts
}
