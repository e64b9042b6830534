//! The fresh-cluster rule between windows. A window that passed leaves nothing behind
//! but its state. After a failed window the next one starts only once the backlog has
//! drained: one read, sent every 100 ms, answers within the objectives' tightest latency
//! bound (1 s without one), within 10 s. A cluster that has not drained by then, that
//! failed the window with errors (timed-out requests may still be queued in it), or that
//! lost a member is replaced by a fresh one before the next window.

use std::sync::Arc;
use std::time::{Duration, Instant};

use coordbench_drivers::{Consistency, Coordinator, SessionOptions};
use coordbench_workloads::kv::key_name;

use crate::capacity::slo::Slo;
use crate::results::RunRecord;

/// How long a failed window's backlog may take to drain.
pub const DRAIN_BOUND: Duration = Duration::from_secs(10);
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// What the next window needs after `record`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The same cluster, as it is.
    Continue,
    /// The same cluster once a read answers within the bound.
    Drain,
    /// A fresh cluster.
    Fresh,
}

/// The rule: what follows a window that `passed` (or not) with `record`.
pub fn after(passed: bool, record: &RunRecord) -> Next {
    let errors = record.results.as_ref().map_or(0, |r| r.errors);
    match (passed, record.complete) {
        (true, true) => Next::Continue,
        (_, false) => Next::Fresh,
        (false, true) if errors > 0 => Next::Fresh,
        (false, true) => Next::Drain,
    }
}

/// The tightest latency bound among `slos` (1 s without one).
pub fn drain_bound(slos: &[Slo]) -> Duration {
    slos.iter()
        .filter_map(Slo::latency_bound)
        .min()
        .unwrap_or(Duration::from_secs(1))
}

/// Whether a read answered within `bound` before [`DRAIN_BOUND`] passed.
pub async fn drained(coordinator: &Arc<dyn Coordinator>, bound: Duration) -> bool {
    let options = SessionOptions {
        ttl: Duration::from_secs(10),
    };
    let deadline = Instant::now() + DRAIN_BOUND;
    let Ok(Ok(mut session)) =
        tokio::time::timeout(DRAIN_BOUND, coordinator.open_session(0, &options)).await
    else {
        return false;
    };
    let key = key_name(0);
    let mut drained = false;
    while Instant::now() < deadline && !drained {
        let sent = Instant::now();
        let left = deadline.saturating_duration_since(sent);
        let read = session.get(&key, Consistency::Linearizable);
        drained =
            matches!(tokio::time::timeout(left, read).await, Ok(Ok(_))) && sent.elapsed() < bound;
        if !drained {
            tokio::time::sleep(DRAIN_POLL).await;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), session.close()).await;
    drained
}
