//! The register workload's option: the wall-clock bound on its linearizability check, and
//! what run.json records of it.

use std::time::Duration;

use clap::Args;
use coordbench_results::parse::parse_positive_duration;
use serde::Serialize;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "register workload")]
pub struct RegisterOptions {
    /// register: wall-clock bound on the linearizability check; past it the verdict is
    /// `unknown`.
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration)]
    pub check_budget: Duration,
}

/// What run.json keeps of the register options.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RegisterRecord {
    /// register: the linearizability check's wall-clock bound, ms.
    pub check_budget_ms: Option<u64>,
}

impl RegisterOptions {
    /// The record: the check's budget, in ms.
    pub(super) fn record(&self) -> RegisterRecord {
        RegisterRecord {
            check_budget_ms: Some(self.check_budget.as_millis() as u64),
        }
    }
}
