//! [`Core`]: what the runtime (`runtime`, `node`) needs of a sans-IO consensus core, so
//! that one event loop, one WAL and one start-up path drive both the Raft core
//! (`raft_node::RaftCore`) and the Zab core (`zab_node::ZabCore`).
//!
//! An adapter translates its core's calls and `Ready` into these terms: positions are
//! `(index, term)` pairs (Raft: log index and term; Zab: zxid and epoch), the services'
//! view of the member is a [`CoreStatus`], snapshots are the WAL's [`Snapshot`], and its
//! durable state goes through a [`LogFormat`] (entries, hard state, recovery rule).

use coordbench_raft::NodeId;

use crate::config::NodeConfig;
use crate::envelope::Payload;
use crate::node::StartError;
use crate::seam::NodeRole;
use bytes::Bytes;

use crate::wal::{LogFormat, Recovered, Snapshot};

pub(crate) type Entry<C> = <<C as Core>::Log as LogFormat>::Entry;
pub(crate) type HardState<C> = <<C as Core>::Log as LogFormat>::HardState;

/// Where a proposal went: (index, term) for Raft, (zxid, epoch) for Zab. A proposal's
/// output is answered when the entry applied at `index` has `term`.
pub(crate) type Position = (u64, u64);

/// How the services see the member right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CoreStatus {
    /// `Leader` only where proposals may be made (for Zab: an established epoch).
    pub role: NodeRole,
    /// The leader to forward to (this member when it leads; none while there is no
    /// leader to propose to).
    pub leader: Option<NodeId>,
    /// Raft's term; Zab's current epoch.
    pub term: u64,
    /// The commit index (zxid).
    pub commit: u64,
}

/// Why the core refused a proposal.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Not the leader; retry at `hint`.
    NotLeader {
        hint: Option<NodeId>,
    },
    /// The leader cannot take it now (leadership transfer, an exhausted epoch): retry.
    Retry,
    Other(String),
}

/// Why compaction did not happen.
#[derive(Debug)]
pub(crate) enum CompactFail {
    /// A received snapshot is being installed: try again later.
    Pending,
    /// The core refused this point: skip it.
    Refused(String),
    /// The core is inconsistent: stop.
    Fatal(String),
}

/// A core's `Ready` in the runtime's terms, to be handled in this order: send `messages`;
/// make `snapshot`, `truncate_after`, `entries` and `hard_state` durable (one sync); send
/// `persisted_messages`; apply `committed`; answer `read_states` and `dropped_reads`; hand
/// `rest` back to [`Core::advance`].
pub(crate) struct Ready<C: Core> {
    pub messages: Vec<C::Message>,
    /// Received from the leader: replaces the whole log and the state machine.
    pub snapshot: Option<Snapshot>,
    /// Delete stored entries after this position.
    pub truncate_after: Option<u64>,
    pub entries: Vec<Entry<C>>,
    pub hard_state: Option<HardState<C>>,
    /// Messages that promise durability of the above.
    pub persisted_messages: Vec<C::Message>,
    pub committed: Vec<Entry<C>>,
    /// (read request context, index the state machine must reach).
    pub read_states: Vec<(u64, u64)>,
    pub dropped_reads: Vec<u64>,
    pub rest: C::Rest,
}

pub(crate) trait Core: Sized + Send + 'static {
    type Log: LogFormat;
    type Message: Send + 'static;
    /// The core's own configuration.
    type Config;
    /// What of the core's `Ready` its `advance` needs back.
    type Rest: Send + 'static;

    /// Whether a follower's read barrier asks the leader for a read index through the
    /// runtime (Raft's ReadIndex), rather than through the core itself (Zab's sync).
    const READS_VIA_LEADER: bool;

    /// The core's configuration for this member, validated.
    fn configure(config: &NodeConfig, seed: u64) -> Result<Self::Config, StartError>;
    /// Builds the core on the recovered state.
    fn new(config: Self::Config, state: Recovered<Self::Log>) -> Result<Self, StartError>;

    fn tick(&mut self);
    /// Ticks to fast-forward once at start-up, before the first real one. The default:
    /// none.
    fn boot_ticks(&self) -> u32 {
        0
    }
    /// Feeds a peer's core message (`Payload::Raft` / `Payload::Zab`); a message of the
    /// other core is refused.
    fn step(&mut self, payload: Payload) -> Result<(), String>;
    /// The peer a message goes to, and the message as a payload.
    fn wrap(message: Self::Message) -> (NodeId, Payload);
    /// The state-machine snapshot a message carries, for the runtime to swap for its
    /// transfer form ([`crate::StateMachine::transfer_snapshot`]); the default: none.
    fn snapshot_data(_message: &mut Self::Message) -> Option<&mut Bytes> {
        None
    }
    fn status(&self) -> CoreStatus;
    /// Proposes a command (on the leader).
    fn propose(&mut self, command: Vec<u8>) -> Result<Position, Refused>;
    /// Starts a linearizable read `ctx`; on refusal, where the leader may be.
    fn read(&mut self, ctx: u64) -> Result<(), Option<NodeId>>;
    fn has_ready(&self) -> bool;
    fn ready(&mut self) -> Ready<Self>;
    fn advance(&mut self, rest: Self::Rest);
    /// The runtime applied the committed entries it was handed through `index`, ahead of
    /// advancing their `Ready`.
    fn applied(&mut self, index: u64);
    /// The transport's connection from `peer` closed. A hint only (a core must stay safe
    /// and live without it); the default ignores it, as Raft waits out its election timeout
    /// like etcd.
    fn peer_disconnected(&mut self, _peer: NodeId) {}
    /// Whether compacting the log through `index` now would cut off a live follower that
    /// still needs entries from it (so it would need a whole snapshot): the runtime then
    /// postpones a due snapshot, within bounds ([`crate::cadence`]). The default: never.
    fn followers_need_log_through(&self, _index: u64) -> bool {
        false
    }
    /// The state machine captured everything up to the applied `index` in `data`: drop
    /// the log up to there and return the snapshot to store.
    fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<Snapshot, CompactFail>;
    /// A snapshot `compact` returned is stored, its data now readable from its file
    /// (mapped, not on the heap). A core that keeps its snapshot to catch followers up may
    /// switch to this copy; the default keeps its own.
    fn snapshot_stored(&mut self, _stored: Snapshot) {}
}
