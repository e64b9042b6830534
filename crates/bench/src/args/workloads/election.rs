//! The election workload's options: an op budget of won elections, the leaders' term and
//! whether they crash instead of resigning; their check and what run.json records of them
//! (the observers are `--watchers`, [`super::watch`]).

use std::time::Duration;

use clap::Args;
use serde::Serialize;

use crate::args::load::{LoadOptions, Shape};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "election workload")]
pub struct ElectionOptions {
    /// election: end the window after this many won elections (default: run for
    /// --duration).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub elections: Option<u64>,

    /// election: how long a leader leads before it resigns.
    #[arg(long, default_value = "50ms", value_parser = coordbench_results::parse::parse_duration)]
    pub term: Duration,

    /// election: leaders crash at the end of their term (abandon their session) instead of
    /// resigning; the next leader takes over when the server expires the session (--ttl).
    #[arg(long)]
    pub crash_leader: bool,
}

/// What run.json keeps of the election options.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ElectionRecord {
    /// election: won elections after which the window ends.
    pub elections: Option<u64>,
    /// election: how long a leader leads, ms.
    pub term_ms: Option<f64>,
    /// election: leaders crash instead of resigning.
    pub crash_leader: bool,
}

impl ElectionOptions {
    /// `--elections` is the run's op budget, so `--ops` does not apply beside it.
    pub(super) fn check_budget(&self, load: &LoadOptions) -> Result<(), String> {
        if self.elections.is_some() && load.ops.is_some() {
            return Err("--elections is the op budget of an election run; omit --ops".into());
        }
        Ok(())
    }

    /// The record, and the op budget: `--elections`, else `--ops`.
    pub(super) fn resolve(&self, shape: &mut Shape) -> ElectionRecord {
        shape.max_ops = self.elections.or(shape.max_ops);
        ElectionRecord {
            elections: self.elections,
            term_ms: Some(self.term.as_secs_f64() * 1000.0),
            crash_leader: self.crash_leader,
        }
    }
}
