//! [`RawNode`]: the public face of the core. Wraps the Zab state machine and
//! turns its state changes into [`Ready`] batches for the runtime.

use crate::config::Config;
use crate::error::Error;
use crate::log::ZabLog;
use crate::message::{HardState, Message, NodeId, Phase, Proposal, Role, Snapshot, Vote};
use crate::ready::{Ready, SoftState};
use crate::zab::Zab;
use crate::zxid::Zxid;

/// What the runtime had made durable, used to (re)start a node. A brand-new
/// node passes `PersistedState::default()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistedState {
    pub hard_state: HardState,
    /// Latest snapshot; the runtime restores its state machine from it.
    pub snapshot: Option<Snapshot>,
    /// Proposals after the snapshot, in zxid order.
    pub entries: Vec<Proposal>,
}

/// A point-in-time summary of a node, for reporting and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub id: NodeId,
    pub role: Role,
    pub phase: Phase,
    pub leader: Option<NodeId>,
    pub round: u64,
    /// The current (looking) or decided vote.
    pub vote: Vote,
    pub accepted_epoch: u32,
    pub current_epoch: u32,
    pub last_zxid: Zxid,
    pub commit: Zxid,
    pub applied: Zxid,
    /// Every proposal up to here is known durable locally.
    pub persisted: Zxid,
    pub snapshot_zxid: Zxid,
}

impl Status {
    /// Leading an established epoch (`current_epoch`): may propose.
    pub fn is_established_leader(&self) -> bool {
        self.role == Role::Leading && self.phase == Phase::Broadcast
    }
}

pub struct RawNode {
    zab: Zab,
    prev_soft: SoftState,
    prev_hard: HardState,
}

impl RawNode {
    /// Starts (or restarts) a node from its durable state. The node starts
    /// looking for a leader (its first notifications are in the first
    /// `Ready`), with its applied zxid at the snapshot: committed proposals
    /// after it are handed out again for the state machine.
    pub fn new(config: Config, state: PersistedState) -> Result<Self, Error> {
        let log = ZabLog::restore_from(state.snapshot, state.entries, state.hard_state.commit)?;
        let mut zab = Zab::new(config, state.hard_state, log)?;
        let prev_soft = zab.soft_state();
        let prev_hard = zab.hard_state();
        zab.start_election();
        Ok(Self {
            zab,
            prev_soft,
            prev_hard,
        })
    }

    /// Advances logical time by one tick.
    pub fn tick(&mut self) {
        self.zab.tick();
    }

    /// Feeds a message from a peer. Stale messages are ignored (`Ok`);
    /// messages that no correct peer could send are rejected with an error
    /// and have no effect.
    pub fn step(&mut self, msg: Message) -> Result<(), Error> {
        self.zab.step(msg)
    }

    /// Appends a command to the history if this node is the established
    /// leader and returns its zxid. It is sent to followers with the next
    /// `ready()`, batched with other proposals made since the previous one.
    /// It is committed once it shows up in `committed_entries` (a zxid is
    /// never reused for another command). Elsewhere returns `NotLeader` with
    /// a hint of where to retry.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<Zxid, Error> {
        self.zab.propose(data)
    }

    /// ZooKeeper's `sync()`, linearizable: once a `ReadState { ctx, zxid }`
    /// appears in a later `Ready`, this node has applied everything committed
    /// before the call. A follower asks its leader, which confirms its
    /// leadership with a quorum first. Only nodes in the broadcast phase
    /// serve (`NotServing` elsewhere). Abandoned requests are reported in
    /// `Ready::dropped_reads`.
    pub fn sync_read(&mut self, ctx: u64) -> Result<(), Error> {
        self.zab.sync_read(ctx)
    }

    /// The state machine captured everything up to `zxid` (which must be
    /// applied) in `data`. The core discards proposals up to `zxid` and keeps
    /// the snapshot to SNAP lagging followers. The runtime is responsible for
    /// storing the snapshot and trimming its stored history.
    pub fn compact(&mut self, zxid: Zxid, data: Vec<u8>) -> Result<(), Error> {
        self.zab.log.compact(zxid, data)
    }

    pub fn has_ready(&self) -> bool {
        let z = &self.zab;
        let applied = z.log.applied;
        z.soft_state() != self.prev_soft
            || z.hard_state() != self.prev_hard
            || z.log.has_unstable()
            || !z.msgs.is_empty()
            || !z.persisted_msgs.is_empty()
            || z.has_flush_work()
            || z.log.has_next_committed()
            || z.leader_reads.has_ready(applied)
            || z.follower_reads.has_ready(applied)
            || !z.dropped_reads.is_empty()
    }

    /// Collects pending work. Call [`RawNode::advance`] with the result once
    /// it has been processed; `ready` may be called again before that (the
    /// runtime must then process and advance the batches in order).
    pub fn ready(&mut self) -> Ready {
        self.zab.flush();
        let z = &mut self.zab;
        let mut rd = Ready::default();
        let soft = z.soft_state();
        if soft != self.prev_soft {
            rd.soft_state = Some(soft.clone());
            self.prev_soft = soft;
        }
        let hard = z.hard_state();
        if hard != self.prev_hard {
            rd.hard_state = Some(hard.clone());
            self.prev_hard = hard;
        }
        let (snapshot, truncate, entries) = z.log.take_unstable();
        if snapshot.is_some() || truncate.is_some() || !entries.is_empty() {
            rd.persist_mark = Some(z.log.mark());
        }
        rd.persist_snapshot = snapshot.as_ref().map(|s| s.zxid);
        rd.snapshot = snapshot;
        rd.truncate_after = truncate;
        rd.entries = entries;
        rd.messages = std::mem::take(&mut z.msgs);
        rd.persisted_messages = std::mem::take(&mut z.persisted_msgs);
        rd.committed_entries = z.log.take_next_committed();
        rd.apply_last = rd.committed_entries.last().map(|p| p.zxid);
        let applied = z.log.applied;
        rd.read_states = z.leader_reads.take_ready(applied);
        rd.read_states.extend(z.follower_reads.take_ready(applied));
        rd.dropped_reads = std::mem::take(&mut z.dropped_reads);
        rd
    }

    /// Acknowledges that everything in `ready` was made durable and applied.
    pub fn advance(&mut self, ready: Ready) {
        self.zab
            .on_persisted(ready.persist_snapshot, ready.persist_mark, ready.hard_state);
        if let Some(z) = ready.apply_last {
            self.zab.log.applied_to(z);
        }
    }

    /// The connection from `peer` closed (its process died or the link broke). A follower
    /// of `peer` stops following at once, as ZooKeeper's does when its leader's socket
    /// closes, instead of waiting out syncLimit. Only a hint: ignoring it is safe too.
    pub fn peer_disconnected(&mut self, peer: NodeId) {
        self.zab.on_peer_disconnected(peer);
    }

    /// The runtime applied the committed proposals it was handed through `zxid`, before
    /// advancing their `Ready` (its write may still be in flight): reads waiting for that
    /// zxid and compaction up to it may go ahead now. [`RawNode::advance`] does the same.
    pub fn applied_to(&mut self, zxid: Zxid) {
        self.zab.log.applied_to(zxid);
    }

    pub fn status(&self) -> Status {
        let z = &self.zab;
        Status {
            id: z.id,
            role: z.role(),
            phase: z.phase(),
            leader: z.leader(),
            round: z.round,
            vote: z.vote,
            accepted_epoch: z.accepted_epoch,
            current_epoch: z.current_epoch,
            last_zxid: z.log.last_zxid(),
            commit: z.log.committed,
            applied: z.log.applied,
            persisted: z.log.persisted,
            snapshot_zxid: z.log.snapshot_zxid(),
        }
    }

    /// The proposal at `zxid`, if held in memory (not compacted).
    pub fn proposal(&self, zxid: Zxid) -> Option<&Proposal> {
        self.zab.log.entry(zxid)
    }

    /// The proposals held in memory (after the snapshot), in zxid order.
    pub fn proposals(&self) -> &[Proposal] {
        self.zab.log.entries()
    }
}
