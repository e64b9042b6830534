//! [`RawNode`]: the public face of the core. Wraps the Raft state machine and
//! turns its state changes into [`Ready`] batches for the runtime.

use bytes::Bytes;

use crate::config::Config;
use crate::error::Error;
use crate::log::RaftLog;
use crate::message::{Entry, HardState, Message, NodeId, Snapshot};
use crate::progress::ProgressState;
use crate::raft::{Raft, Role};
use crate::ready::{Ready, SoftState};

/// What the runtime had made durable, used to (re)start a node. A brand-new
/// node passes `PersistedState::default()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistedState {
    pub hard_state: HardState,
    /// Latest snapshot; the runtime restores its state machine from it.
    pub snapshot: Option<Snapshot>,
    /// Entries after the snapshot, contiguous.
    pub entries: Vec<Entry>,
}

/// A point-in-time summary of a node, for reporting and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub id: NodeId,
    pub role: Role,
    pub term: u64,
    pub vote: Option<NodeId>,
    pub leader: Option<NodeId>,
    pub commit: u64,
    pub applied: u64,
    /// Highest log index known durable locally.
    pub persisted: u64,
    pub snapshot_index: u64,
    pub last_index: u64,
}

pub struct RawNode {
    raft: Raft,
    prev_soft: SoftState,
    prev_hard: HardState,
}

impl RawNode {
    /// Starts (or restarts) a node from its durable state. The node starts
    /// as a follower with its applied index at the snapshot: committed
    /// entries after it are handed out again for the state machine.
    pub fn new(config: Config, state: PersistedState) -> Result<Self, Error> {
        let log = RaftLog::restore_from(state.snapshot, state.entries, state.hard_state.commit)?;
        let raft = Raft::new(config, state.hard_state, log)?;
        let prev_soft = raft.soft_state();
        let prev_hard = raft.hard_state();
        Ok(Self {
            raft,
            prev_soft,
            prev_hard,
        })
    }

    /// Advances logical time by one tick.
    pub fn tick(&mut self) {
        self.raft.tick();
    }

    /// Feeds a message from a peer. Stale messages are ignored (`Ok`);
    /// messages that no correct peer could send are rejected with an error
    /// and have no effect.
    pub fn step(&mut self, msg: Message) -> Result<(), Error> {
        self.raft.step(msg)
    }

    /// Appends a command to the log if this node is the leader and returns
    /// its index. It is sent to followers with the next `ready()`, batched
    /// with other proposals made since the previous one. The command is committed once it shows up in
    /// `committed_entries` with the same index and this node's term.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<u64, Error> {
        self.raft.propose(data)
    }

    /// Starts a linearizable read identified by `ctx`. On the leader a
    /// `ReadState { ctx, index }` appears in a later `Ready` once the read
    /// may be served from the local state machine. Elsewhere returns
    /// `NotLeader` with a hint of where to retry. Reads pending when the
    /// node loses leadership are reported in `Ready::dropped_reads`.
    pub fn read_index(&mut self, ctx: u64) -> Result<(), Error> {
        self.raft.read_index(ctx)
    }

    /// Asks the leader to hand leadership to `to`: it brings `to` up to date,
    /// then sends it TimeoutNow. Proposals are refused meanwhile; the attempt
    /// is abandoned after `election_ticks_min` ticks.
    pub fn transfer_leader(&mut self, to: NodeId) -> Result<(), Error> {
        self.raft.transfer_leader(to)
    }

    /// The state machine captured everything up to `index` (which must be
    /// applied) in `data`. The core discards log entries up to `index` and
    /// keeps the snapshot to catch up lagging followers. The runtime is
    /// responsible for storing the snapshot and trimming its stored log.
    pub fn compact(&mut self, index: u64, data: Bytes) -> Result<(), Error> {
        self.raft.log.compact(index, data)
    }

    /// The snapshot the core keeps (to catch followers up) is also available as `data`,
    /// e.g. mapped from the file the runtime stored it in: keep that instead of the
    /// buffer given to [`RawNode::compact`]. Ignored unless the kept snapshot is still the
    /// one at (`index`, `term`) with as many bytes; returns whether it was taken.
    pub fn replace_snapshot_data(&mut self, index: u64, term: u64, data: Bytes) -> bool {
        self.raft.log.replace_snapshot_data(index, term, data)
    }

    pub fn has_ready(&self) -> bool {
        let r = &self.raft;
        r.soft_state() != self.prev_soft
            || r.hard_state() != self.prev_hard
            || r.log.has_unstable()
            || !r.msgs.is_empty()
            || r.appends_pending
            || !r.persisted_msgs.is_empty()
            || r.log.has_next_committed()
            || r.read_only.has_ready(r.log.applied)
            || !r.dropped_reads.is_empty()
    }

    /// Collects pending work. Call [`RawNode::advance`] with the result once
    /// it has been processed; `ready` may be called again before that (the
    /// runtime must then process and advance the batches in order).
    pub fn ready(&mut self) -> Ready {
        self.raft.flush_appends();
        let r = &mut self.raft;
        let mut rd = Ready::default();
        let soft = r.soft_state();
        if soft != self.prev_soft {
            rd.soft_state = Some(soft.clone());
            self.prev_soft = soft;
        }
        let hard = r.hard_state();
        if hard != self.prev_hard {
            rd.hard_state = Some(hard.clone());
            self.prev_hard = hard;
        }
        let (snapshot, entries) = r.log.take_unstable();
        rd.persist_snapshot = snapshot.as_ref().map(|s| s.index);
        rd.persist_last = entries.last().map(|e| (e.index, e.term));
        rd.snapshot = snapshot;
        rd.entries = entries;
        rd.messages = std::mem::take(&mut r.msgs);
        rd.persisted_messages = std::mem::take(&mut r.persisted_msgs);
        rd.committed_entries = r.log.take_next_committed();
        rd.apply_last = rd.committed_entries.last().map(|e| e.index);
        let applied = r.log.applied;
        rd.read_states = r.read_only.take_ready(applied);
        rd.dropped_reads = std::mem::take(&mut r.dropped_reads);
        rd
    }

    /// Acknowledges that everything in `ready` was made durable and applied.
    pub fn advance(&mut self, ready: Ready) {
        self.raft
            .on_persisted(ready.persist_snapshot, ready.persist_last);
        if let Some(index) = ready.apply_last {
            self.raft.log.applied_to(index);
        }
    }

    /// The runtime applied the committed entries it was handed through `index`, before
    /// advancing their `Ready` (its write may still be in flight): reads waiting for that
    /// index and compaction up to it may go ahead now. [`RawNode::advance`] does the same.
    pub fn applied_to(&mut self, index: u64) {
        self.raft.log.applied_to(index);
    }

    pub fn status(&self) -> Status {
        let r = &self.raft;
        Status {
            id: r.id,
            role: r.role,
            term: r.term,
            vote: r.vote,
            leader: r.leader,
            commit: r.log.committed,
            applied: r.log.applied,
            persisted: r.log.persisted,
            snapshot_index: r.log.snapshot_index(),
            last_index: r.log.last_index(),
        }
    }

    /// On a leader: whether a follower heard from lately still needs entries at or below
    /// `index` that have not been sent to it. Compacting the log through `index` now would
    /// make it catch up from a whole snapshot instead of the log (followers in `Snapshot`
    /// state need one anyway and do not count). False on any other role.
    pub fn followers_need_log_through(&self, index: u64) -> bool {
        let r = &self.raft;
        r.role == Role::Leader
            && r.progress.iter().any(|(id, p)| {
                *id != r.id
                    && p.recent_active
                    && !matches!(p.state, ProgressState::Snapshot { .. })
                    && p.next <= index
            })
    }

    /// Term of the entry at `index` in this node's (in-memory) log, if known
    /// (`Some` for the snapshot index, `None` below it or past the end).
    pub fn term_at(&self, index: u64) -> Option<u64> {
        self.raft.log.term(index)
    }

    /// The entry at `index`, if held in memory (not compacted).
    pub fn entry(&self, index: u64) -> Option<&Entry> {
        self.raft.log.entry(index)
    }
}
