//! Session lifetimes on this member: the handshake (new session, or reattach to an existing
//! one from any member) and the batched touches that keep active sessions alive.
//!
//! Design (replicated touches, leader-decided expiry): a session's deadline is replicated
//! state. Every packet a client sends (requests and pings) marks its session active here;
//! once per tick this member proposes one `TouchSessions` command carrying every session
//! marked since the previous one, which moves each deadline to `now + timeout`. Writes of a
//! session renew it as well. Only the leader decides expiry (see `leader.rs`), from the
//! replicated deadlines and its own clock. Clients ping at least every third of their
//! timeout, so a live session is touched at least every third of its timeout plus a tick:
//! well within its timeout for any timeout of two ticks or more (the negotiated minimum).
//! The cost is one log entry per tick per member with active clients, in place of
//! ZooKeeper's unreplicated leader-side session table (which the Replicator seam has no
//! channel for).

use std::sync::Arc;

use coordbench_node::Replicator;
use coordbench_tree::{Command, Response};
use tokio::time::{interval, MissedTickBehavior};

use crate::core::{now_ms, Core, ProposeError};
use crate::proto::{ConnectRequest, ConnectResponse};
use crate::state_machine::TreeStateMachine;

/// Largest number of sessions renewed by one command (keeps log entries small).
const MAX_TOUCH_BATCH: usize = 10_000;

/// The outcome of a ConnectRequest.
#[derive(Debug)]
pub(crate) enum Handshake {
    /// Attached to `response.session_id`; send the response and serve.
    Attached(ConnectResponse),
    /// Unknown or expired session, or a wrong password: send the "expired" response and
    /// close.
    Expired,
    /// This member has not yet applied what the client has seen: close without a reply so
    /// that the client tries another member (as ZooKeeper refuses such a connection).
    Behind,
}

pub(crate) async fn handshake<R: Replicator<TreeStateMachine>>(
    core: &Core<R>,
    req: &ConnectRequest,
) -> Result<Handshake, ProposeError> {
    if req.last_zxid_seen > core.last_zxid() {
        core.replicator.read_barrier().await?;
        if req.last_zxid_seen > core.last_zxid() {
            return Ok(Handshake::Behind);
        }
    }
    if req.session_id == 0 {
        let timeout_ms = core.options.negotiate(req.timeout_ms);
        let password: [u8; 16] = rand::random();
        let cmd = Command::CreateSession {
            timeout_ms,
            password: password.to_vec(),
            now_ms: now_ms(),
        };
        let applied = core.propose(&cmd).await?;
        return Ok(match applied.result {
            Ok(Response::SessionCreated {
                session,
                timeout_ms,
            }) => Handshake::Attached(ConnectResponse {
                protocol_version: 0,
                timeout_ms,
                session_id: session,
                password: password.to_vec(),
                read_only: false,
            }),
            _ => Handshake::Expired,
        });
    }
    let known = core.replicator.read(|sm| {
        sm.tree()
            .session(req.session_id)
            .map(|s| (s.password == req.password, s.timeout_ms))
    });
    let Some((true, timeout_ms)) = known else {
        return Ok(Handshake::Expired);
    };
    // Renew before answering: a session close to its deadline must not expire right after
    // its client was told it survived.
    let cmd = Command::TouchSessions {
        sessions: vec![req.session_id],
        now_ms: now_ms(),
    };
    match core.propose(&cmd).await?.result {
        Ok(Response::Touched { missing }) if missing.is_empty() => {
            Ok(Handshake::Attached(ConnectResponse {
                protocol_version: 0,
                timeout_ms,
                session_id: req.session_id,
                password: req.password.clone(),
                read_only: false,
            }))
        }
        _ => Ok(Handshake::Expired),
    }
}

/// Proposes one touch per tick for the sessions active on this member.
pub(crate) async fn run_touches<R: Replicator<TreeStateMachine>>(core: Arc<Core<R>>) {
    let mut tick = interval(core.options.tick_time);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = core.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let active = core.take_active();
        for batch in active.chunks(MAX_TOUCH_BATCH) {
            let cmd = Command::TouchSessions {
                sessions: batch.to_vec(),
                now_ms: now_ms(),
            };
            let outcome = tokio::select! {
                () = core.shutdown.cancelled() => return,
                r = core.propose(&cmd) => r,
            };
            match outcome.map(|a| a.result) {
                // Gone sessions: close their connections here (the expiry's apply did
                // already, unless it raced with this member's connect).
                Ok(Ok(Response::Touched { missing })) => core.router.close_sessions(&missing),
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "session touch failed"),
            }
        }
    }
}
