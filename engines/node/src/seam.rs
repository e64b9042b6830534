//! The contract between the runtime and the services on top of it.

use async_trait::async_trait;

/// Makes durable what a snapshot refers to outside itself; must succeed before the snapshot
/// is written (see [`StateMachine::snapshot_unsynced`]).
pub type SnapshotSync = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// A deterministic state machine over opaque replicated commands. Every replica applies the
/// same commands in the same order and so computes the same outputs.
pub trait StateMachine: Send + Sync + 'static {
    /// What applying one command yields (the response to the proposer, computed on every
    /// replica; a follower that forwarded a proposal answers from its own apply).
    type Output: Send + 'static;

    /// Applies the committed command at log `index`. Must not fail: a command that is
    /// invalid yields an error *output*, identically on every replica.
    fn apply(&mut self, index: u64, command: &[u8]) -> Self::Output;

    /// Serializes the whole state as of the last applied index (for log compaction and
    /// for followers too far behind).
    fn snapshot(&self) -> Vec<u8>;

    /// Like [`StateMachine::snapshot`], for log compaction: the snapshot may come with a
    /// [`SnapshotSync`] that makes the storage it refers to durable (a value log's fsync).
    /// The persistence job runs it, off the event loop, before it writes the snapshot, and
    /// stops the member if it fails.
    fn snapshot_unsynced(&self) -> (Vec<u8>, Option<SnapshotSync>) {
        (self.snapshot(), None)
    }

    /// Replaces the whole state with a snapshot (one this member took, or one a leader
    /// sent through [`StateMachine::transfer_snapshot`]).
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String>;

    /// What to send a follower for `local`, a snapshot this member took, when `local`
    /// refers to state kept beside it (files) rather than holding it. `None`: send `local`.
    fn transfer_snapshot(&self, _local: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Ok(None)
    }

    /// Answers `query` from state only the leader keeps, outside the log (etcd-api: its
    /// lease deadlines). The runtime calls it on the leader of `term` once that leader
    /// has confirmed its leadership and applied everything committed before the query
    /// reached it (a ReadIndex, as for a linearizable read), and hands the answer to the
    /// member that asked ([`Replicator::ask_leader`]). An empty `query` is the runtime's
    /// own, asked once per term as soon as a new leader may answer queries: the moment
    /// to take up leader duties (its answer is dropped). The default answers nothing.
    fn leader_query(&self, _term: u64, _query: &[u8]) -> Vec<u8> {
        Vec::new()
    }

    /// Why the state machine can no longer be trusted (an I/O error of storage it keeps
    /// beside the log), if so: the member stops rather than serve wrong data.
    fn failure(&self) -> Option<String> {
        None
    }
}

/// A member's role as the services see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    Follower,
    Candidate,
    Leader,
}

/// What a service reports about its member (etcd's Maintenance.Status, ZooKeeper's srvr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    pub id: u64,
    pub role: NodeRole,
    /// The leader this member follows, if it knows one.
    pub leader: Option<u64>,
    /// Raft term or Zab epoch.
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
}

/// Why a proposal or read could not be served. Every variant is retryable by the client
/// (against this member later, or another member) except `Stopped`.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum NodeError {
    /// No leader is known right now (an election is under way).
    #[error("no leader")]
    NoLeader,
    /// The proposal was accepted but lost (leadership changed before it committed); it may
    /// or may not have been applied.
    #[error("proposal dropped: leadership changed before it was committed")]
    Dropped,
    /// The request did not complete in time.
    #[error("request timed out")]
    Timeout,
    /// The node is shutting down.
    #[error("node stopped")]
    Stopped,
    /// The command or read was refused before replication (too large, malformed).
    #[error("rejected: {0}")]
    Rejected(String),
}

/// A handle to a running member, cheap to clone, used by the services.
#[async_trait]
pub trait Replicator<S: StateMachine>: Clone + Send + Sync + 'static {
    /// Replicates `command` (forwarding it to the leader when this member follows) and
    /// returns this member's output of applying it.
    async fn propose(&self, command: Vec<u8>) -> Result<S::Output, NodeError>;

    /// Returns once this member has applied everything committed before the call (ReadIndex,
    /// confirmed by the leader with a heartbeat round), so a following local read is
    /// linearizable.
    async fn read_barrier(&self) -> Result<(), NodeError>;

    /// Has the leader answer `query` ([`StateMachine::leader_query`]), forwarding it from a
    /// follower as proposals are. Retried while leadership moves, so a query may run more
    /// than once: it must be safe to repeat.
    async fn ask_leader(&self, query: Vec<u8>) -> Result<Vec<u8>, NodeError>;

    /// Runs `f` on the local state (a serializable read; after `read_barrier`, linearizable).
    fn read<R>(&self, f: impl FnOnce(&S) -> R) -> R;

    /// The member's current status.
    fn status(&self) -> NodeStatus;
}
