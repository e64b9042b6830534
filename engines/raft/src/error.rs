//! Error types returned by the core. Nothing the network can deliver makes the
//! core panic: stale messages are ignored, malformed ones are rejected here.

use thiserror::Error;

use crate::message::NodeId;

/// Why a [`crate::Config`] was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("peers is empty")]
    NoPeers,
    #[error("node id {0} is not in peers")]
    SelfNotInPeers(NodeId),
    #[error("peer {0} is listed twice")]
    DuplicatePeer(NodeId),
    #[error("heartbeat_ticks must be at least 1")]
    ZeroHeartbeat,
    #[error("election_ticks_min ({election_min}) must exceed heartbeat_ticks ({heartbeat})")]
    ElectionNotAboveHeartbeat { election_min: u32, heartbeat: u32 },
    #[error("election timeout range [{min}, {max}) is empty")]
    EmptyElectionRange { min: u32, max: u32 },
    #[error("max_inflight_msgs must be at least 1")]
    ZeroInflight,
    #[error("max_entries_per_msg must be at least 1")]
    ZeroEntriesPerMsg,
}

/// Errors of [`crate::RawNode`] operations.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),
    #[error("invalid persisted state: {0}")]
    InvalidPersistedState(String),
    /// Proposals and reads must go to the leader; retry there (or later when
    /// no leader is known).
    #[error("not the leader (leader hint: {leader_hint:?})")]
    NotLeader { leader_hint: Option<NodeId> },
    /// The leader is handing leadership over and accepts no proposals; retry
    /// at the new leader.
    #[error("leadership transfer in progress")]
    TransferInProgress,
    #[error("unknown peer {0}")]
    UnknownPeer(NodeId),
    #[error("message for node {to} delivered to node {me}")]
    WrongRecipient { to: NodeId, me: NodeId },
    #[error("malformed message: {0}")]
    Malformed(&'static str),
    #[error("cannot compact to {index}: only entries up to the applied index {applied} may be compacted")]
    CompactBeyondApplied { index: u64, applied: u64 },
    #[error("cannot compact to {index}: log is already compacted to {snapshot_index}")]
    AlreadyCompacted { index: u64, snapshot_index: u64 },
    #[error("cannot compact while a received snapshot is being installed")]
    SnapshotInstallPending,
}
