//! The leader's periodic duties, driven by its own clock and replicated as commands:
//! session expiry (every tick) and container / TTL node deletion (every container check
//! interval).
//!
//! Replicas never decide expiry themselves. On becoming leader (each new term) this member
//! first proposes `RenewAllSessions`: no session expires for the leaderless interval, and
//! deadlines move onto its clock. Then, every tick, it proposes `ExpireSessions` for the
//! sessions whose deadline has passed; the state machine ends only those still expired when
//! the command applies, so a touch committed in between wins.

use std::sync::Arc;
use std::time::Instant;

use coordbench_node::{NodeRole, Replicator};
use coordbench_tree::Command;
use tokio::time::{interval, MissedTickBehavior};

use crate::core::{now_ms, Core};
use crate::state_machine::TreeStateMachine;

/// Sessions or paths per command (keeps each log entry small).
const MAX_BATCH: usize = 1000;

pub(crate) async fn run<R: Replicator<TreeStateMachine>>(core: Arc<Core<R>>) {
    let mut tick = interval(core.options.tick_time);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The term in which this member, as leader, has renewed every session.
    let mut promoted: Option<u64> = None;
    let mut last_reap = Instant::now();
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
                let cmd = Command::RenewAllSessions { now_ms: now_ms() };
                match core.propose(&cmd).await {
                    Ok(_) => promoted = Some(status.term),
                    Err(e) => tracing::debug!(error = %e, "session renewal on promotion failed"),
                }
                return;
            }
            let now = now_ms();
            let expired = core.replicator.read(|sm| sm.tree().expired_sessions(now));
            for ids in expired.chunks(MAX_BATCH) {
                let cmd = Command::ExpireSessions {
                    sessions: ids.to_vec(),
                    now_ms: now,
                };
                if let Err(e) = core.propose(&cmd).await {
                    tracing::debug!(error = %e, "session expiry proposal failed");
                    return;
                }
            }
            if last_reap.elapsed() >= core.options.container_check_interval {
                last_reap = Instant::now();
                let now = now_ms();
                let due = core.replicator.read(|sm| sm.tree().reap_candidates(now));
                for paths in due.chunks(MAX_BATCH) {
                    let cmd = Command::Reap {
                        paths: paths.to_vec(),
                        now_ms: now,
                    };
                    if let Err(e) = core.propose(&cmd).await {
                        tracing::debug!(error = %e, "container check proposal failed");
                        return;
                    }
                }
            }
        };
        tokio::select! {
            () = core.shutdown.cancelled() => return,
            () = step => {}
        }
    }
}
