//! `coordbench report DIR` (also the last step of a sweep): charts and report.md from a
//! directory's summary.csv, and the per-point latency.hlog files for latency CDFs.
//!
//! Charts, each as SVG and PNG under `DIR/charts/`: throughput and p99 against the swept
//! axis per target, a latency CDF per target, and, when the columns exist, herd-effect
//! figures against waiters. report.md embeds them, tabulates the figures, and puts
//! published figures beside ours where the sweep reproduces one ([`published`]).

pub mod cdf;
pub mod chart;
pub mod font;
pub mod groups;
pub mod published;
pub mod table;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use crate::app::{Outcome, UsageError};
use crate::cli::ReportArgs;
use crate::sweep::axis::Axis;
use chart::{number, shade, target_color, Line, LineChart, XScale};
use groups::{choose_x, group, mean, waiters_axis, Series, XAxis, XKind};
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
    /// SVG and PNG files.
    pub charts: Vec<PathBuf>,
}

/// `coordbench report DIR`.
pub fn run(args: &ReportArgs) -> Result<Outcome, UsageError> {
    let written =
        write(&args.dir, Path::new(font::DEFAULT_FONT)).map_err(|e| UsageError(e.to_string()))?;
    println!(
        "report: {} ({} chart files)",
        written.markdown.display(),
        written.charts.len()
    );
    Ok(Outcome::Complete)
}

/// Writes `dir/charts/*.{svg,png}` and `dir/report.md` from `dir/summary.csv`.
pub fn write(dir: &Path, font_file: &Path) -> Result<Written, ReportError> {
    font::load(font_file)?;
    let table = Table::read(&dir.join("summary.csv"))?;
    let charts_dir = dir.join("charts");
    std::fs::create_dir_all(&charts_dir)
        .map_err(|e| ReportError::Write(format!("{}: {e}", charts_dir.display())))?;
    let rows: Vec<usize> = (0..table.rows.len())
        .filter(|&i| table.rows[i].complete())
        .collect();
    let meta = read_meta(dir);
    let swept = swept_axes(meta.as_ref());
    let (x, others) = choose_x(&table, &rows, swept.as_deref());
    let series = group(&table, &rows, &x, &others);

    let mut md = Markdown::new(dir, meta.as_ref(), &table, &rows);
    let mut files = Vec::new();
    let axis_stem = match &x.kind {
        XKind::Axis(axis, _) => axis.name().to_string(),
        _ => "target".into(),
    };
    if !series.is_empty() {
        let throughput = line_chart(
            format!("Throughput vs {}", x.label),
            &x,
            "throughput (ops/s)",
            &series,
            |rows| mean(&table, rows, "throughput_ops_s"),
        );
        let stem = format!("throughput-vs-{axis_stem}");
        files.extend(chart::render(&throughput, &charts_dir, &stem)?);
        md.chart(&throughput.title, &stem);
        let p99 = line_chart(
            format!("p99 latency vs {}", x.label),
            &x,
            "p99 latency (ms)",
            &series,
            |rows| mean(&table, rows, "p99_us").map(|us| us / 1000.0),
        );
        let stem = format!("p99-vs-{axis_stem}");
        files.extend(chart::render(&p99, &charts_dir, &stem)?);
        md.chart(&p99.title, &stem);
        for (target, cdf) in cdf_charts(dir, &table, &x, &series) {
            let stem = format!("cdf-{target}");
            files.extend(chart::render(&cdf, &charts_dir, &stem)?);
            md.chart(&cdf.title, &stem);
        }
    }
    // Herd figures: lock runs whose clients (or locks) vary, against waiters per lock.
    if matches!(x.kind, XKind::Axis(Axis::Clients | Axis::Locks, _)) {
        let lock_rows: Vec<usize> = rows
            .iter()
            .copied()
            .filter(|&r| table.rows[r].get("workload") == Some("lock"))
            .collect();
        let wx = waiters_axis(&table, &lock_rows);
        let split: Vec<(Axis, String)> = groups::varying(&table, &lock_rows, swept.as_deref())
            .into_iter()
            .filter(|(a, _)| !matches!(a, Axis::Clients | Axis::Locks))
            .collect();
        let herd = group(&table, &lock_rows, &wx, &split);
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
            let c = line_chart(
                format!("Herd effect: {y} vs waiters"),
                &wx,
                y,
                &herd,
                |rows| mean(&table, rows, column),
            );
            files.extend(chart::render(&c, &charts_dir, stem)?);
            md.chart(&c.title, stem);
        }
    }
    md.figures(&x, &series);
    let x_is_size = matches!(x.kind, XKind::Axis(Axis::ClusterSize, _));
    md.published(&published::sections(&table, &rows, x_is_size));
    let markdown = dir.join("report.md");
    std::fs::write(&markdown, md.finish())
        .map_err(|e| ReportError::Write(format!("{}: {e}", markdown.display())))?;
    Ok(Written {
        markdown,
        charts: files,
    })
}

/// `dir/run.json`, if it is there and parses.
fn read_meta(dir: &Path) -> Option<serde_json::Value> {
    std::fs::read(dir.join("run.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
}

/// The axes a sweep's run.json says it swept; `None` when `meta` is not a sweep's.
fn swept_axes(meta: Option<&serde_json::Value>) -> Option<Vec<Axis>> {
    let meta = meta?;
    if meta.get("schema")?.as_str()? != crate::sweep::record::SWEEP_SCHEMA {
        return None;
    }
    let axes = meta.get("axes")?.as_array()?;
    Some(
        axes.iter()
            .filter_map(|a| Axis::from_name(a.get(0)?.as_str()?))
            .collect(),
    )
}

fn line_chart(
    title: String,
    x: &XAxis,
    y_label: &str,
    series: &[Series],
    y: impl Fn(&[usize]) -> Option<f64>,
) -> LineChart {
    LineChart {
        title,
        x_label: x.label.clone(),
        y_label: y_label.into(),
        x_scale: x.scale.clone(),
        y_range: None,
        lines: series
            .iter()
            .map(|s| Line {
                label: s.label(),
                color: target_color(&s.target),
                dashed: s.variant % 2 == 1,
                markers: true,
                points: s
                    .points
                    .iter()
                    .filter_map(|p| Some((p.x, y(&p.rows)?)))
                    .collect(),
            })
            .filter(|l| !l.points.is_empty())
            .collect(),
    }
}

/// One CDF chart per target: a line per x value (and per other axis value), from the
/// merged latency.hlog of its repeats. Needs the sweep's `point` column.
fn cdf_charts(dir: &Path, table: &Table, x: &XAxis, series: &[Series]) -> Vec<(String, LineChart)> {
    if !table.has("point") {
        return Vec::new();
    }
    let mut targets: Vec<&str> = Vec::new();
    for s in series {
        if !targets.contains(&s.target.as_str()) {
            targets.push(&s.target);
        }
    }
    let x_name = match &x.kind {
        XKind::Axis(axis, _) => axis.name(),
        _ => "",
    };
    let mut charts = Vec::new();
    for target in targets {
        let mut lines = Vec::new();
        let of_target: Vec<&Series> = series.iter().filter(|s| s.target == target).collect();
        let count: usize = of_target.iter().map(|s| s.points.len()).sum();
        for s in of_target {
            for p in &s.points {
                let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
                for &r in &p.rows {
                    let Some(point) = table.rows[r].get("point") else {
                        continue;
                    };
                    // A point without its log (copied summary, failed write) is left out.
                    let _ = cdf::merge_log(&dir.join(point).join("latency.hlog"), &mut h);
                }
                let points = cdf::points(&h);
                if points.is_empty() {
                    continue;
                }
                let mut label = if x_name.is_empty() {
                    target.to_string()
                } else {
                    format!("{x_name}={}", p.x_text)
                };
                if !s.key.is_empty() {
                    label = format!("{label} {}", s.key);
                }
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
                });
            }
        }
        if lines.is_empty() {
            continue;
        }
        charts.push((
            target.to_string(),
            LineChart {
                title: format!("Latency CDF: {target}"),
                x_label: "latency (ms, log scale)".into(),
                y_label: "fraction of operations at or below".into(),
                x_scale: XScale::Log10,
                y_range: Some((0.0, 1.02)),
                lines,
            },
        ));
    }
    charts
}

/// report.md, built section by section.
struct Markdown<'a> {
    table: &'a Table,
    text: String,
    charts: String,
}

impl<'a> Markdown<'a> {
    fn new(dir: &Path, meta: Option<&serde_json::Value>, table: &'a Table, rows: &[usize]) -> Self {
        let name = meta
            .and_then(|m| m.get("name")?.as_str().map(String::from))
            .unwrap_or_else(|| dir.display().to_string());
        let mut text = format!("# coordbench report: {name}\n\n");
        if let Some(m) = meta {
            if let Some(d) = m.get("description").and_then(|d| d.as_str()) {
                let _ = writeln!(text, "{d}\n");
            }
            let spec = m.get("spec_file").and_then(|s| s.as_str()).unwrap_or("?");
            let quick = m.get("quick").and_then(|q| q.as_bool()).unwrap_or(false);
            let _ = writeln!(
                text,
                "Spec: `{spec}`{}. Started {}, finished {}.\n",
                if quick { " (--quick)" } else { "" },
                m.get("started_at").and_then(|s| s.as_str()).unwrap_or("?"),
                m.get("finished_at").and_then(|s| s.as_str()).unwrap_or("?"),
            );
            if let Some(env) = m.get("environment") {
                let _ = writeln!(
                    text,
                    "Machine: {}, {} cores, {} GiB memory, kernel {}; coordbench {} ({}).\n",
                    env.get("cpu_model").and_then(|v| v.as_str()).unwrap_or("?"),
                    env.get("cores").and_then(|v| v.as_u64()).unwrap_or(0),
                    env.get("memory_bytes")
                        .and_then(|v| v.as_u64())
                        .unwrap_or(0)
                        >> 30,
                    env.get("kernel").and_then(|v| v.as_str()).unwrap_or("?"),
                    env.get("coordbench_version")
                        .and_then(|v| v.as_str())
                        .unwrap_or("?"),
                    env.get("git_commit")
                        .and_then(|v| v.as_str())
                        .unwrap_or("?"),
                );
            }
        }
        let _ = writeln!(
            text,
            "{} of {} runs complete; incomplete runs are left out of the charts and figures. \
             Points repeated more than once show the mean of their repeats. Definitions of \
             every figure: RESULTS.md.\n",
            rows.len(),
            table.rows.len()
        );
        Markdown {
            table,
            text,
            charts: String::new(),
        }
    }

    fn chart(&mut self, title: &str, stem: &str) {
        let _ = writeln!(
            self.charts,
            "### {title}\n\n![{title}](charts/{stem}.png)\n\n[SVG](charts/{stem}.svg)\n"
        );
    }

    fn figures(&mut self, x: &XAxis, series: &[Series]) {
        let extra: Vec<(&str, &str, f64)> = [
            ("notifications_per_release", "notifications / release", 1.0),
            ("requests_per_release", "requests / release", 1.0),
            ("sync_p99_us", "sync p99 (ms)", 1e-3),
            ("server_peak_rss_mb", "server peak RSS (MB)", 1.0),
            ("server_cpu_us_per_op", "server CPU (µs / op)", 1.0),
            ("client_cpu_us_per_op", "generator CPU (µs / op)", 1.0),
        ]
        .into_iter()
        // Only columns some charted row has a value in.
        .filter(|(c, _, _)| {
            series
                .iter()
                .flat_map(|s| &s.points)
                .flat_map(|p| &p.rows)
                .any(|&r| self.table.rows[r].get(c).is_some())
        })
        .collect();
        let mut s = format!(
            "| target | series | {} | runs | throughput (ops/s) | p50 (ms) | p99 (ms) | errors |",
            x.label
        );
        let mut rule = "|---|---|---|---|---|---|---|---|".to_string();
        for (_, title, _) in &extra {
            let _ = write!(s, " {title} |");
            rule.push_str("---|");
        }
        let _ = writeln!(s, "\n{rule}");
        let mut any_saturated = false;
        for se in series {
            for p in &se.points {
                let m = |c: &str, scale: f64| {
                    mean(self.table, &p.rows, c).map_or("–".into(), |v| number(v * scale))
                };
                let saturated = p
                    .rows
                    .iter()
                    .any(|&r| self.table.rows[r].get("generator_saturated") == Some("true"));
                any_saturated |= saturated;
                let _ = write!(
                    s,
                    "| {} | {} | {}{} | {} | {} | {} | {} | {} |",
                    se.target,
                    if se.key.is_empty() { "–" } else { &se.key },
                    p.x_text,
                    if saturated { " ⚠ saturated" } else { "" },
                    p.rows.len(),
                    m("throughput_ops_s", 1.0),
                    m("p50_us", 1e-3),
                    m("p99_us", 1e-3),
                    m("errors", 1.0),
                );
                for (c, _, scale) in &extra {
                    let _ = write!(s, " {} |", m(c, *scale));
                }
                s.push('\n');
            }
        }
        if any_saturated {
            let _ = writeln!(
                s,
                "\n⚠ saturated: the load generator of at least one run of the point was \
                 saturated or starved of CPU (`generator_saturated` in summary.csv, RESULTS.md), \
                 so its figures understate the target."
            );
        }
        let _ = writeln!(self.text, "## Charts\n\n{}", self.charts);
        let _ = writeln!(self.text, "## Figures\n\n{s}");
    }

    fn published(&mut self, sections: &str) {
        if !sections.is_empty() {
            let _ = writeln!(self.text, "## Published figures beside ours\n\n{sections}");
        }
    }

    fn finish(self) -> String {
        self.text
    }
}
