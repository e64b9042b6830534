//! `coordbench report DIR` (also the last step of a sweep): charts, report.md and
//! report.html from a directory's summary.csv and its runs' latency.hlog and failover.csv.
//!
//! Charts, each as SVG and PNG under `DIR/charts/`: throughput and p99 against the swept
//! axis per target (bars: the spread of repeats), a percentile spectrum per x value with
//! a line per series, every target and recipe side by side ([`spectrum`]), a latency CDF per target, and, when the files or columns exist,
//! failover CDFs ([`failover`]), herd-effect figures against waiters, the latency–throughput
//! curve of capacity searches or rate sweeps with the max rate per target and what N× the
//! load needs ([`capacity`]), and the cost per key, watcher and session ([`state_cost`]). report.md links
//! them, tabulates the figures, and puts published figures beside ours where the sweep
//! reproduces one ([`published`]); report.html is the same report in one file, charts
//! inline ([`document`]).

pub mod args;
pub mod capacity;
pub mod cdf;
pub mod chart;
pub mod context;
pub mod document;
pub mod election;
pub mod failover;
pub mod font;
pub mod groups;
pub mod noise;
pub mod planning;
pub mod published;
pub mod sample;
pub mod sections;
pub mod spectrum;
pub mod state_cost;
pub mod table;
pub mod versions;

use std::path::{Path, PathBuf};

pub use args::ReportArgs;
use chart::{target_color, Bar, Line, LineChart};
use context::Context;
use coordbench_results::axis::Axis;
use coordbench_results::axis::HERD_FREE;
use coordbench_results::outcome::{Outcome, UsageError};
use groups::{choose_x, group, mean, spread, waiters_axis, Series, XAxis, XKind};
pub use planning::Planning;
use sections::Sections;
use table::Table;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0}")]
    Font(String),
    #[error("{0}")]
    Read(String),
    #[error("{0}")]
    Draw(String),
    #[error("{0}")]
    Write(String),
}

/// What a report wrote.
#[derive(Debug)]
pub struct Written {
    pub markdown: PathBuf,
    pub html: PathBuf,
    /// SVG and PNG files.
    pub charts: Vec<PathBuf>,
}

/// `coordbench report DIR`.
pub fn run(args: &ReportArgs) -> Result<Outcome, UsageError> {
    let mut planning = args.planning();
    if let Some(state) = &args.state {
        planning.costs = state_cost::fitted_in(state).map_err(|e| UsageError(e.to_string()))?;
    }
    let written = write(&args.dir, Path::new(font::DEFAULT_FONT), &planning)
        .map_err(|e| UsageError(e.to_string()))?;
    println!(
        "report: {} and {} ({} chart files)",
        written.markdown.display(),
        written.html.display(),
        written.charts.len()
    );
    Ok(Outcome::Complete)
}

/// Writes `dir/charts/*.{svg,png}`, `dir/report.md` and `dir/report.html` from
/// `dir/summary.csv`; `planning` holds the planner's figures for the capacity section.
pub fn write(dir: &Path, font_file: &Path, planning: &Planning) -> Result<Written, ReportError> {
    font::load(font_file)?;
    let mut table = Table::read(&dir.join("summary.csv"))?;
    let meta = read_meta(dir);
    if swept_herd_free(meta.as_ref()) {
        table.name_herd_free_recipes();
    }
    let charts_dir = dir.join("charts");
    std::fs::create_dir_all(&charts_dir)
        .map_err(|e| ReportError::Write(format!("{}: {e}", charts_dir.display())))?;
    let rows: Vec<usize> = (0..table.rows.len())
        .filter(|&i| table.rows[i].complete())
        .collect();
    let swept = swept_axes(meta.as_ref());
    let (x, others) = choose_x(&table, &rows, swept.as_deref());
    let series = group(&table, &rows, &x, &others);

    let context = Context::new(dir, meta.as_ref(), &table, &rows, repeats(&series));
    let mut out = Charts {
        dir: charts_dir.clone(),
        sections: Sections::new(dir, meta.as_ref(), &table, &rows, &context),
        footer: context.footer.clone(),
        files: Vec::new(),
    };
    if !series.is_empty() {
        figure_charts(&mut out, dir, &table, &x, &series)?;
    }
    for (chart, stem) in versions::charts(&table, &rows, swept.as_deref(), &x.kind) {
        out.add(&chart, &stem)?;
    }
    if matches!(x.kind, XKind::Axis(Axis::Clients | Axis::Locks, _)) {
        herd_charts(&mut out, &table, &rows, swept.as_deref())?;
    }
    if let Some(chart) = capacity::chart(&capacity::curves(dir, &table, &rows)) {
        out.add(&chart, "latency-vs-throughput")?;
    }
    let mut sections = out.sections;
    sections.section(
        "Capacity at the objective",
        &capacity::section(&table, &rows, planning),
    );
    sections.section(
        "Cost per unit of state",
        &state_cost::section(&table, &rows),
    );
    sections.figures(&x, &series);
    let x_is_size = matches!(x.kind, XKind::Axis(Axis::ClusterSize, _));
    sections.published(&published::sections(&table, &rows, x_is_size));
    let name = sections.name.clone();
    let document = sections.finish();
    let markdown = dir.join("report.md");
    let html = dir.join("report.html");
    let html_text = document.to_html(&format!("coordbench report: {name}"), &charts_dir)?;
    for (path, text) in [(&markdown, document.to_markdown()), (&html, html_text)] {
        std::fs::write(path, text)
            .map_err(|e| ReportError::Write(format!("{}: {e}", path.display())))?;
    }
    Ok(Written {
        markdown,
        html,
        charts: out.files,
    })
}

/// Charts as they are rendered: their files, and their place in the report.
struct Charts<'a> {
    dir: PathBuf,
    sections: Sections<'a>,
    /// What every chart says under it ([`Context::footer`]).
    footer: String,
    files: Vec<PathBuf>,
}

impl Charts<'_> {
    fn add(&mut self, chart: &LineChart, stem: &str) -> Result<(), ReportError> {
        let mut chart = chart.clone();
        chart.notes.push(self.footer.clone());
        self.files.extend(chart::render(&chart, &self.dir, stem)?);
        self.sections.chart(&chart.title, stem);
        Ok(())
    }
}

/// The figures every report charts against its x axis: (title, y label, summary.csv
/// column, scale to the y unit, file stem, the percentile it is, if one).
type MainFigure = (
    &'static str,
    &'static str,
    &'static str,
    f64,
    &'static str,
    Option<f64>,
);
const MAIN_FIGURES: [MainFigure; 2] = [
    (
        "Throughput",
        "throughput (ops/s)",
        "throughput_ops_s",
        1.0,
        "throughput",
        None,
    ),
    (
        "p99 latency",
        "p99 latency (ms)",
        "p99_us",
        1e-3,
        "p99",
        Some(0.99),
    ),
];

/// Throughput and p99 against x, the percentile spectrum of every point, the per-target
/// latency CDFs, and the failover CDFs.
fn figure_charts(
    out: &mut Charts,
    dir: &Path,
    table: &Table,
    x: &XAxis,
    series: &[Series],
) -> Result<(), ReportError> {
    let axis_stem = match &x.kind {
        XKind::Axis(axis, _) => axis.name().to_string(),
        _ => "target".into(),
    };
    // One point alone (a single run) is a number, in the figures table, not a chart.
    let points: usize = series.iter().map(|s| s.points.len()).sum();
    let main: &[MainFigure] = if points > 1 { &MAIN_FIGURES } else { &[] };
    for &(title, y_label, column, scale, stem, percentile) in main {
        let title = format!("{title} vs {}", x.label);
        let mut chart = line_chart(title, x, y_label, series, table, (column, scale));
        if let Some(p) = percentile {
            withhold_unsupported(&mut chart, series, table, p);
        }
        // Drawn even when every point is withheld: its footer says why it is empty.
        out.add(&chart, &format!("{stem}-vs-{axis_stem}"))?;
    }
    for point in spectrum::charts(dir, table, x, series) {
        out.add(&point.chart, &point.stem)?;
    }
    for (target, cdf) in cdf::charts(dir, table, x, series) {
        out.add(&cdf, &format!("cdf-{target}"))?;
    }
    if let Some(chart) = failover::chart(dir, table, series) {
        out.add(&chart, "failover-cdf")?;
    }
    for (name, chart) in election::charts(dir, table) {
        out.add(&chart, &name)?;
    }
    Ok(())
}

/// Takes out of `chart` (drawn from `series` by [`line_chart`]) the points whose repeats
/// do not all support percentile `p`, or whose percentile `p` is a timeout (the limit, not
/// a latency), and says so in its footer.
fn withhold_unsupported(chart: &mut LineChart, series: &[Series], table: &Table, p: f64) {
    let mut withheld = Vec::new();
    let mut timeouts = Vec::new();
    for s in series {
        let Some(line) = chart.lines.iter_mut().find(|l| l.label == s.label()) else {
            continue;
        };
        for point in &s.points {
            let name = format!("{} ({})", s.label(), point.x_text);
            if !sample::rows_support(table, &point.rows, p) {
                withheld.push(name);
            } else if sample::rows_at_timeout(table, &point.rows, p) {
                timeouts.push(name);
            } else {
                continue;
            }
            line.points.retain(|(x, _)| *x != point.x);
            line.bars.retain(|b| b.x != point.x);
        }
    }
    chart.lines.retain(|l| !l.points.is_empty());
    if !withheld.is_empty() {
        chart.notes.push(format!(
            "p{} withheld where a run has under {} operations: {}",
            sample::percentile_text(p),
            coordbench_results::tails::thousands(coordbench_results::tails::min_ops(p)),
            withheld.join(", ")
        ));
    }
    if !timeouts.is_empty() {
        chart.notes.push(format!(
            "p{} not drawn where it is a timeout (the limit, not a latency): {}",
            sample::percentile_text(p),
            timeouts.join(", ")
        ));
    }
}

/// Herd figures: lock runs whose clients (or locks) vary, against waiters per lock.
fn herd_charts(
    out: &mut Charts,
    table: &Table,
    rows: &[usize],
    swept: Option<&[Axis]>,
) -> Result<(), ReportError> {
    let lock_rows: Vec<usize> = rows
        .iter()
        .copied()
        .filter(|&r| table.rows[r].get("workload") == Some("lock"))
        .collect();
    let wx = waiters_axis(table, &lock_rows);
    let split: Vec<(Axis, String)> = groups::varying(table, &lock_rows, swept)
        .into_iter()
        .filter(|(a, _)| !matches!(a, Axis::Clients | Axis::Locks))
        .collect();
    let herd = group(table, &lock_rows, &wx, &split);
    for (column, y, stem) in [
        (
            "notifications_per_release",
            "notifications per release",
            "herd-notifications-vs-waiters",
        ),
        (
            "requests_per_release",
            "requests per release",
            "herd-requests-vs-waiters",
        ),
    ] {
        if herd.is_empty() || !table.has(column) {
            continue;
        }
        let title = format!("Herd effect: {y} vs waiters");
        let chart = line_chart(title, &wx, y, &herd, table, (column, 1.0));
        out.add(&chart, stem)?;
    }
    Ok(())
}

/// The fewest and most repeats of a point in `series`; (1, 1) when there is none.
fn repeats(series: &[Series]) -> (usize, usize) {
    let counts = series.iter().flat_map(|s| &s.points).map(|p| p.rows.len());
    let (lo, hi) = counts.fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    if hi == 0 {
        (1, 1)
    } else {
        (lo, hi)
    }
}

/// `dir/run.json`, if it is there and parses.
fn read_meta(dir: &Path) -> Option<serde_json::Value> {
    std::fs::read(dir.join("run.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
}

/// True when a sweep's run.json lists `herd-free` among its recipe axis values: each
/// target ran its own herd-free recipe, and the report compares them as one point.
fn swept_herd_free(meta: Option<&serde_json::Value>) -> bool {
    let Some(axes) = meta.and_then(|m| m.get("axes")?.as_array()) else {
        return false;
    };
    axes.iter().any(|a| {
        a.get(0).and_then(|n| n.as_str()) == Some(Axis::Recipe.name())
            && a.get(1)
                .and_then(|v| v.as_array())
                .is_some_and(|v| v.iter().any(|v| v.as_str() == Some(HERD_FREE)))
    })
}

/// The axes a sweep's run.json says it swept; `None` when `meta` is not a sweep's.
fn swept_axes(meta: Option<&serde_json::Value>) -> Option<Vec<Axis>> {
    let meta = meta?;
    if meta.get("schema")?.as_str()? != coordbench_results::schema::SWEEP_SCHEMA {
        return None;
    }
    let axes = meta.get("axes")?.as_array()?;
    Some(
        axes.iter()
            .filter_map(|a| Axis::from_name(a.get(0)?.as_str()?))
            .collect(),
    )
}

/// One line per series: the mean of `column` (times its scale) over each point's repeats,
/// with a bar from the lowest to the highest repeat where there are several.
fn line_chart(
    title: String,
    x: &XAxis,
    y_label: &str,
    series: &[Series],
    table: &Table,
    (column, scale): (&str, f64),
) -> LineChart {
    LineChart {
        title,
        x_label: x.label.clone(),
        y_label: y_label.into(),
        x_scale: x.scale.clone(),
        y_range: None,
        lines: series
            .iter()
            .map(|s| {
                let mut points = Vec::new();
                let mut bars = Vec::new();
                for p in &s.points {
                    let Some(y) = mean(table, &p.rows, column) else {
                        continue;
                    };
                    points.push((p.x, y * scale));
                    if let Some((low, high)) = spread(table, &p.rows, column) {
                        bars.push(Bar {
                            x: p.x,
                            low: low * scale,
                            mid: y * scale,
                            high: high * scale,
                        });
                    }
                }
                Line {
                    label: s.label(),
                    color: target_color(&s.target),
                    dashed: s.variant % 2 == 1,
                    markers: true,
                    points,
                    bars,
                }
            })
            .filter(|l| !l.points.is_empty())
            .collect(),
        notes: Vec::new(),
    }
}
