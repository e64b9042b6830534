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

use coordbench_results::files;

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
    files::write_json(&dir.join("run.json"), record)?;
    if let Some(outcome) = outcome {
        files::write_csv_rows(&dir.join("summary.csv"), [SummaryRow::new(record, outcome)])?;
        timeseries::write(&dir.join("timeseries.csv"), outcome)?;
        hdrlog::write(&dir.join("latency.hlog"), record, outcome)?;
    }
    Ok(())
}
