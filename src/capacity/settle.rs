//! The fresh-cluster rule between windows. A window that passed leaves its writes behind
//! and nothing else worth a restart: the next window runs on the same cluster at once. A
//! window that failed may have left more than a queue: requests still in the servers, a
//! log grown past its snapshot point, a snapshot or compaction under way, a member behind.
//! One fast read after it does not show that (a Raft cluster pushed to twice its capacity
//! answered a read within the objective, then failed every later window down to half the
//! rate it had passed before: docs/reference.md, "Capacity searches"), so the next window runs on a fresh cluster.
//! Attached clusters (`--endpoints`) cannot be replaced: every window runs on them.

use coordbench_bench::outputs::RunRecord;

/// What the next window needs after a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The same cluster, as it is.
    Continue,
    /// A fresh cluster.
    Fresh,
}

/// The rule: what follows a window that `passed` (or not) with `record`.
pub fn after(passed: bool, record: &RunRecord) -> Next {
    if passed && record.header.complete {
        Next::Continue
    } else {
        Next::Fresh
    }
}
