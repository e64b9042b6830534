//! The barrier workload's option: how many double barriers every client passes, which is
//! also the run's length (no warm-up, a window that lasts until the last barrier); its
//! check and what run.json records of it.

use std::time::Duration;

use clap::Args;
use coordbench_results::kinds::WorkloadKind;
use serde::Serialize;

use crate::args::load::{LoadOptions, Shape};

/// barrier: default barriers (the ZooKeeper paper's Table 3 starts at 200).
pub const DEFAULT_BARRIERS: u64 = 200;
/// barrier: the longest a barrier run's window may last.
pub const BARRIER_TIME_LIMIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "barrier workload")]
pub struct BarrierOptions {
    /// barrier: double barriers every client passes in sequence (default 200). A barrier
    /// run has no warm-up and its window lasts until every barrier is passed (at most 10
    /// minutes), so --warmup and --duration do not apply to it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub barriers: Option<u64>,
}

/// What run.json keeps of the barrier options.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BarrierRecord {
    /// barrier: barriers every client passes.
    pub barriers: Option<u64>,
}

impl BarrierOptions {
    /// A barrier run's length is its barriers: `--ops` and `--rate` do not apply.
    pub(super) fn check_budget(&self, load: &LoadOptions) -> Result<(), String> {
        if load.workload == WorkloadKind::Barrier && (load.ops.is_some() || load.rate.is_some()) {
            return Err("a barrier run is as long as its --barriers; omit --ops and --rate".into());
        }
        Ok(())
    }

    /// Every client passes every barrier, one operation each; the window counts every
    /// barrier from the first and lasts until all are passed.
    pub(super) fn resolve(&self, shape: &mut Shape) -> BarrierRecord {
        let barriers = self.barriers.unwrap_or(DEFAULT_BARRIERS);
        shape.max_ops = Some(barriers.saturating_mul(shape.clients as u64));
        shape.warmup = Duration::ZERO;
        shape.duration = BARRIER_TIME_LIMIT;
        BarrierRecord {
            barriers: Some(barriers),
        }
    }
}
