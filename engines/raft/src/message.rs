//! Wire and storage types: log entries, hard state, snapshots and the
//! messages nodes exchange. All derive serde so a runtime can frame them.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Identifier of a node in the cluster.
pub type NodeId = u64;

/// What a log entry carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryKind {
    /// Appended by a new leader at the start of its term so that entries of
    /// earlier terms can be committed (Raft only counts current-term replicas).
    Noop,
    /// An opaque client command.
    Normal(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// One entry of the replicated log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub term: u64,
    pub index: u64,
    pub kind: EntryKind,
}

/// State that must be durable before the node sends `persisted_messages`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardState {
    pub term: u64,
    pub vote: Option<NodeId>,
    pub commit: u64,
}

/// A state-machine snapshot covering every entry up to `index` (whose term
/// is `term`). `data` is opaque to the core; it is shared, not copied, between the
/// log, the runtime's snapshot file and every `InstallSnapshot` sent (a snapshot holds the
/// whole state machine, so each copy would cost as much as the store itself).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub index: u64,
    pub term: u64,
    pub data: Bytes,
}

/// Where a leader should retry after a rejected AppendEntries: the follower's
/// largest index `<= rejected prev_index` whose term is `<=` the leader's
/// `prev_term`, and that entry's term. Lets the leader skip a whole
/// conflicting term per round trip instead of one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectHint {
    pub index: u64,
    pub term: u64,
}

/// A message between two nodes. `term` is the sender's current term, except
/// for PreVote (the term the sender would campaign in) and a granted
/// PreVoteResponse (echoing that term).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub from: NodeId,
    pub to: NodeId,
    pub term: u64,
    pub body: MessageBody,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageBody {
    /// Replicate `entries` after (`prev_index`, `prev_term`); `commit` is the
    /// leader's commit index.
    AppendEntries {
        prev_index: u64,
        prev_term: u64,
        entries: Vec<Entry>,
        commit: u64,
    },
    /// `reject == None`: the sender's log durably matches the leader's up to
    /// `index`. Otherwise `index` is the rejected `prev_index`.
    AppendResponse {
        index: u64,
        reject: Option<RejectHint>,
    },
    RequestVote {
        last_index: u64,
        last_term: u64,
        /// Set when campaigning because of TimeoutNow: voters ignore their
        /// leader lease, since the current leader asked for this election.
        transfer: bool,
    },
    VoteResponse {
        granted: bool,
    },
    PreVote {
        last_index: u64,
        last_term: u64,
    },
    PreVoteResponse {
        granted: bool,
    },
    /// `commit` is capped at what the follower is known to have, so the
    /// follower never commits entries the leader has not checked.
    /// `read_seq` names the newest pending ReadIndex request (0 = none).
    Heartbeat {
        commit: u64,
        read_seq: u64,
    },
    HeartbeatResponse {
        read_seq: u64,
    },
    InstallSnapshot {
        snapshot: Snapshot,
    },
    /// The sender's log now durably matches the leader's up to `index`.
    SnapshotResponse {
        index: u64,
    },
    /// Sent by a leader to the transfer target: campaign now.
    TimeoutNow,
}

impl MessageBody {
    /// Short name for logs and traces.
    pub fn name(&self) -> &'static str {
        match self {
            MessageBody::AppendEntries { .. } => "AppendEntries",
            MessageBody::AppendResponse { .. } => "AppendResponse",
            MessageBody::RequestVote { .. } => "RequestVote",
            MessageBody::VoteResponse { .. } => "VoteResponse",
            MessageBody::PreVote { .. } => "PreVote",
            MessageBody::PreVoteResponse { .. } => "PreVoteResponse",
            MessageBody::Heartbeat { .. } => "Heartbeat",
            MessageBody::HeartbeatResponse { .. } => "HeartbeatResponse",
            MessageBody::InstallSnapshot { .. } => "InstallSnapshot",
            MessageBody::SnapshotResponse { .. } => "SnapshotResponse",
            MessageBody::TimeoutNow => "TimeoutNow",
        }
    }
}
