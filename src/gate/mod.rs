//! `coordbench gate SPEC.toml`: a regression gate. It runs a baseline side and a candidate
//! side of the same points interleaved in one session ([`schedule`]), each side written as
//! a sweep directory (`DIR/baseline/`, `DIR/candidate/`, with charts), compares them
//! ([`coordbench_analysis::compare`], runs of one repeat paired, as they ran back to back)
//! and holds the candidate to the spec's thresholds: gate.md, gate.json, junit.xml and
//! benchstat's input files ([`outputs`], [`junit`]).
//!
//! Exit codes: 0 every threshold held; 3 a threshold was breached; 2 bad input; 1 a run
//! failed; 130 interrupted (what was measured is kept; rerunning into the same directory
//! runs only what is missing, as sweeps do).

pub mod junit;
pub mod outputs;
pub mod schedule;
pub mod spec;

use clap::Args;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::sweep as sweeps;
use crate::sweep::plan::{self, Point};
use crate::sweep::progress::Progress;
use crate::sweep::record::SweepRecord;
use coordbench_analysis::compare::{self, checks};
use coordbench_analysis::report;
use coordbench_lab::signals;
use coordbench_results::outcome::{Outcome, UsageError};
use coordbench_results::record::{EndReason, RecordHeader};
use coordbench_results::time::compact_utc;
use coordbench_results::time::now_rfc3339;

use schedule::Side;
use spec::GateSpec;

#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// The gate spec (TOML; see workloads/gate.toml).
    pub spec: PathBuf,

    /// Gate directory; rerunning into it runs only the missing runs (default:
    /// results/<UTC time>-gate-<spec name>/).
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Use the spec's [quick] overrides.
    #[arg(long)]
    pub quick: bool,

    /// Repeats per side instead of the spec's (more repeats detect smaller changes).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: Option<u32>,

    /// Set a run option on the baseline side, as in the spec's [baseline] table
    /// (e.g. engine_bin=/path/to/coordbench); repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    pub baseline: Vec<String>,

    /// Set a run option on the candidate side, as in the spec's [candidate] table.
    #[arg(long, value_name = "KEY=VALUE")]
    pub candidate: Vec<String>,
}

/// One side as the gate runs it.
struct SideRun {
    dir: PathBuf,
    points: Vec<Point>,
    record: SweepRecord,
}

pub async fn run(args: GateArgs) -> Result<Outcome, UsageError> {
    let overrides = spec::Overrides {
        baseline: args.baseline.clone(),
        candidate: args.candidate.clone(),
        repeats: args.repeats,
    };
    let spec = GateSpec::load(&args.spec, args.quick, &overrides)
        .map_err(|e| UsageError(e.to_string()))?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "{}-gate-{}",
            compact_utc(SystemTime::now()),
            spec.name
        ))
    });
    let mut sides = plan_sides(&spec, &out)?;
    report::font::load(Path::new(report::font::DEFAULT_FONT))
        .map_err(|e| UsageError(e.to_string()))?;
    let stop = signals::stop_on_signals()?;
    let started_at = now_rfc3339();
    let started = Instant::now();

    let configs = sides[0].points.len() / spec.baseline.repeats as usize;
    let order = schedule::interleaved(configs, spec.baseline.repeats as usize);
    let todo = sides
        .iter_mut()
        .map(|s| sweeps::mark_skipped(&mut s.record, &s.points))
        .sum();
    for s in &sides {
        std::fs::create_dir_all(&s.dir)
            .map_err(|e| UsageError(format!("cannot create {}: {e}", s.dir.display())))?;
        s.record.write(&s.dir)?;
    }
    let window = sides[0].points.first().map_or(Duration::ZERO, |p| {
        p.config.plan.warmup + p.config.plan.duration
    });
    let mut progress = Progress::new(todo, window);
    progress.line(&format!(
        "gate {}: {} runs per side, interleaved, in {}{}",
        spec.name,
        sides[0].points.len(),
        out.display(),
        if todo < order.len() {
            format!(" ({} already complete)", order.len() - todo)
        } else {
            String::new()
        }
    ));
    if let Some(judging) = spec.judging() {
        progress.line(&judging);
    }
    let interrupted = run_order(&order, &mut sides, &stop, &mut progress).await?;
    progress.finish();
    for s in &mut sides {
        sweeps::finish(&s.dir, &s.points, &mut s.record, interrupted)?;
    }
    if interrupted {
        eprintln!(
            "interrupted: rerun the same command (with --out {}) to run only the missing runs",
            out.display()
        );
        return Ok(Outcome::Interrupted);
    }
    for s in &sides {
        sweeps::write_report(&s.dir, &s.record)?;
    }
    let failed: usize = sides
        .iter()
        .map(|s| {
            s.record
                .points
                .iter()
                .filter(|p| p.status == "failed")
                .count()
        })
        .sum();
    let judged = judge(&spec, &out, &started_at, started.elapsed());
    if failed > 0 {
        // What did run is still compared where it can be; the gate itself failed.
        if let Err(e) = &judged {
            eprintln!("no comparison: {}", e.0);
        }
        eprintln!("{failed} runs failed; see run.json under {}", out.display());
        return Ok(Outcome::Failed);
    }
    judged
}

/// Both sides' points, which must pair up one to one.
fn plan_sides(spec: &GateSpec, out: &Path) -> Result<[SideRun; 2], UsageError> {
    let plan_side = |side: Side, s: &crate::sweep::spec::Spec| -> Result<SideRun, UsageError> {
        let dir = out.join(side.dir_name());
        let points = plan::points(s, &dir).map_err(|e| UsageError(e.to_string()))?;
        let record = SweepRecord::new(s, &points, now_rfc3339());
        Ok(SideRun {
            dir,
            points,
            record,
        })
    };
    let base = plan_side(Side::Baseline, &spec.baseline)?;
    let cand = plan_side(Side::Candidate, &spec.candidate)?;
    if base.points.len() != cand.points.len() {
        return Err(UsageError(format!(
            "{}: the baseline has {} runs and the candidate {}; when a side sets `target`, list one target in `targets`",
            spec.file.display(),
            base.points.len(),
            cand.points.len()
        )));
    }
    Ok([base, cand])
}

/// Runs `order`, skipping runs complete from an earlier invocation; true if interrupted.
async fn run_order(
    order: &[(Side, usize)],
    sides: &mut [SideRun; 2],
    stop: &tokio_util::sync::CancellationToken,
    progress: &mut Progress,
) -> Result<bool, UsageError> {
    for &(side, index) in order {
        let s = &mut sides[side as usize];
        if s.record.points[index].status == "skipped" {
            continue;
        }
        if stop.is_cancelled() {
            return Ok(true);
        }
        let ran = sweeps::run_point(&s.points[index], None, stop, progress).await?;
        s.record.points[index].status = ran.status.into();
        s.record.points[index].error = ran.error;
        s.record.write(&s.dir)?;
        if ran.status == "interrupted" {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Compares the sides, writes gate.md, gate.json and junit.xml, prints the ✓/✗ lines.
fn judge(
    spec: &GateSpec,
    out: &Path,
    started_at: &str,
    took: Duration,
) -> Result<Outcome, UsageError> {
    // The sides ran interleaved, a baseline and a candidate run of each repeat back to
    // back: their runs pair by repeat (docs/reference.md, "Comparing runs and gates").
    let comparison = compare::compare_with(
        &[out.join(Side::Baseline.dir_name())],
        &[out.join(Side::Candidate.dir_name())],
        compare::DEFAULT_ALPHA,
        compare::Pairing::ByRepeat,
    )
    .map_err(|e| UsageError(coordbench_results::outcome::one_line(&e.to_string())))?;
    let checks = checks::evaluate(&spec.thresholds, &comparison, spec.false_alarm);
    let breached = checks
        .iter()
        .filter(|c| c.outcome == checks::CheckOutcome::Breached)
        .count();
    let record = outputs::GateRecord {
        header: gate_header(started_at),
        name: &spec.name,
        spec_file: spec.file.display().to_string(),
        quick: spec.quick,
        passed: breached == 0
            && checks
                .iter()
                .all(|c| c.outcome == checks::CheckOutcome::Passed),
        breached,
        duration_s: took.as_secs_f64(),
        baseline_options: spec.baseline_options.clone(),
        candidate_options: spec.candidate_options.clone(),
        thresholds: &spec.thresholds,
        false_alarm: spec.false_alarm,
        checks: &checks,
        comparison: &comparison,
    };
    let written = outputs::write(out, &record)?;
    print!("{}", compare::render::table(&comparison, Some(&checks)));
    println!("\n{}", outputs::verdict_line(&record));
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    println!("gate:    {}", names.join(", "));
    Ok(if breached > 0 {
        Outcome::Breached
    } else {
        Outcome::Complete
    })
}

/// gate.json's header: a gate is judged only once both sides ran to their end.
fn gate_header(started_at: &str) -> RecordHeader {
    let mut header = RecordHeader::begin(
        coordbench_results::schema::GATE_SCHEMA,
        started_at.to_string(),
    );
    header.end(EndReason::Completed, None);
    header
}
