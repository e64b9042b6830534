//! The leader's automatic compaction (`serve raft --auto-compaction-mode/-retention`, as
//! etcd's): every member runs this task, which feeds the [`Compactor`] its clock, the
//! store's revision and whether the member leads, and proposes the `Compact` it is given.
//! Only a leader is given one; followers only sample (see compactor.rs).

use std::sync::Arc;

use coordbench_kv::{AutoCompaction, Command, CompactionRequest, KvError};
use coordbench_node::{NodeRole, Replicator};
use tokio::time::{sleep, Instant};

use crate::compactor::Compactor;
use crate::core::Core;
use crate::error::ApiError;
use crate::state_machine::KvStateMachine;

/// Runs until the server shuts down, compacting on `setting` while this member leads.
pub(crate) async fn run<R: Replicator<KvStateMachine>>(
    core: Arc<Core<R>>,
    setting: AutoCompaction,
) {
    let mut compactor = Compactor::new(
        setting.retention,
        Instant::now().into_std(),
        core.revision(),
    );
    let every = compactor.interval();
    loop {
        // Each look one interval after the last one ended, as etcd's compactors wait: a
        // look due one period after a compaction is not put off by the time it took.
        tokio::select! {
            () = core.shutdown.cancelled() => return,
            () = sleep(every) => {}
        }
        let leader = core.replicator.status().role == NodeRole::Leader;
        let now = Instant::now().into_std();
        let Some(revision) = compactor.tick(now, core.revision(), leader) else {
            continue;
        };
        let cmd = Command::Compact(CompactionRequest {
            revision,
            physical: false,
        });
        match core.until_shutdown(core.propose(&None, cmd)).await {
            Err(_) => return,
            Ok(result) => {
                if done(result, revision, &setting) {
                    compactor.compacted(revision, Instant::now().into_std());
                }
            }
        }
    }
}

/// Logs the outcome of compacting to `revision`; whether it counts as done (applied, or
/// the revision was compacted already, which etcd's compactors count as done too).
fn done(
    result: Result<coordbench_kv::Response, ApiError>,
    revision: i64,
    setting: &AutoCompaction,
) -> bool {
    let (mode, retention) = (setting.mode.name(), setting.text.as_str());
    match result {
        Ok(_) => {
            tracing::info!(revision, mode, retention, "auto compaction done");
            true
        }
        Err(ApiError::Kv(KvError::Compacted { compact_revision })) => {
            tracing::debug!(
                revision,
                compact_revision,
                "auto compaction: revision compacted already"
            );
            true
        }
        Err(e) => {
            tracing::warn!(revision, mode, retention, error = %e, "auto compaction failed; retried at the next look");
            false
        }
    }
}
