//! What each unit of state costs the server: a straight line fitted (least squares) through
//! server RSS against keys, watchers or sessions held (`state` sweeps,
//! workloads/state-scaling.toml), per target and workload, its slope in bytes per unit
//! beside etcd's published figures; and the server CPU per operation and p99 at each N.

use std::fmt::Write as _;
use std::path::Path;

use super::chart::number;
use super::table::Table;
use super::ReportError;

/// etcd's published memory costs (etcd docs, "Performance" and the "watch memory"
/// benchmarks; docs/published-figures.md).
pub const ETCD_BYTES_PER_WATCHER: f64 = 350.0;
/// The same source: a client connection with its watch stream, 17 to 18 KB.
pub const ETCD_BYTES_PER_CONNECTION: (f64, f64) = (17_000.0, 18_000.0);

/// A line `rss = base + slope × n`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// Bytes of RSS per unit.
    pub slope: f64,
    /// Bytes of RSS at n = 0.
    pub base: f64,
    /// Points the line was fitted through.
    pub points: usize,
}

/// The least-squares line through `(n, bytes)`; `None` unless two distinct n are given.
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let count = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / count;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / count;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if points.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    Some(Fit {
        slope,
        base: mean_y - slope * mean_x,
        points: points.len(),
    })
}

/// The kinds of state a sweep can hold, with their summary.csv column.
pub const UNITS: [(&str, &str); 3] = [
    ("key", "preload_keys"),
    ("watcher", "preload_watchers"),
    ("session", "preload_sessions"),
];

/// The fitted cost of one unit for one target (and workload).
#[derive(Debug, Clone)]
pub struct UnitCost {
    pub target: String,
    pub workload: String,
    pub unit: &'static str,
    pub fit: Fit,
    /// The largest number of units measured.
    pub largest: f64,
}

/// The (target, workload) a unit's points are fitted by.
type GroupKey = (String, String);

/// Every (target, workload, unit) whose rows hold that unit alone at two or more counts.
pub fn costs(table: &Table, rows: &[usize]) -> Vec<UnitCost> {
    let mut out = Vec::new();
    for (unit, column) in UNITS {
        if !table.has(column) {
            continue;
        }
        let mut groups: Vec<(GroupKey, Vec<(f64, f64)>)> = Vec::new();
        for &r in rows {
            let row = &table.rows[r];
            let others_held = UNITS
                .iter()
                .any(|(_, c)| *c != column && row.get(c).is_some());
            let (Some(n), Some(rss)) = (row.num(column), row.num("server_peak_rss_mb")) else {
                continue;
            };
            if others_held {
                continue;
            }
            let key = (
                row.get("target").unwrap_or("?").to_string(),
                row.get("workload").unwrap_or("?").to_string(),
            );
            let point = (n, rss * 1024.0 * 1024.0);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, points)) => points.push(point),
                None => groups.push((key, vec![point])),
            }
        }
        for ((target, workload), points) in groups {
            if let Some(fit) = fit(&points) {
                let largest = points.iter().map(|p| p.0).fold(0.0, f64::max);
                out.push(UnitCost {
                    target,
                    workload,
                    unit,
                    fit,
                    largest,
                });
            }
        }
    }
    out
}

/// The costs fitted in another sweep's directory (`report --state DIR`); an error when
/// it has no summary.csv or nothing to fit.
pub fn fitted_in(dir: &Path) -> Result<Vec<UnitCost>, ReportError> {
    let table = Table::read(&dir.join("summary.csv"))?;
    let rows: Vec<usize> = (0..table.rows.len())
        .filter(|&i| table.rows[i].complete())
        .collect();
    let found = costs(&table, &rows);
    if found.is_empty() {
        return Err(ReportError::Read(format!(
            "{}: no cost per key, watcher or session can be fitted there (--state takes a sweep of workloads/state-scaling.toml)",
            dir.display()
        )));
    }
    Ok(found)
}

/// etcd's published figure for a unit, as the report writes it.
fn published(unit: &str) -> &'static str {
    match unit {
        "watcher" => "350 B (etcd)",
        "session" => "17–18 KB per connection/stream (etcd)",
        _ => "–",
    }
}

/// The cost table and the per-N figures, as markdown; empty without a fit.
pub fn section(table: &Table, rows: &[usize]) -> String {
    let costs = costs(table, rows);
    if costs.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "Server RSS (the largest member's peak in the window) against the state held, fitted \
         with a least-squares line per target and workload; the slope is the cost of one \
         unit. Watchers are held 100 to a session, so a watcher's cost includes a hundredth \
         of a session's. Published: etcd docs, \"Performance\" and the \"watch memory\" \
         benchmarks (docs/published-figures.md).\n\n\
         | target | workload | unit | bytes per unit | base RSS (MB) | points | largest N | published |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for c in &costs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} |",
            c.target,
            c.workload,
            c.unit,
            number(c.fit.slope.round()),
            c.fit.base / (1024.0 * 1024.0),
            c.fit.points,
            number(c.largest),
            published(c.unit)
        );
    }
    s.push_str("\nEvery point: state held, server RSS, server CPU per operation and p99.\n\n");
    s.push_str("| target | workload | keys | watchers | sessions | RSS (MB) | CPU µs/op | p99 (ms) |\n|---|---|---|---|---|---|---|---|\n");
    for &r in rows {
        let row = &table.rows[r];
        let cell = |c: &str| row.get(c).unwrap_or("").to_string();
        let fixed = |c: &str, scale: f64| {
            row.num(c)
                .map_or(String::new(), |v| format!("{:.1}", v * scale))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            cell("target"),
            cell("workload"),
            cell("preload_keys"),
            cell("preload_watchers"),
            cell("preload_sessions"),
            fixed("server_peak_rss_mb", 1.0),
            fixed("server_cpu_us_per_op", 1.0),
            fixed("p99_us", 1e-3),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_a_known_cost_per_unit_through_noise() {
        // 40 MB base, 350 B per watcher, a few hundred KB of noise either way.
        let noise = [120e3, -250e3, 80e3, -30e3, 90e3];
        let points: Vec<(f64, f64)> = [1_000.0, 5_000.0, 10_000.0, 50_000.0, 100_000.0]
            .iter()
            .zip(noise)
            .map(|(&n, e)| (n, 40e6 + 350.0 * n + e))
            .collect();
        let f = fit(&points).unwrap();
        assert!((f.slope - 350.0).abs() < 10.0, "{f:?}");
        assert!((f.base - 40e6).abs() < 300e3, "{f:?}");
        assert_eq!(f.points, 5);
        let exact = fit(&[(0.0, 1.0), (2.0, 5.0)]).unwrap();
        assert_eq!((exact.slope, exact.base), (2.0, 1.0));
    }

    #[test]
    fn no_fit_from_one_count() {
        assert_eq!(fit(&[(10.0, 5.0)]), None);
        assert_eq!(fit(&[(10.0, 5.0), (10.0, 7.0)]), None);
        assert_eq!(fit(&[]), None);
    }
}
