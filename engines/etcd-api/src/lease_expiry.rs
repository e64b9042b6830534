//! Lease expiry, driven by the leader's clock.
//!
//! Replicas never decide expiry themselves. While this member is leader, every
//! `lease_tick` it asks its store which leases' deadlines have passed and proposes
//! `LeaseExpire` for them; the state machine revokes only those still expired when the
//! command applies, so a keep-alive committed in between wins. On becoming leader (each
//! new term) it first proposes `LeaseRenewAll`, as etcd's lessor does on promotion: no
//! lease expires for the leaderless interval, and deadlines move onto this member's clock.

use std::sync::Arc;

use coordbench_kv::Command;
use coordbench_node::{NodeRole, Replicator};
use tokio::time::{interval, MissedTickBehavior};

use crate::core::{now_ms, Core};
use crate::state_machine::KvStateMachine;

/// Leases revoked per `LeaseExpire` command (keeps each log entry small).
const MAX_EXPIRE_BATCH: usize = 1000;

pub(crate) async fn run<R: Replicator<KvStateMachine>>(core: Arc<Core<R>>) {
    let mut tick = interval(core.options.lease_tick);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The term in which this member, as leader, has renewed every lease.
    let mut promoted: Option<u64> = None;
    loop {
        tokio::select! {
            () = core.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let status = core.replicator.status();
        if status.role != NodeRole::Leader {
            promoted = None;
            continue;
        }
        let step = async {
            if promoted != Some(status.term) {
                match core
                    .propose(&None, Command::LeaseRenewAll { now_ms: now_ms() })
                    .await
                {
                    Ok(_) => promoted = Some(status.term),
                    Err(e) => tracing::debug!(error = %e, "lease renew-all on promotion failed"),
                }
                return;
            }
            let now = now_ms();
            let expired = core.replicator.read(|sm| sm.store().expired_leases(now));
            for ids in expired.chunks(MAX_EXPIRE_BATCH) {
                let cmd = Command::LeaseExpire {
                    ids: ids.to_vec(),
                    now_ms: now,
                };
                if let Err(e) = core.propose(&None, cmd).await {
                    tracing::debug!(error = %e, "lease expiry proposal failed");
                    break;
                }
            }
        };
        if core.until_shutdown(step).await.is_err() {
            return;
        }
    }
}
