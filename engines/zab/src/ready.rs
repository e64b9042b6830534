//! [`Ready`]: the batch of work the core hands to the runtime, and the small
//! types it carries.

use serde::{Deserialize, Serialize};

use crate::message::{HardState, Message, NodeId, Phase, Proposal, Role, Snapshot};
use crate::zxid::Zxid;

/// Volatile state the runtime may want to report (who leads, how far the
/// current epoch got).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftState {
    pub role: Role,
    pub phase: Phase,
    pub leader: Option<NodeId>,
    /// The epoch of the leader this node follows or is (its current epoch).
    pub epoch: u32,
}

/// A sync read may be served once the local state machine has applied
/// `zxid` (the core only emits it when that is already true).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadState {
    pub ctx: u64,
    pub zxid: Zxid,
}

/// Work for the runtime, to be processed in this order:
///
/// 1. send `messages` (they do not depend on local durability);
/// 2. if `snapshot` is set, discard the whole stored history and install it
///    (state machine included);
/// 3. if `truncate_after` is set, delete every stored proposal with a larger
///    zxid;
/// 4. append `entries` durably (their zxids follow the stored ones);
/// 5. persist `hard_state` if set (atomically with 2-4 or after them: its
///    commit point refers to the history they produce);
/// 6. send `persisted_messages` (acknowledgements that promise durability);
/// 7. apply `committed_entries` in order, then answer `read_states`;
/// 8. call [`crate::RawNode::advance`] with this `Ready`.
///
/// Crashing anywhere before 8 is safe: the node restarts from what was
/// durable.
#[derive(Debug, Default)]
pub struct Ready {
    pub soft_state: Option<SoftState>,
    pub hard_state: Option<HardState>,
    pub snapshot: Option<Snapshot>,
    pub truncate_after: Option<Zxid>,
    pub entries: Vec<Proposal>,
    pub messages: Vec<Message>,
    pub persisted_messages: Vec<Message>,
    pub committed_entries: Vec<Proposal>,
    pub read_states: Vec<ReadState>,
    /// Contexts of sync reads abandoned because this node left the leader's
    /// session (or the leader never answered); retry them later.
    pub dropped_reads: Vec<u64>,
    // What `advance` must acknowledge; kept apart from the public fields so
    // the runtime may move those out freely.
    pub(crate) persist_snapshot: Option<Zxid>,
    pub(crate) persist_mark: Option<(u64, Zxid)>,
    pub(crate) apply_last: Option<Zxid>,
}

impl Ready {
    /// True if there is nothing to do (never the case for a Ready returned
    /// while [`crate::RawNode::has_ready`] was true).
    pub fn is_empty(&self) -> bool {
        self.soft_state.is_none()
            && self.hard_state.is_none()
            && self.snapshot.is_none()
            && self.truncate_after.is_none()
            && self.entries.is_empty()
            && self.messages.is_empty()
            && self.persisted_messages.is_empty()
            && self.committed_entries.is_empty()
            && self.read_states.is_empty()
            && self.dropped_reads.is_empty()
    }
}
