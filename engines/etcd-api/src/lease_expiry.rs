//! The leader's lease work, driven by its clock: expiry and checkpoints.
//!
//! Replicas never decide expiry themselves. While this member leads, every `lease_tick` it
//! asks its lease clock what is due ([`LeaseQuery::Due`], answered after a read barrier
//! like a keep-alive; the first question of a term promotes the clock, see
//! [`coordbench_kv::lease_clock`]) and proposes `LeaseExpire` for the leases whose deadline
//! passed and `LeaseCheckpoint` for the remaining TTLs due to be checkpointed, as etcd's
//! lessor does every 500 ms.

use std::sync::Arc;

use coordbench_kv::{Command, LeaseAnswer, LeaseQuery};
use coordbench_node::{NodeRole, Replicator};
use tokio::time::{interval, MissedTickBehavior};

use crate::core::{now_ms, Core};
use crate::error::ApiError;
use crate::state_machine::KvStateMachine;

/// Leases revoked or checkpointed per command (etcd's batch limits; keeps entries small).
const MAX_BATCH: usize = 1000;

pub(crate) async fn run<R: Replicator<KvStateMachine>>(core: Arc<Core<R>>) {
    let mut tick = interval(core.options.lease_tick);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = core.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let status = core.replicator.status();
        if status.role != NodeRole::Leader {
            continue;
        }
        match core.until_shutdown(due(&core, status.term)).await {
            Err(_) => return,
            Ok(Err(e)) => tracing::debug!(error = %e, "lease expiry or checkpoint failed"),
            Ok(Ok(())) => {}
        }
    }
}

/// One round as the leader of `term`: asks what is due, proposes it.
async fn due<R: Replicator<KvStateMachine>>(core: &Core<R>, term: u64) -> Result<(), ApiError> {
    let LeaseAnswer::Due {
        expired,
        checkpoints,
    } = core.ask_leases(&LeaseQuery::Due { term }).await?
    else {
        return Err(ApiError::Internal(
            "unexpected answer to a lease due query".into(),
        ));
    };
    for ids in expired.chunks(MAX_BATCH) {
        let cmd = Command::LeaseExpire {
            ids: ids.to_vec(),
            now_ms: now_ms(),
        };
        core.propose(&None, cmd).await?;
    }
    for batch in checkpoints.chunks(MAX_BATCH) {
        let cmd = Command::LeaseCheckpoint {
            checkpoints: batch.to_vec(),
        };
        core.propose(&None, cmd).await?;
    }
    Ok(())
}
