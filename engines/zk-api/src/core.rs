//! [`Core`]: what every connection and background task of a member shares (replicator,
//! router, options, counters, pending session touches, shutdown signal) and the one way
//! they all replicate a command.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use coordbench_node::{NodeError, NodeRole, Replicator};
use coordbench_tree::{Applied, CodecError, Command};
use tokio_util::sync::CancellationToken;

use crate::options::ServeOptions;
use crate::router::Router;
use crate::state_machine::TreeStateMachine;
use crate::stats::Stats;

pub(crate) struct Core<R> {
    pub replicator: R,
    pub router: Arc<Router>,
    pub options: ServeOptions,
    /// Shared with the connections' writer tasks, which count the frames they send.
    pub stats: Arc<Stats>,
    /// Sessions with activity on this member since the last touch was proposed.
    pub active: Mutex<BTreeSet<i64>>,
    /// Cancelled when the server shuts down: ends every connection and task.
    pub shutdown: CancellationToken,
}

/// Why a command was not applied.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProposeError {
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The log entry did not decode on apply (a bug, or a foreign entry).
    #[error(transparent)]
    Codec(#[from] CodecError),
}

/// Milliseconds on this member's wall clock: the time commands carry. Wall time, so that
/// members in different processes roughly agree (deadlines set by one member's clock are
/// compared with the leader's).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl<R: Replicator<TreeStateMachine>> Core<R> {
    pub fn new(replicator: R, options: ServeOptions, shutdown: CancellationToken) -> Self {
        let router = replicator.read(|sm| sm.router().clone());
        Core {
            replicator,
            router,
            options,
            stats: Arc::new(Stats::default()),
            active: Mutex::new(BTreeSet::new()),
            shutdown,
        }
    }

    /// Replicates a command and returns this member's output of applying it.
    pub async fn propose(&self, cmd: &Command) -> Result<Applied, ProposeError> {
        Ok(self.replicator.propose(cmd.encode()).await??)
    }

    /// zxid of the last command this member applied.
    pub fn last_zxid(&self) -> i64 {
        self.replicator.read(|sm| sm.tree().last_zxid())
    }

    /// Notes activity of a session, to be renewed by the next touch.
    pub fn mark_active(&self, session: i64) {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session);
    }

    pub fn take_active(&self) -> Vec<i64> {
        let mut set = self.active.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *set).into_iter().collect()
    }

    /// ZooKeeper's server state: standalone, leader or follower.
    pub fn mode(&self) -> &'static str {
        if self.options.cluster_size <= 1 {
            return "standalone";
        }
        match self.replicator.status().role {
            NodeRole::Leader => "leader",
            NodeRole::Follower | NodeRole::Candidate => "follower",
        }
    }

    /// Whether this member can serve (it knows a leader).
    pub fn serving(&self) -> bool {
        self.replicator.status().leader.is_some()
    }
}
