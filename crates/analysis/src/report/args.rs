//! `coordbench report`'s options.

use std::path::PathBuf;

use clap::Args;
use coordbench_results::parse::parse_rate;

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A sweep directory: summary.csv, and a directory per point with its latency.hlog.
    pub dir: PathBuf,

    /// Today's load (ops/s of the searched workload) for the capacity section's "what N×
    /// the load would need" (default: the first configuration's max rate).
    #[arg(long, value_parser = parse_rate)]
    pub load: Option<f64>,

    /// Keys held today, for the same paragraph's memory per member.
    #[arg(long, value_name = "N")]
    pub keys: Option<u64>,

    /// Watchers held today, likewise.
    #[arg(long, value_name = "N")]
    pub watchers: Option<u64>,

    /// Sessions (leases) held today, likewise.
    #[arg(long, value_name = "N")]
    pub sessions: Option<u64>,

    /// A state-scaling sweep directory (workloads/state-scaling.toml) whose fitted cost per
    /// key, watcher and session the same paragraph uses.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
}

impl ReportArgs {
    /// The planner's figures, as the report takes them (without `--state`'s costs).
    pub fn planning(&self) -> super::Planning {
        super::Planning {
            load: self.load,
            keys: self.keys,
            watchers: self.watchers,
            sessions: self.sessions,
            costs: Vec::new(),
        }
    }
}
