//! The version chart: when a sweep ran several releases of a server (the `server_version`
//! axis), each figure against the release, in release order, one line per target (and per
//! other swept value), so what an upgrade does to throughput, latency, server CPU and
//! memory is one look. Releases of different servers share the x axis: etcd's lines run
//! over etcd's releases, ZooKeeper's over its own.

use super::chart::LineChart;
use super::groups::{axis_x, group, varying, XKind};
use super::table::Table;
use coordbench_results::axis::{Axis, NOT_APPLICABLE};

/// What these charts add to the report's main figures ([`super::MAIN_FIGURES`]), alike:
/// (title, y label, summary.csv column, scale to the y unit, file stem, percentile).
const VERSION_FIGURES: [super::MainFigure; 3] = [
    (
        "Server CPU per operation",
        "server CPU per op (µs, all members)",
        "server_cpu_us_per_op",
        1.0,
        "server-cpu",
        None,
    ),
    (
        "Server peak RSS",
        "peak RSS per member (MB)",
        "server_peak_rss_mb",
        1.0,
        "server-rss",
        None,
    ),
    (
        "Lock handover p99",
        "handover p99 (ms)",
        "handover_p99_us",
        1e-3,
        "handover-p99",
        None,
    ),
];

/// The figures by release, with their file stems; none unless releases vary. Throughput
/// and p99 are left out when the report's main x axis is already the release.
pub fn charts(
    table: &Table,
    rows: &[usize],
    swept: Option<&[Axis]>,
    main_x: &XKind,
) -> Vec<(LineChart, String)> {
    let mut others = varying(table, rows, swept);
    let Some(at) = others.iter().position(|(a, _)| *a == Axis::ServerVersion) else {
        return Vec::new();
    };
    let (axis, column) = others.remove(at);
    // Targets without releases (the engines) ran beside them; they are no point of this chart.
    let rows: Vec<usize> = rows
        .iter()
        .copied()
        .filter(|&r| {
            table.rows[r]
                .get(&column)
                .is_some_and(|v| v != NOT_APPLICABLE)
        })
        .collect();
    let rows = rows.as_slice();
    let main_is_version = matches!(main_x, XKind::Axis(Axis::ServerVersion, _));
    let x = axis_x(table, rows, axis, column);
    let series = group(table, rows, &x, &others);
    let main: &[_] = if main_is_version {
        &[]
    } else {
        &super::MAIN_FIGURES
    };
    main.iter()
        .chain(VERSION_FIGURES.iter())
        .map(|(title, y_label, column, scale, stem, percentile)| {
            let title = format!("{title} by server version");
            let mut chart = super::line_chart(title, &x, y_label, &series, table, (column, *scale));
            if let Some(p) = percentile {
                super::withhold_unsupported(&mut chart, &series, table, *p);
            }
            (chart, format!("version-{stem}"))
        })
        .filter(|(chart, _)| chart.lines.iter().any(|l| !l.points.is_empty()))
        .collect()
}
