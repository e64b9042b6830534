//! The Raft state machine: roles and their transitions, logical time
//! (`tick`), the term rules every incoming message goes through, and the
//! client entry points (propose, ReadIndex, leadership transfer).
//! Elections live in `election.rs`, log replication in `replication.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::election::Campaign;
use crate::error::Error;
use crate::log::RaftLog;
use crate::message::{Entry, EntryKind, HardState, Message, MessageBody, NodeId};
use crate::progress::{Progress, ProgressState};
use crate::quorum;
use crate::read_index::ReadOnly;
use crate::ready::SoftState;
use crate::rng::SplitMix64;

/// The role a node currently plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    Follower,
    /// Running a PreVote round; the term has not been incremented yet.
    PreCandidate,
    Candidate,
    Leader,
}

pub(crate) struct Raft {
    pub(crate) id: NodeId,
    pub(crate) cfg: Config,
    /// Sorted voter ids (including self).
    pub(crate) voters: Vec<NodeId>,

    pub(crate) term: u64,
    pub(crate) vote: Option<NodeId>,
    pub(crate) leader: Option<NodeId>,
    pub(crate) role: Role,
    pub(crate) log: RaftLog,

    /// Leader only: replication state of every voter except self.
    pub(crate) progress: BTreeMap<NodeId, Progress>,
    /// (Pre)candidate only: responses received in the current round.
    pub(crate) votes: BTreeMap<NodeId, bool>,

    /// Followers/candidates: ticks since the last valid leader contact or
    /// election start. Leaders: ticks in the current check-quorum window.
    pub(crate) election_elapsed: u32,
    pub(crate) heartbeat_elapsed: u32,
    pub(crate) randomized_timeout: u32,
    rng: SplitMix64,

    /// Index of the leader's no-op; reads must observe at least this.
    pub(crate) term_start_index: u64,
    pub(crate) read_only: ReadOnly,
    pub(crate) dropped_reads: Vec<u64>,
    pub(crate) transferee: Option<NodeId>,
    pub(crate) transfer_elapsed: u32,
    /// Proposals were appended but not yet sent: they go out together at the
    /// next `ready()`, so proposals arriving between two Readies share
    /// AppendEntries messages instead of each filling a pipeline slot.
    pub(crate) appends_pending: bool,

    /// Messages that may be sent right away.
    pub(crate) msgs: Vec<Message>,
    /// Messages that may only be sent once the current unstable state is
    /// durable (they promise a vote or durable entries).
    pub(crate) persisted_msgs: Vec<Message>,
}

impl Raft {
    pub(crate) fn new(cfg: Config, hard_state: HardState, log: RaftLog) -> Result<Self, Error> {
        cfg.validate()?;
        let mut voters = cfg.peers.clone();
        voters.sort_unstable();
        if let Some(v) = hard_state.vote {
            if !voters.contains(&v) {
                return Err(Error::InvalidPersistedState(format!(
                    "voted for {v}, which is not a peer"
                )));
            }
        }
        if log.last_term() > hard_state.term {
            return Err(Error::InvalidPersistedState(format!(
                "log holds term {} but hard state term is {}",
                log.last_term(),
                hard_state.term
            )));
        }
        // Mix the id in so nodes sharing a seed still get distinct timeouts.
        let rng = SplitMix64::new(cfg.seed ^ cfg.id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut r = Self {
            id: cfg.id,
            voters,
            term: hard_state.term,
            vote: hard_state.vote,
            leader: None,
            role: Role::Follower,
            log,
            progress: BTreeMap::new(),
            votes: BTreeMap::new(),
            election_elapsed: 0,
            heartbeat_elapsed: 0,
            randomized_timeout: cfg.election_ticks_min,
            rng,
            term_start_index: 0,
            read_only: ReadOnly::default(),
            dropped_reads: Vec::new(),
            transferee: None,
            transfer_elapsed: 0,
            appends_pending: false,
            msgs: Vec::new(),
            persisted_msgs: Vec::new(),
            cfg,
        };
        r.reset_election_timer();
        Ok(r)
    }

    pub(crate) fn soft_state(&self) -> SoftState {
        SoftState {
            role: self.role,
            leader: self.leader,
            term: self.term,
        }
    }

    pub(crate) fn hard_state(&self) -> HardState {
        HardState {
            term: self.term,
            vote: self.vote,
            commit: self.log.committed,
        }
    }

    pub(crate) fn quorum(&self) -> usize {
        quorum::majority(self.voters.len())
    }

    pub(crate) fn is_voter(&self, id: NodeId) -> bool {
        self.voters.binary_search(&id).is_ok()
    }

    pub(crate) fn peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        let me = self.id;
        self.voters.iter().copied().filter(move |&v| v != me)
    }

    pub(crate) fn send(&mut self, to: NodeId, body: MessageBody) {
        let term = self.term;
        self.send_with_term(to, term, body);
    }

    pub(crate) fn send_with_term(&mut self, to: NodeId, term: u64, body: MessageBody) {
        self.msgs.push(Message {
            from: self.id,
            to,
            term,
            body,
        });
    }

    pub(crate) fn send_after_persist(&mut self, to: NodeId, body: MessageBody) {
        self.persisted_msgs.push(Message {
            from: self.id,
            to,
            term: self.term,
            body,
        });
    }

    // ---- role transitions -------------------------------------------------

    pub(crate) fn reset_election_timer(&mut self) {
        self.election_elapsed = 0;
        self.randomized_timeout = self
            .rng
            .range(self.cfg.election_ticks_min, self.cfg.election_ticks_max);
    }

    /// Common reset when entering any role: term bookkeeping, timers and
    /// leader-only state.
    fn reset(&mut self, term: u64) {
        if term != self.term {
            self.term = term;
            self.vote = None;
        }
        self.leader = None;
        self.votes.clear();
        self.heartbeat_elapsed = 0;
        self.reset_election_timer();
        self.progress.clear();
        self.appends_pending = false;
        self.transferee = None;
        self.transfer_elapsed = 0;
        let dropped = self.read_only.clear();
        self.dropped_reads.extend(dropped);
    }

    pub(crate) fn become_follower(&mut self, term: u64, leader: Option<NodeId>) {
        self.reset(term);
        self.role = Role::Follower;
        self.leader = leader;
    }

    pub(crate) fn become_pre_candidate(&mut self) {
        // Keep term and vote: a PreVote round must not disturb anyone.
        let term = self.term;
        self.reset(term);
        self.role = Role::PreCandidate;
    }

    pub(crate) fn become_candidate(&mut self) {
        let term = self.term + 1;
        self.reset(term);
        self.vote = Some(self.id);
        self.role = Role::Candidate;
    }

    pub(crate) fn become_leader(&mut self) {
        let term = self.term;
        self.reset(term);
        self.role = Role::Leader;
        self.leader = Some(self.id);
        self.election_elapsed = 0;
        let next = self.log.last_index() + 1;
        let peers: Vec<NodeId> = self.peers().collect();
        for p in peers {
            self.progress
                .insert(p, Progress::new(next, self.cfg.max_inflight_msgs));
        }
        // A leader may only count replicas of its own term's entries toward
        // commitment, so it commits a no-op to settle earlier terms.
        self.term_start_index = next;
        self.log.append(Entry {
            term: self.term,
            index: next,
            kind: EntryKind::Noop,
        });
        self.bcast_append(false);
        // A single voter commits as soon as its own write is durable.
        self.maybe_commit();
    }

    // ---- time ---------------------------------------------------------------

    pub(crate) fn tick(&mut self) {
        if self.role == Role::Leader {
            self.tick_leader();
        } else {
            self.election_elapsed = self.election_elapsed.saturating_add(1);
            if self.election_elapsed >= self.randomized_timeout {
                self.campaign(Campaign::Timeout);
            }
        }
    }

    fn tick_leader(&mut self) {
        self.heartbeat_elapsed += 1;
        self.election_elapsed += 1;
        if self.transferee.is_some() {
            self.transfer_elapsed += 1;
            // The target did not take over in time; accept proposals again.
            if self.transfer_elapsed >= self.cfg.election_ticks_min {
                self.transferee = None;
                self.transfer_elapsed = 0;
            }
        }
        if self.election_elapsed >= self.cfg.election_ticks_min {
            self.election_elapsed = 0;
            if self.cfg.check_quorum {
                let active = 1 + self.progress.values().filter(|p| p.recent_active).count();
                if active < self.quorum() {
                    let term = self.term;
                    self.become_follower(term, None);
                    return;
                }
            }
            for p in self.progress.values_mut() {
                p.recent_active = false;
            }
        }
        // A snapshot (or its answer) may have been lost: after a while fall
        // back to probing, which resends it if still needed.
        let limit = self.cfg.election_ticks_min;
        for p in self.progress.values_mut() {
            if let ProgressState::Snapshot { .. } = p.state {
                p.snapshot_ticks += 1;
                if p.snapshot_ticks >= limit {
                    p.become_probe();
                }
            }
        }
        if self.heartbeat_elapsed >= self.cfg.heartbeat_ticks {
            self.heartbeat_elapsed = 0;
            self.bcast_heartbeat();
        }
    }

    // ---- messages -----------------------------------------------------------

    /// Takes in a message from a peer: checks its envelope, applies the term rules, then
    /// hands it to the handler of its kind.
    pub(crate) fn step(&mut self, m: Message) -> Result<(), Error> {
        self.check_envelope(&m)?;
        if !self.step_term(&m) {
            return Ok(());
        }
        self.step_body(m.from, m.term, m.body)
    }

    /// Refuses a message that is not for us, not from another voter, or whose term no
    /// election could reach.
    fn check_envelope(&self, m: &Message) -> Result<(), Error> {
        if m.to != self.id {
            return Err(Error::WrongRecipient {
                to: m.to,
                me: self.id,
            });
        }
        if m.from == self.id || !self.is_voter(m.from) {
            return Err(Error::UnknownPeer(m.from));
        }
        // Terms only grow by one per election; this keeps `term + 1` safe.
        if m.term >= u64::MAX / 2 {
            return Err(Error::Malformed("term out of range"));
        }
        Ok(())
    }

    /// The term rules: a newer term makes us follow it (but for the exceptions below), an
    /// older one is answered where that helps its sender catch up. Returns whether the
    /// message goes on to its handler: it is of our (possibly just adopted) term, or a
    /// PreVote (grant) of a prospective one.
    fn step_term(&mut self, m: &Message) -> bool {
        if m.term > self.term {
            let is_vote_request = matches!(
                m.body,
                MessageBody::RequestVote { .. } | MessageBody::PreVote { .. }
            );
            let forced = matches!(m.body, MessageBody::RequestVote { transfer: true, .. });
            // Leader lease: while we heard from a live leader within the
            // minimum election timeout, a vote request is from a node that
            // merely lost contact; ignoring it keeps the cluster stable.
            let in_lease = self.cfg.check_quorum
                && self.leader.is_some()
                && self.election_elapsed < self.cfg.election_ticks_min;
            if is_vote_request && in_lease && !forced {
                return false;
            }
            match m.body {
                // PreVote and its grants carry a prospective term: adopting
                // it would defeat the purpose of pre-voting.
                MessageBody::PreVote { .. } | MessageBody::PreVoteResponse { granted: true } => {}
                MessageBody::AppendEntries { .. }
                | MessageBody::Heartbeat { .. }
                | MessageBody::InstallSnapshot { .. } => self.become_follower(m.term, Some(m.from)),
                _ => self.become_follower(m.term, None),
            }
        } else if m.term < self.term {
            match m.body {
                // Tell a stale leader about the newer term so it steps down
                // (otherwise, with CheckQuorum or PreVote, a node whose term
                // ran ahead could never be brought back in).
                MessageBody::AppendEntries { .. } | MessageBody::Heartbeat { .. } => {
                    self.send(m.from, MessageBody::HeartbeatResponse { read_seq: 0 });
                }
                // Let a pre-candidate behind on terms learn the current one.
                MessageBody::PreVote { .. } => {
                    self.send(m.from, MessageBody::PreVoteResponse { granted: false });
                }
                _ => {}
            }
            return false;
        }
        true
    }

    /// Hands a message that passed the term rules to the handler of its kind, if our
    /// role is the one it is meant for.
    fn step_body(&mut self, from: NodeId, term: u64, body: MessageBody) -> Result<(), Error> {
        match body {
            MessageBody::RequestVote {
                last_index,
                last_term,
                ..
            } => self.handle_vote_request(from, term, last_index, last_term, false),
            MessageBody::PreVote {
                last_index,
                last_term,
            } => self.handle_vote_request(from, term, last_index, last_term, true),
            MessageBody::VoteResponse { granted } => {
                if self.role == Role::Candidate {
                    self.handle_vote_response(from, granted);
                }
            }
            MessageBody::PreVoteResponse { granted } => {
                // A grant echoes term + 1; a refusal carries the voter's
                // (equal) term. Anything else answers an older round.
                let current = if granted {
                    term == self.term + 1
                } else {
                    term == self.term
                };
                if self.role == Role::PreCandidate && current {
                    self.handle_vote_response(from, granted);
                }
            }
            MessageBody::AppendEntries {
                prev_index,
                prev_term,
                entries,
                commit,
            } => {
                if self.accept_leader(from, term) {
                    self.handle_append(from, term, prev_index, prev_term, entries, commit)?;
                }
            }
            MessageBody::Heartbeat { commit, read_seq } => {
                if self.accept_leader(from, term) {
                    self.handle_heartbeat(from, commit, read_seq);
                }
            }
            MessageBody::InstallSnapshot { snapshot } => {
                if self.accept_leader(from, term) {
                    self.handle_snapshot(from, term, snapshot)?;
                }
            }
            MessageBody::AppendResponse { index, reject } => {
                if self.role == Role::Leader {
                    self.handle_append_response(from, index, reject);
                }
            }
            MessageBody::HeartbeatResponse { read_seq } => {
                if self.role == Role::Leader {
                    self.handle_heartbeat_response(from, read_seq);
                }
            }
            MessageBody::SnapshotResponse { index } => {
                if self.role == Role::Leader {
                    self.handle_snapshot_response(from, index);
                }
            }
            MessageBody::TimeoutNow => {
                if self.role != Role::Leader && self.leader == Some(from) {
                    self.campaign(Campaign::Transfer);
                }
            }
        }
        Ok(())
    }

    /// A leader message of our term arrived: follow its sender. Returns false
    /// if we are leader ourselves (two leaders in one term cannot happen, so
    /// the message is bogus and ignored).
    fn accept_leader(&mut self, from: NodeId, term: u64) -> bool {
        match self.role {
            Role::Leader => false,
            Role::Follower if self.leader == Some(from) => {
                self.election_elapsed = 0;
                true
            }
            _ => {
                self.become_follower(term, Some(from));
                true
            }
        }
    }

    // ---- client entry points -------------------------------------------------

    fn ensure_leader(&self) -> Result<(), Error> {
        if self.role == Role::Leader {
            Ok(())
        } else {
            Err(Error::NotLeader {
                leader_hint: self.leader,
            })
        }
    }

    pub(crate) fn propose(&mut self, data: Vec<u8>) -> Result<u64, Error> {
        self.ensure_leader()?;
        if self.transferee.is_some() {
            return Err(Error::TransferInProgress);
        }
        let index = self.log.last_index() + 1;
        self.log.append(Entry {
            term: self.term,
            index,
            kind: EntryKind::Normal(data),
        });
        self.appends_pending = true;
        Ok(index)
    }

    pub(crate) fn read_index(&mut self, ctx: u64) -> Result<(), Error> {
        self.ensure_leader()?;
        // Every entry committed before this call is at or below the commit
        // index or, if this leader has not committed in its term yet, below
        // its no-op (leader completeness).
        let index = self.log.committed.max(self.term_start_index);
        if self.voters.len() == 1 {
            self.read_only.add_confirmed(ctx, index);
        } else {
            self.read_only.add(ctx, index, self.id);
            self.bcast_heartbeat();
        }
        Ok(())
    }

    pub(crate) fn transfer_leader(&mut self, to: NodeId) -> Result<(), Error> {
        self.ensure_leader()?;
        if !self.is_voter(to) {
            return Err(Error::UnknownPeer(to));
        }
        if to == self.id || self.transferee == Some(to) {
            return Ok(());
        }
        self.transferee = Some(to);
        self.transfer_elapsed = 0;
        let caught_up = self
            .progress
            .get(&to)
            .is_some_and(|p| p.matched == self.log.last_index());
        if caught_up {
            self.send(to, MessageBody::TimeoutNow);
        } else {
            self.send_appends(to, true);
        }
        Ok(())
    }

    /// Sends proposals batched since the last Ready.
    pub(crate) fn flush_appends(&mut self) {
        if std::mem::take(&mut self.appends_pending) && self.role == Role::Leader {
            self.bcast_append(false);
        }
    }

    /// The runtime made entries / a snapshot durable.
    pub(crate) fn on_persisted(&mut self, snapshot_index: Option<u64>, last: Option<(u64, u64)>) {
        let before = self.log.persisted;
        self.log.on_persisted(snapshot_index, last);
        if self.role == Role::Leader && self.log.persisted > before {
            self.maybe_commit();
        }
    }
}
