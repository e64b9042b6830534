//! Result files. A run directory holds:
//!
//! - `run.json`: the whole record ([`RunRecord`]): configuration, environment, target,
//!   sync probe, results, and `complete`;
//! - `summary.csv`: one row per run ([`SummaryRow`]);
//! - `timeseries.csv`: one row per 1 s interval;
//! - `latency.hlog`: the per-interval HdrHistograms in the standard interval-log format.
//!
//! Every column is documented in docs/reference.md.

pub mod hdrlog;
pub mod record;
pub mod summary;
pub mod timeseries;

use std::path::Path;

use anyhow::Context;

pub use record::{LatencySummary, MeasuredResults, RunRecord};
pub use summary::SummaryRow;

use crate::runner::RunOutcome;

/// Writes every result file of a run into `dir` (which must exist). `outcome` is `None`
/// when the run failed before measuring; run.json is written regardless.
pub fn write_run(
    dir: &Path,
    record: &RunRecord,
    outcome: Option<&RunOutcome>,
) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(record).context("encoding run.json")?;
    std::fs::write(dir.join("run.json"), json + "\n")
        .with_context(|| format!("writing {}", dir.join("run.json").display()))?;
    if let Some(outcome) = outcome {
        let row = SummaryRow::new(record, outcome);
        summary::write(&dir.join("summary.csv"), &[row])?;
        timeseries::write(&dir.join("timeseries.csv"), outcome)?;
        hdrlog::write(&dir.join("latency.hlog"), record, outcome)?;
    }
    Ok(())
}
