//! [`Ready`]: the batch of work the core hands to the runtime, and the small
//! types it carries.

use serde::{Deserialize, Serialize};

use crate::message::{Entry, HardState, Message, NodeId, Snapshot};
use crate::raft::Role;

/// Volatile state the runtime may want to report (who leads, in which term).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftState {
    pub role: Role,
    pub leader: Option<NodeId>,
    pub term: u64,
}

/// A linearizable read may be served once the local state machine has
/// applied `index` (the core only emits it when that is already true).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadState {
    pub ctx: u64,
    pub index: u64,
}

/// Work for the runtime, to be processed in this order:
///
/// 1. send `messages` (they do not depend on local durability; a leader's
///    appends may go out before its own write, as its own copy only counts
///    once durable);
/// 2. if `snapshot` is set, discard the whole stored log and install it
///    (state machine included);
/// 3. append `entries` durably, first deleting every stored entry with index
///    `>= entries[0].index` (a new leader may overwrite an uncommitted suffix);
/// 4. persist `hard_state` if set (atomically with 3 or after it);
/// 5. send `persisted_messages` (votes and acks that promise durability);
/// 6. apply `committed_entries` in order, then answer `read_states`;
/// 7. call [`crate::RawNode::advance`] with this `Ready`.
///
/// Crashing anywhere before 7 is safe: the node restarts from what was
/// durable.
#[derive(Debug, Default)]
pub struct Ready {
    pub soft_state: Option<SoftState>,
    pub hard_state: Option<HardState>,
    pub snapshot: Option<Snapshot>,
    pub entries: Vec<Entry>,
    pub messages: Vec<Message>,
    pub persisted_messages: Vec<Message>,
    pub committed_entries: Vec<Entry>,
    pub read_states: Vec<ReadState>,
    /// Contexts of ReadIndex requests abandoned because this node stopped
    /// being leader; the runtime should retry them at the new leader.
    pub dropped_reads: Vec<u64>,
    // What `advance` must acknowledge; kept apart from the public fields so
    // the runtime may move those out freely.
    pub(crate) persist_snapshot: Option<u64>,
    pub(crate) persist_last: Option<(u64, u64)>,
    pub(crate) apply_last: Option<u64>,
}

impl Ready {
    /// True if there is nothing to do (never the case for a Ready returned
    /// while [`crate::RawNode::has_ready`] was true).
    pub fn is_empty(&self) -> bool {
        self.soft_state.is_none()
            && self.hard_state.is_none()
            && self.snapshot.is_none()
            && self.entries.is_empty()
            && self.messages.is_empty()
            && self.persisted_messages.is_empty()
            && self.committed_entries.is_empty()
            && self.read_states.is_empty()
            && self.dropped_reads.is_empty()
    }
}
