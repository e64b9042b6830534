//! The workload seam: setup, one actor per client, and a check over the history.
//!
//! A workload may also run sessions of its own beside the clients (watchers, observers):
//! it opens them in `setup`, the runner reads their counters through `background_counters`
//! at the start and end of the window, and ends them with `stop` before `check`.

use std::path::Path;
use std::sync::Arc;
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

/// Which kind of operation an actor ran, for workloads that mix kinds (kv-mixed): the
/// runner records each kind in a histogram of its own beside the combined one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    Read,
    Write,
}

impl OpClass {
    /// The name used in results (summary.csv column prefixes, latency.hlog tags).
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Read => "read",
            OpClass::Write => "write",
        }
    }
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

    /// The kind of the operation `run_op` last began (decided before its first await, so
    /// it holds for an operation that timed out too); `None` for workloads of one kind.
    fn op_class(&self) -> Option<OpClass> {
        None
    }
}

/// A workload: kv-put, kv-get, lock, ...
#[async_trait]
pub trait Workload: Send + Sync {
    /// The name used on the command line and in results.
    fn name(&self) -> &'static str;

    /// Prepares the target (e.g. writes the keys a read workload reads) and starts the
    /// workload's own background sessions, if any. Actors may keep `coordinator` to open
    /// replacement sessions (after abandoning one, as a crashed client would).
    async fn setup(&self, coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError>;

    /// The actor of client `client`, which owns `session`.
    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor>;

    /// Judges the recorded history. `window` is the measured part of the run on the
    /// workload's clock; figures such as handover latency are taken from it, while safety
    /// checks look at the whole run.
    fn check(&self, window: (Duration, Duration)) -> CheckReport;

    /// Requests and notifications of the workload's background sessions so far, summed.
    fn background_counters(&self) -> ClientCounters {
        ClientCounters::default()
    }

    /// Ends the background sessions once the window is over (after letting them catch up
    /// on what the clients did, within a bound of the workload's choosing).
    async fn stop(&self) {}

    /// Writes the recorded history into the run directory `dir`, for workloads that keep
    /// one as a file (register: history.jsonl).
    fn write_history(&self, dir: &Path) -> std::io::Result<()> {
        let _ = dir;
        Ok(())
    }
}
