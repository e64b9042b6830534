//! The workload seam: setup, one actor per client, and a check over the history.

use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{ClientCounters, Coordinator, DriverError, Session};

use crate::CheckReport;

/// Why a workload could not be prepared or checked.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("workload setup failed: {0}")]
    Setup(#[source] DriverError),
    #[error("invalid workload option: {0}")]
    Invalid(String),
}

/// What one operation reports. `latency` is set by operations that measure only a part of
/// themselves (a lock cycle reports its acquisition, not the hold and release); otherwise
/// the runner measures the whole call.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpResult {
    pub latency: Option<Duration>,
}

/// One client's behaviour. The runner calls `run_op` repeatedly and times it.
#[async_trait]
pub trait Actor: Send {
    /// Runs one operation. It may be cancelled (dropped) at an await point when it exceeds
    /// the operation timeout; the next call must then repair whatever was left half done.
    async fn run_op(&mut self) -> Result<OpResult, DriverError>;

    /// Ends the client: repairs a cancelled operation and closes the session.
    async fn finish(&mut self);

    /// The session's request and notification counters.
    fn counters(&self) -> ClientCounters;
}

/// A workload: kv-put, kv-get, lock, ...
#[async_trait]
pub trait Workload: Send + Sync {
    /// The name used on the command line and in results.
    fn name(&self) -> &'static str;

    /// Prepares the target (e.g. writes the keys a read workload reads).
    async fn setup(&self, coordinator: &dyn Coordinator) -> Result<(), WorkloadError>;

    /// The actor of client `client`, which owns `session`.
    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor>;

    /// Judges the recorded history. `window` is the measured part of the run on the
    /// workload's clock; figures such as handover latency are taken from it, while safety
    /// checks look at the whole run.
    fn check(&self, window: (Duration, Duration)) -> CheckReport;
}
