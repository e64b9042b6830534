//! A one-member replicator that applies every proposal at once, in the caller's task: the
//! degenerate cluster the API services (etcd-api, zk-api) are tested on without a consensus
//! core. `set_leaderless(true)` makes it act like a member that lost its leader: proposals
//! and read barriers fail with `NoLeader`, local reads still work.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;

use crate::seam::{NodeError, NodeRole, NodeStatus, Replicator, StateMachine};

/// The one member's term: it leads from the start and never loses an election.
const TERM: u64 = 1;

pub struct LocalReplicator<S> {
    inner: Arc<Inner<S>>,
}

// Derived Clone would require S: Clone; only the Arc is cloned.
impl<S> Clone for LocalReplicator<S> {
    fn clone(&self) -> Self {
        LocalReplicator {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<S> {
    id: u64,
    leaderless: AtomicBool,
    /// (last applied index, state machine): one lock, so reads never overlap an apply.
    state: RwLock<(u64, S)>,
}

impl<S: StateMachine> LocalReplicator<S> {
    /// Member `id`, leading, over `state_machine`.
    pub fn new(id: u64, state_machine: S) -> Self {
        LocalReplicator {
            inner: Arc::new(Inner {
                id,
                leaderless: AtomicBool::new(false),
                state: RwLock::new((0, state_machine)),
            }),
        }
    }

    pub fn set_leaderless(&self, leaderless: bool) {
        self.inner.leaderless.store(leaderless, Ordering::SeqCst);
    }

    fn leaderless(&self) -> bool {
        self.inner.leaderless.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl<S: StateMachine> Replicator<S> for LocalReplicator<S> {
    async fn propose(&self, command: Vec<u8>) -> Result<S::Output, NodeError> {
        if self.leaderless() {
            return Err(NodeError::NoLeader);
        }
        let mut state = self.inner.state.write().map_err(|_| NodeError::Stopped)?;
        state.0 += 1;
        let index = state.0;
        Ok(state.1.apply(index, &command))
    }

    async fn read_barrier(&self) -> Result<(), NodeError> {
        if self.leaderless() {
            return Err(NodeError::NoLeader);
        }
        Ok(())
    }

    async fn ask_leader(&self, query: Vec<u8>) -> Result<Vec<u8>, NodeError> {
        if self.leaderless() {
            return Err(NodeError::NoLeader);
        }
        let state = self.inner.state.read().map_err(|_| NodeError::Stopped)?;
        Ok(state.1.leader_query(TERM, &query))
    }

    fn read<R>(&self, f: impl FnOnce(&S) -> R) -> R {
        let state = self.inner.state.read().unwrap_or_else(|e| e.into_inner());
        f(&state.1)
    }

    fn status(&self) -> NodeStatus {
        let index = self.inner.state.read().map_or(0, |s| s.0);
        let leaderless = self.leaderless();
        NodeStatus {
            id: self.inner.id,
            role: if leaderless {
                NodeRole::Follower
            } else {
                NodeRole::Leader
            },
            leader: (!leaderless).then_some(self.inner.id),
            term: TERM,
            commit_index: index,
            applied_index: index,
        }
    }
}
