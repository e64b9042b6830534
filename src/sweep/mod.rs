//! `coordbench sweep SPEC.toml`: runs every point of a spec (targets × axis values ×
//! repeats) through the same path as `coordbench run` ([`coordbench_bench::run::run_with`]), each on a
//! fresh cluster in its own directory, then writes the sweep's summary.csv and run.json
//! and the report ([`coordbench_analysis::report`]).
//!
//! A sweep directory can be rerun: points whose run.json says complete are skipped, any
//! other point's directory is removed and the point runs again. Ctrl-C ends the current
//! point as it ends a run (written, marked incomplete) and stops the sweep (exit 130).

pub mod plan;
pub mod progress;
pub mod record;
pub mod spec;
pub mod summary;

use clap::Args;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use coordbench_analysis::report;
use coordbench_bench::run::{self as bench, Console};
use coordbench_lab::signals;
use coordbench_results::outcome::{one_line, Outcome, UsageError};
use coordbench_results::time::compact_utc;

use plan::Point;
use progress::{point_line, Progress};
use record::{point_complete, SweepRecord};
use spec::Spec;

#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// The sweep spec (TOML: targets, workload, [options], [targets.NAME], [axes],
    /// [quick]; see workloads/*.toml and docs/reference.md, "Sweep specs").
    pub spec: PathBuf,

    /// Sweep directory; rerunning into it skips complete points (default:
    /// results/<UTC time>-sweep-<spec name>/).
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Use the spec's [quick] overrides (a variant that finishes in minutes).
    #[arg(long)]
    pub quick: bool,
}

pub async fn run(args: SweepArgs) -> Result<Outcome, UsageError> {
    let spec = Spec::load(&args.spec, args.quick).map_err(|e| UsageError(e.to_string()))?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "{}-sweep-{}",
            compact_utc(SystemTime::now()),
            spec.name
        ))
    });
    let points = plan::points(&spec, &out).map_err(|e| UsageError(e.to_string()))?;
    // A missing font would otherwise surface only after the last point.
    report::font::load(Path::new(report::font::DEFAULT_FONT))
        .map_err(|e| UsageError(e.to_string()))?;
    std::fs::create_dir_all(&out).map_err(|e| {
        UsageError(format!(
            "cannot create sweep directory {}: {e}",
            out.display()
        ))
    })?;
    let stop = signals::stop_on_signals()?;

    let mut record = SweepRecord::new(&spec, &points, now_rfc3339());
    let todo = mark_skipped(&mut record, &points);
    record.write(&out)?;
    let window = points.first().map_or(Duration::ZERO, |p| {
        p.config.plan.warmup + p.config.plan.duration
    });
    let mut progress = Progress::new(todo, window);
    let skipped = points.len() - todo;
    progress.line(&format!(
        "sweep {}: {} points in {}{}",
        spec.name,
        points.len(),
        out.display(),
        if skipped > 0 {
            format!(" ({skipped} already complete, {todo} to run)")
        } else {
            String::new()
        }
    ));

    let mut interrupted = false;
    for i in spec.run_order(&points) {
        let point = &points[i];
        if record.points[i].status == "skipped" {
            continue;
        }
        if stop.is_cancelled() {
            interrupted = true;
            break;
        }
        let ran = run_point(point, spec.capacity.as_ref(), &stop, &mut progress).await?;
        record.points[i].status = ran.status.into();
        record.points[i].error = ran.error;
        record.write(&out)?;
        if ran.status == "interrupted" {
            interrupted = true;
            break;
        }
    }
    progress.finish();

    let rows = finish(&out, &points, &mut record, interrupted)?;
    let summary_path = out.join("summary.csv");
    if interrupted {
        eprintln!(
            "interrupted: {rows} rows in {}; rerun the same command to run only the missing points",
            summary_path.display()
        );
        return Ok(Outcome::Interrupted);
    }
    println!("summary: {} ({rows} rows)", summary_path.display());
    write_report(&out, &record)?;
    let failed = record
        .points
        .iter()
        .filter(|p| p.status == "failed")
        .count();
    if failed > 0 {
        eprintln!("{failed} points failed; see run.json in {}", out.display());
        return Ok(Outcome::Failed);
    }
    Ok(Outcome::Complete)
}

/// Charts, report.md and report.html for a sweep (or gate side) directory. With failed points a report
/// that cannot be drawn (no point has results) is a warning: the failure is what the exit
/// code must say.
pub fn write_report(out: &Path, record: &SweepRecord) -> Result<(), UsageError> {
    let failed = record.points.iter().any(|p| p.status == "failed");
    match report::write(
        out,
        Path::new(report::font::DEFAULT_FONT),
        &report::Planning::default(),
    ) {
        Ok(written) => {
            println!(
                "report:  {} and {} ({} chart files, SVG and PNG)",
                written.markdown.display(),
                written.html.display(),
                written.charts.len()
            );
            Ok(())
        }
        Err(e) if failed => {
            eprintln!(
                "no report for {}: {}",
                out.display(),
                one_line(&e.to_string())
            );
            Ok(())
        }
        Err(e) => Err(UsageError(one_line(&format!(
            "report of {}: {e}",
            out.display()
        )))),
    }
}

/// How one point's run ended, as its sweep run.json records it.
pub struct PointRun {
    /// `complete`, `failed` or `interrupted`.
    pub status: &'static str,
    pub error: Option<String>,
}

/// Runs one point into its own fresh directory (whatever an incomplete earlier attempt left
/// there goes), with progress lines before and after.
pub async fn run_point(
    point: &Point,
    capacity: Option<&crate::capacity::SearchArgs>,
    stop: &tokio_util::sync::CancellationToken,
    progress: &mut Progress,
) -> Result<PointRun, UsageError> {
    if point.dir.exists() {
        std::fs::remove_dir_all(&point.dir)
            .map_err(|e| UsageError(format!("cannot remove {}: {e}", point.dir.display())))?;
    }
    let label = point.label();
    progress.begin(&label);
    let result = match capacity {
        Some(options) => search_point(point, options, stop).await,
        None => {
            bench::run_with(
                &point.args,
                point.config.clone(),
                stop.clone(),
                Console::Silent,
            )
            .await
        }
    };
    let figures = record::point_figures(&point.dir);
    let (status, error) = match result {
        Ok(Outcome::Complete) => ("complete", None),
        Ok(Outcome::Failed | Outcome::Breached) => ("failed", figures.error.clone()),
        Ok(Outcome::Interrupted) => ("interrupted", None),
        Err(e) => ("failed", Some(e.0)),
    };
    let mut shown = match &error {
        Some(e) => format!("{status}: {e}"),
        None => status.to_string(),
    };
    if figures.generator_saturated {
        shown.push_str(", generator saturated");
    }
    progress.end(&point_line(
        &label,
        &shown,
        figures.throughput,
        figures.p99_us,
    ));
    Ok(PointRun { status, error })
}

/// A `[capacity]` sweep's point: a capacity search into the point's directory.
async fn search_point(
    point: &Point,
    options: &crate::capacity::SearchArgs,
    stop: &tokio_util::sync::CancellationToken,
) -> Result<Outcome, UsageError> {
    let unit = crate::capacity::check(&point.args)?;
    let out = bench::results_dir(Some(&point.dir), &point.config)?;
    let search = crate::capacity::Searching {
        options,
        config: &point.config,
        out: &out,
        stop,
        unit,
        console: Console::Silent,
    };
    Ok(crate::capacity::search_into(&search).await?.0)
}

/// Writes the summary.csv of the points run so far and the record's final state; returns
/// the summary's rows.
pub fn finish(
    out: &Path,
    points: &[Point],
    record: &mut SweepRecord,
    interrupted: bool,
) -> Result<usize, UsageError> {
    let rows = summary::write(out, points)?;
    record.end(interrupted);
    // The sweep ran from its first point's start to its last point's finish, whichever
    // invocations ran them (a rerun that skipped every point ran nothing).
    if let Some((started, finished)) = record::points_span(points) {
        record.header.started_at = started;
        record.header.finished_at = finished;
    }
    record.write(out)?;
    Ok(rows)
}

/// Marks the points a previous invocation completed as skipped; returns how many remain.
pub fn mark_skipped(record: &mut SweepRecord, points: &[Point]) -> usize {
    let mut todo = 0;
    for (status, point) in record.points.iter_mut().zip(points) {
        if point_complete(&point.dir) {
            status.status = "skipped".into();
        } else {
            todo += 1;
        }
    }
    todo
}

pub use coordbench_results::time::now_rfc3339;
