//! What a point's latency sample can show: how many operations it holds (successes and
//! timeouts, as the latency histogram does), how many of them timed out, and so which
//! percentiles the report may print or draw ([`coordbench_results::tails`]). Timed-out
//! operations sit in latency.hlog at the timeout; charts stop below them and say how many
//! there were instead of drawing a plateau at the limit.

use std::path::Path;

use coordbench_results::tails;

use super::table::Table;

/// A row's latency sample size: its successful operations plus its timeouts.
pub fn row_n(table: &Table, row: usize) -> u64 {
    table.rows[row].latency_n()
}

/// True when every repeat in `rows` supports percentile `p` on its own: a mean of p99s is
/// only as good as its thinnest repeat.
pub fn rows_support(table: &Table, rows: &[usize], p: f64) -> bool {
    !rows.is_empty() && rows.iter().all(|&r| tails::supported(row_n(table, r), p))
}

/// True when percentile `p` of some repeat in `rows` is one of its timeouts.
pub fn rows_at_timeout(table: &Table, rows: &[usize], p: f64) -> bool {
    rows.iter().any(|&r| {
        let timeouts = table.rows[r].num("timeouts").unwrap_or(0.0) as u64;
        tails::at_timeout(row_n(table, r), timeouts, p)
    })
}

/// The per-run sample sizes of `rows` as a table cell: `1,606`, or `980–1,606`.
pub fn n_range(table: &Table, rows: &[usize]) -> String {
    let ns = rows.iter().map(|&r| row_n(table, r));
    let (lo, hi) = ns.fold((u64::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    if rows.is_empty() {
        tails::WITHHELD.into()
    } else if lo == hi {
        tails::thousands(lo)
    } else {
        format!("{}–{}", tails::thousands(lo), tails::thousands(hi))
    }
}

/// The timeouts of `rows` summed (`timeouts` column; 0 where a summary predates it).
pub fn timeouts(table: &Table, rows: &[usize]) -> u64 {
    rows.iter()
        .map(|&r| table.rows[r].num("timeouts").unwrap_or(0.0) as u64)
        .sum()
}

/// The operation timeout of the first of `rows` with a run.json, ms.
pub fn op_timeout_ms(dir: &Path, table: &Table, rows: &[usize]) -> Option<u64> {
    rows.iter().find_map(|&r| {
        let run = table.run_dir(dir, r)?.join("run.json");
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(run).ok()?).ok()?;
        meta.get("config")?.get("op_timeout_ms")?.as_u64()
    })
}

/// The highest fraction of a merged histogram of `n` operations, `timeouts` of them timed
/// out, that a chart may draw: supported by the sample and below every timeout (the
/// timeouts are the slowest values recorded). `None` when nothing may be drawn.
pub fn drawable_to(n: u64, timeouts: u64) -> Option<f64> {
    let supported = tails::highest(n)?;
    let below_timeouts = (n.saturating_sub(timeouts)) as f64 / n as f64;
    let top = supported.min(below_timeouts);
    (top > 0.0).then_some(top)
}

/// What a chart's line leaves out: its label, sample size, timeouts (and their limit, ms)
/// and the highest fraction drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    pub label: String,
    pub n: u64,
    pub timeouts: u64,
    pub limit_ms: Option<u64>,
    pub top: f64,
}

/// A chart's footer lines about what its lines leave out: one per line with timeouts
/// (`zab: 3 timeouts at the 50 ms limit of 1,606 operations, not drawn`), then one for all
/// lines cut at their supported tail below `full` (the chart's own end: p99.99 for a
/// spectrum, 1 for a CDF).
pub fn notes(cuts: &[Cut], full: f64) -> Vec<String> {
    let mut notes: Vec<String> = cuts
        .iter()
        .filter(|c| c.timeouts > 0)
        .map(|c| {
            let plural = if c.timeouts == 1 {
                "timeout"
            } else {
                "timeouts"
            };
            let at = c
                .limit_ms
                .map_or(String::new(), |ms| format!(" at the {ms} ms limit"));
            format!(
                "{}: {} {plural}{at} of {} operations, not drawn",
                c.label,
                tails::thousands(c.timeouts),
                tails::thousands(c.n)
            )
        })
        .collect();
    let cut: Vec<&Cut> = cuts.iter().filter(|c| c.top < full - 1e-9).collect();
    if !cut.is_empty() {
        let lo = cut.iter().map(|c| c.n).min().unwrap_or(0);
        let hi = cut.iter().map(|c| c.n).max().unwrap_or(0);
        let n = if lo == hi {
            tails::n_label(lo)
        } else {
            format!("n={}–{}", tails::thousands(lo), tails::thousands(hi))
        };
        notes.push(format!(
            "{} stop at the highest percentile with {} operations beyond it ({n})",
            if cut.len() == cuts.len() {
                "lines"
            } else {
                "some lines"
            },
            tails::MIN_BEYOND
        ));
    }
    notes
}

/// 0.99265 as `99.26`: a fraction as a percentile, truncated so it never claims more.
pub fn percentile_text(p: f64) -> String {
    let v = (p * 10_000.0).floor() / 100.0;
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_stop_below_the_timeouts_and_at_the_supported_tail() {
        // 1,000 operations support p99; 3 timeouts leave 99.7% below them.
        assert_eq!(drawable_to(1_000, 0), Some(0.99));
        assert_eq!(drawable_to(1_000, 30), Some(0.97));
        assert_eq!(drawable_to(9, 0), None);
        assert_eq!(drawable_to(100, 100), None);
    }

    #[test]
    fn notes_say_what_is_not_drawn() {
        let cut = |label: &str, n, timeouts, top| Cut {
            label: label.into(),
            n,
            timeouts,
            limit_ms: Some(50),
            top,
        };
        assert_eq!(
            notes(
                &[cut("zab", 1_606, 1, 0.99377), cut("etcd", 20, 0, 0.5)],
                0.9999
            ),
            [
                "zab: 1 timeout at the 50 ms limit of 1,606 operations, not drawn",
                "lines stop at the highest percentile with 10 operations beyond it (n=20–1,606)"
            ]
        );
        assert!(notes(&[cut("etcd", 1_000_000, 0, 0.9999)], 0.9999).is_empty());
        assert_eq!(
            notes(
                &[cut("etcd", 1_000_000, 0, 0.9999), cut("zab", 200, 0, 0.95)],
                0.9999
            ),
            ["some lines stop at the highest percentile with 10 operations beyond it (n=200)"]
        );
        assert_eq!(percentile_text(0.99265), "99.26");
    }
}
