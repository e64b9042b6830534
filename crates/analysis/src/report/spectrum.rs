//! Cross-target latency per point: for each x value of a sweep, one chart with a line per
//! series (a target and the values of any other varying axis, e.g. `redis redlock`; odd
//! variants of a target dashed), so every choice is side by side, drawn as HdrHistogram's
//! percentile spectrum (x = percentile on a log scale of 1 / (1 − p), from p50 to p99.99;
//! y = latency), so the tails that decide a comparison are visible side by side.

use std::path::Path;

use hdrhistogram::Histogram;

use super::cdf;
use super::chart::{target_color, Line, LineChart, XScale};
use super::groups::{x_label, Series, XAxis};
use super::sample;
use super::table::Table;

/// Percentiles drawn per line, evenly spaced on the spectrum's axis.
const STEPS: usize = 64;
/// The spectrum's ends: p50 and p99.99.
const FIRST: f64 = 0.5;
const LAST: f64 = 0.9999;

/// A series at one point: its label, target, variant and rows (repeats).
type SeriesRows<'a> = (String, &'a str, usize, &'a [usize]);

/// One chart of a point, with the file stem it is written under.
pub struct PointChart {
    pub stem: String,
    pub chart: LineChart,
}

/// One chart per point that has a latency log, in series order.
pub fn charts(dir: &Path, table: &Table, x: &XAxis, series: &[Series]) -> Vec<PointChart> {
    // (x label, its series' rows) in first-seen order.
    let mut points: Vec<(String, Vec<SeriesRows>)> = Vec::new();
    for s in series {
        for p in &s.points {
            // Nothing varies but the target: every target's run is the one point.
            let label = x_label(x, p);
            let line = (s.label(), s.target.as_str(), s.variant, p.rows.as_slice());
            match points.iter_mut().find(|(l, _)| *l == label) {
                Some((_, lines)) => lines.push(line),
                None => points.push((label, vec![line])),
            }
        }
    }
    points
        .into_iter()
        .filter_map(|(label, lines)| {
            let mut cuts = Vec::new();
            let lines: Vec<Line> = lines
                .into_iter()
                .filter_map(|(label, target, variant, rows)| {
                    let (points, cut) = cdf::drawn_line(dir, table, rows, &label, spectrum)?;
                    cuts.push(cut);
                    Some(Line {
                        label,
                        color: target_color(target),
                        dashed: variant % 2 == 1,
                        markers: false,
                        points,
                        bars: Vec::new(),
                    })
                })
                .collect();
            if lines.is_empty() {
                return None;
            }
            let title = if label.is_empty() {
                "Latency by percentile".to_string()
            } else {
                format!("Latency by percentile: {label}")
            };
            Some(PointChart {
                stem: stem(&label),
                chart: LineChart {
                    title,
                    x_label: "percentile, from p50 (log scale of 1 / (1 − p))".into(),
                    y_label: "latency (ms)".into(),
                    x_scale: XScale::Percentile,
                    y_range: None,
                    lines,
                    notes: sample::notes(&cuts, LAST),
                },
            })
        })
        .collect()
}

/// (percentile as a fraction, latency in ms) from p50 to p99.99 or `top` if lower, evenly
/// spaced in log10(1 / (1 − p)); nothing when `top` is below p50.
pub fn spectrum(h: &Histogram<u64>, top: f64) -> Vec<(f64, f64)> {
    let last = LAST.min(top);
    if h.is_empty() || last < FIRST {
        return Vec::new();
    }
    let (from, to) = (placed(FIRST), placed(last));
    (0..=STEPS)
        .map(|i| {
            let p = 1.0 - 10f64.powf(-(from + (to - from) * i as f64 / STEPS as f64));
            let p = p.clamp(FIRST, last);
            (p, h.value_at_quantile(p) as f64 / 1000.0)
        })
        .collect()
}

fn placed(p: f64) -> f64 {
    (1.0 / (1.0 - p)).log10()
}

/// A file name for a point's label: `spectrum-cluster_size=3`, `spectrum` alone.
fn stem(label: &str) -> String {
    if label.is_empty() {
        return "spectrum".into();
    }
    let safe: String = label
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '=' | '.' | '-' | '_' => c,
            _ => '_',
        })
        .collect();
    format!("spectrum-{safe}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spectrum_runs_from_p50_to_p99_99_and_shows_the_tail() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=10_000u64 {
            // 1 ms for most, 100 ms for the slowest 0.1%.
            h.record(if v > 9_990 { 100_000 } else { 1_000 }).unwrap();
        }
        let s = spectrum(&h, 1.0);
        assert_eq!(s.len(), STEPS + 1);
        assert!((s[0].0 - 0.5).abs() < 1e-9 && (s[STEPS].0 - 0.9999).abs() < 1e-9);
        assert!((s[0].1 - 1.0).abs() < 0.01, "{:?}", s[0]);
        assert!(s[STEPS].1 > 99.0, "{:?}", s[STEPS]);
        assert!(s.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert!(spectrum(&Histogram::<u64>::new(3).unwrap(), 1.0).is_empty());
        let cut = spectrum(&h, 0.999);
        assert!((cut[STEPS].0 - 0.999).abs() < 1e-9, "{:?}", cut[STEPS]);
        assert!(
            cut[STEPS].1 < 2.0,
            "stops below the slowest 0.1%: {:?}",
            cut[STEPS]
        );
        assert!(spectrum(&h, 0.4).is_empty());
    }

    #[test]
    fn stems_are_file_names() {
        assert_eq!(stem(""), "spectrum");
        assert_eq!(
            stem("cluster_size=3 naive"),
            "spectrum-cluster_size=3_naive"
        );
        assert_eq!(stem("disk=a/b"), "spectrum-disk=a_b");
    }
}
