//! A sharded run's plan: which part of the run this process does, the run it belongs to,
//! and its start rule (checked from the command line by `config::sharding`).

use std::time::{Duration, SystemTime};

use super::Part;

/// When the measured run (warm-up first) begins, once clients have their sessions.
#[derive(Debug, Clone, PartialEq)]
pub enum StartRule {
    /// At once (an unsharded run, or a shard started without a common start).
    Now,
    /// At a wall-clock time (`--start-at`).
    At(SystemTime),
    /// When every shard of the run has arrived at the target (`--rendezvous`).
    Rendezvous {
        run_id: String,
        part: Part,
        timeout: Duration,
    },
}

impl StartRule {
    /// The name run.json records.
    pub fn name(&self) -> &'static str {
        match self {
            StartRule::Now => "now",
            StartRule::At(_) => "at",
            StartRule::Rendezvous { .. } => "rendezvous",
        }
    }
}

/// What `--shard` and its companions asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Sharding {
    pub part: Part,
    pub run_id: String,
    pub start: StartRule,
}
