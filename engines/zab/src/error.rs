//! Error types returned by the core. Nothing the network can deliver makes the
//! core panic: stale messages are ignored, impossible ones are rejected here.

use thiserror::Error;

use crate::message::NodeId;
use crate::zxid::Zxid;

/// Why a [`crate::Config`] was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("peers is empty")]
    NoPeers,
    #[error("node id {0} is not in peers")]
    SelfNotInPeers(NodeId),
    #[error("peer {0} is listed twice")]
    DuplicatePeer(NodeId),
    #[error("ping_ticks must be at least 1")]
    ZeroPing,
    #[error("notify_ticks must be at least 1")]
    ZeroNotify,
    #[error("sync_limit ({sync_limit}) must exceed ping_ticks ({ping})")]
    SyncLimitNotAbovePing { sync_limit: u32, ping: u32 },
    #[error("init_limit ({init_limit}) must be at least sync_limit ({sync_limit})")]
    InitBelowSync { init_limit: u32, sync_limit: u32 },
    #[error("max_inflight_msgs must be at least 1")]
    ZeroInflight,
    #[error("max_proposals_per_msg must be at least 1")]
    ZeroProposalsPerMsg,
}

/// Errors of [`crate::RawNode`] operations.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),
    #[error("invalid persisted state: {0}")]
    InvalidPersistedState(String),
    /// Proposals go to an established leader; retry there (or later when no
    /// leader is known).
    #[error("not the established leader (leader hint: {leader_hint:?})")]
    NotLeader { leader_hint: Option<NodeId> },
    /// Sync reads are served by a node in the broadcast phase only.
    #[error("not serving: no established leader is being followed (leader hint: {leader_hint:?})")]
    NotServing { leader_hint: Option<NodeId> },
    /// The epoch ran out of zxid counters; the leader stepped down so that a
    /// new epoch starts. Retry at the next leader.
    #[error("zxid counter exhausted in this epoch; leader stepped down")]
    ZxidExhausted,
    #[error("unknown peer {0}")]
    UnknownPeer(NodeId),
    #[error("message for node {to} delivered to node {me}")]
    WrongRecipient { to: NodeId, me: NodeId },
    #[error("malformed message: {0}")]
    Malformed(&'static str),
    #[error("cannot compact to {zxid}: only proposals up to the applied zxid {applied} may be compacted")]
    CompactBeyondApplied { zxid: Zxid, applied: Zxid },
    #[error("cannot compact to {zxid}: it is not in the history")]
    CompactNotInLog { zxid: Zxid },
    #[error("cannot compact to {zxid}: history is already compacted to {snapshot}")]
    AlreadyCompacted { zxid: Zxid, snapshot: Zxid },
    #[error("cannot compact while a received snapshot is being installed")]
    SnapshotInstallPending,
}
