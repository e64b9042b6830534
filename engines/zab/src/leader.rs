//! The leader's side of Zab after election:
//!
//! * discovery: collect FOLLOWERINFO (accepted epochs) from a quorum, pick an
//!   epoch above all of them, and establish it once a quorum *freshly*
//!   acknowledged it (ACKEPOCH) — each node acknowledges an epoch freshly at
//!   most once, so at most one leader gets through discovery per epoch. An
//!   acknowledging follower whose history is more recent than ours makes us
//!   step down (our history must contain every committed proposal);
//! * synchronization: bring each follower to our history (DIFF / TRUNC /
//!   SNAP plus NEWLEADER); once a quorum (with our own durable copy)
//!   acknowledged it, the whole history is committed and the epoch
//!   established (UPTODATE);
//! * broadcast: pipelined, batched PROPOSALs; commit, in zxid order, what a
//!   quorum durably acknowledged; pings; sync reads; step down when a quorum
//!   stops answering.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::learner::{Learner, LearnerState};
use crate::message::{MessageBody, NodeId, Phase};
use crate::quorum;
use crate::sync;
use crate::zab::Zab;
use crate::zxid::Zxid;

#[derive(Debug)]
pub(crate) struct Lead {
    pub(crate) phase: Phase,
    /// The epoch being established; chosen once a quorum sent FOLLOWERINFO.
    pub(crate) epoch: Option<u32>,
    /// Accepted epochs reported by FOLLOWERINFO (and our own).
    infos: BTreeMap<NodeId, u32>,
    pub(crate) learners: BTreeMap<NodeId, Learner>,
    /// Our last zxid when discovery completed: the history of this epoch.
    history_last: Zxid,
    /// Ticks since leading started (before establishment) or since the
    /// current check-quorum window began (after).
    elapsed: u32,
    ping_elapsed: u32,
    pub(crate) proposals_pending: bool,
    commit_dirty: bool,
    ping_pending: bool,
    next_sync_id: u64,
}

impl Lead {
    pub(crate) fn has_flush_work(&self) -> bool {
        self.phase == Phase::Broadcast
            && (self.proposals_pending || self.commit_dirty || self.ping_pending)
            && self.learners.values().any(Learner::synced)
    }

    fn epoch_in(&self, epoch: u32) -> bool {
        self.epoch == Some(epoch)
    }
}

impl Zab {
    pub(crate) fn become_leading(&mut self) {
        self.follow = None;
        let mut infos = BTreeMap::new();
        infos.insert(self.id, self.accepted_epoch);
        self.lead = Some(Lead {
            phase: Phase::Discovery,
            epoch: None,
            infos,
            learners: BTreeMap::new(),
            history_last: Zxid::ZERO,
            elapsed: 0,
            ping_elapsed: 0,
            proposals_pending: false,
            commit_dirty: false,
            ping_pending: false,
            next_sync_id: 0,
        });
        self.try_choose_epoch();
    }

    // ---- discovery ------------------------------------------------------------

    pub(crate) fn on_follower_info(&mut self, from: NodeId, accepted: u32, round: u64) {
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        match lead.learners.get_mut(&from) {
            Some(l) if round < l.round => return,
            // A repeat: only worth answering while discovery is under way.
            Some(l) if round == l.round && l.state != LearnerState::Discovering => return,
            Some(l) if round == l.round => l.active = true,
            // A new attempt to follow us (the follower went back to election
            // or restarted): start over with it.
            _ => {
                lead.learners.insert(from, Learner::new(round));
            }
        }
        match lead.epoch {
            Some(epoch) if accepted > epoch && lead.phase == Phase::Broadcast => {
                // It accepted a newer epoch and can never join ours: make
                // way for an election that picks an epoch above it.
                self.become_looking();
            }
            Some(epoch) => self.send(from, MessageBody::NewEpoch { epoch, round }),
            None => {
                let a = lead.infos.entry(from).or_insert(accepted);
                *a = (*a).max(accepted);
                self.try_choose_epoch();
            }
        }
    }

    fn try_choose_epoch(&mut self) {
        let quorum = self.quorum();
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        if lead.epoch.is_some() || lead.infos.len() < quorum {
            return;
        }
        let max = lead.infos.values().copied().max().unwrap_or(0);
        let Some(epoch) = max.max(self.accepted_epoch).checked_add(1) else {
            // Epochs exhausted: nothing sensible left to do but keep looking.
            self.become_looking();
            return;
        };
        lead.epoch = Some(epoch);
        self.accepted_epoch = epoch;
        let targets: Vec<(NodeId, u64)> = lead
            .learners
            .iter()
            .filter(|(_, l)| l.state == LearnerState::Discovering)
            .map(|(&id, l)| (id, l.round))
            .collect();
        for (to, round) in targets {
            self.send(to, MessageBody::NewEpoch { epoch, round });
        }
        self.leader_progress();
    }

    pub(crate) fn on_ack_epoch(
        &mut self,
        from: NodeId,
        epoch: u32,
        round: u64,
        fresh: bool,
        history: (u32, Zxid),
    ) {
        let mine = (self.current_epoch, self.log.last_zxid());
        let Some(lead) = self.lead.as_mut().filter(|l| l.epoch_in(epoch)) else {
            return;
        };
        let phase = lead.phase;
        let Some(l) = lead.learners.get_mut(&from).filter(|l| l.round == round) else {
            return;
        };
        if l.state != LearnerState::Discovering {
            return;
        }
        if phase == Phase::Discovery && history > mine {
            // Its history may hold committed proposals ours lacks.
            self.become_looking();
            return;
        }
        l.state = LearnerState::EpochAcked;
        l.fresh = fresh;
        l.reported = history;
        l.active = true;
        if phase == Phase::Discovery {
            self.leader_progress();
        } else {
            self.start_sync(from);
        }
    }

    /// Re-checks every step that waits on a quorum or on our own durable
    /// state (called after acknowledgements and after `advance`).
    pub(crate) fn leader_progress(&mut self) {
        self.try_finish_discovery();
        self.try_establish();
        self.maybe_commit();
    }

    fn try_finish_discovery(&mut self) {
        let quorum = self.quorum();
        let last = self.log.last_zxid();
        let durable_accepted = self.durable.accepted_epoch;
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        let Some(epoch) = lead.epoch else {
            return;
        };
        if lead.phase != Phase::Discovery || durable_accepted < epoch {
            return;
        }
        let fresh = lead
            .learners
            .values()
            .filter(|l| l.state == LearnerState::EpochAcked && l.fresh)
            .count();
        if fresh + 1 < quorum {
            return;
        }
        lead.phase = Phase::Synchronization;
        lead.history_last = last;
        self.current_epoch = epoch;
        let acked: Vec<NodeId> = lead
            .learners
            .iter()
            .filter(|(_, l)| l.state == LearnerState::EpochAcked)
            .map(|(&id, _)| id)
            .collect();
        for to in acked {
            self.start_sync(to);
        }
    }

    // ---- synchronization ----------------------------------------------------

    /// Starts (or restarts) bringing `to` to our history.
    fn start_sync(&mut self, to: NodeId) {
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        lead.next_sync_id += 1;
        let sync_id = lead.next_sync_id;
        let Some(l) = lead.learners.get_mut(&to) else {
            return;
        };
        l.state = LearnerState::Syncing { sync_id };
        self.send_new_leader(to);
    }

    fn send_new_leader(&mut self, to: NodeId) {
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        let Some(epoch) = lead.epoch else {
            return;
        };
        let Some(l) = lead.learners.get_mut(&to) else {
            return;
        };
        let LearnerState::Syncing { sync_id } = l.state else {
            return;
        };
        l.resend_elapsed = 0;
        let (sync, proposals) = sync::plan(&self.log, l.reported.1);
        let body = MessageBody::NewLeader {
            epoch,
            round: l.round,
            sync_id,
            sync,
            proposals,
            last_zxid: self.log.last_zxid(),
            commit: self.log.committed,
        };
        self.send(to, body);
    }

    pub(crate) fn on_ack_new_leader(
        &mut self,
        from: NodeId,
        epoch: u32,
        round: u64,
        sync_id: u64,
        last: Zxid,
    ) -> Result<(), Error> {
        let my_last = self.log.last_zxid();
        let commit = self.log.committed;
        let Some(lead) = self.lead.as_mut().filter(|l| l.epoch_in(epoch)) else {
            return Ok(());
        };
        let phase = lead.phase;
        let Some(l) = lead.learners.get_mut(&from).filter(|l| l.round == round) else {
            return Ok(());
        };
        if l.state != (LearnerState::Syncing { sync_id }) {
            return Ok(());
        }
        if last > my_last {
            return Err(Error::Malformed("synchronized beyond the leader's history"));
        }
        l.become_synced(last);
        l.active = true;
        match phase {
            Phase::Broadcast => {
                self.send(from, MessageBody::UpToDate { epoch, commit });
                self.send_proposals(from);
                self.maybe_commit();
            }
            _ => self.try_establish(),
        }
        Ok(())
    }

    fn try_establish(&mut self) {
        let quorum = self.quorum();
        let durable_current = self.durable.current_epoch;
        let persisted = self.log.persisted;
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        let Some(epoch) = lead.epoch else {
            return;
        };
        if lead.phase != Phase::Synchronization
            || durable_current != epoch
            || persisted < lead.history_last
        {
            return;
        }
        let synced = lead.learners.values().filter(|l| l.synced()).count();
        if synced + 1 < quorum {
            return;
        }
        // A quorum durably holds the history with this epoch: it is
        // committed, and no later leader can be elected without it.
        lead.phase = Phase::Broadcast;
        lead.elapsed = 0;
        lead.ping_elapsed = 0;
        let history_last = lead.history_last;
        self.log.commit_to(history_last);
        let commit = self.log.committed;
        let mut targets = Vec::new();
        for (&id, l) in lead.learners.iter_mut() {
            if l.synced() {
                l.active = true;
                targets.push(id);
            }
        }
        for to in targets {
            self.send(to, MessageBody::UpToDate { epoch, commit });
        }
    }

    // ---- broadcast ------------------------------------------------------------

    fn maybe_commit(&mut self) {
        let voters = self.voters.len();
        let persisted = self.log.persisted;
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        if lead.phase != Phase::Broadcast {
            return;
        }
        let mut held: Vec<Zxid> = lead
            .learners
            .values()
            .filter(|l| l.in_session())
            .map(|l| l.acked)
            .collect();
        held.push(persisted);
        if self.log.commit_to(quorum::quorum_zxid(held, voters)) {
            lead.commit_dirty = true;
        }
    }

    /// Sends `to` as many batches as its window allows; true if any went.
    fn send_proposals(&mut self, to: NodeId) -> bool {
        let max_batch = self.cfg.max_proposals_per_msg;
        let max_inflight = self.cfg.max_inflight_msgs;
        let commit = self.log.committed;
        let last = self.log.last_zxid();
        let mut sent = false;
        loop {
            let Some(lead) = self.lead.as_mut() else {
                return sent;
            };
            let Some(epoch) = lead.epoch else {
                return sent;
            };
            let Some(l) = lead.learners.get_mut(&to) else {
                return sent;
            };
            if !l.synced() || l.window_full(max_inflight) || l.next >= last {
                return sent;
            }
            let prev = l.next;
            match self.log.entries_after(prev, max_batch) {
                Some(batch) => {
                    let Some(b_last) = batch.last().map(|p| p.zxid) else {
                        return sent;
                    };
                    l.sent(b_last);
                    let body = MessageBody::Propose {
                        epoch,
                        prev,
                        proposals: batch,
                        commit,
                    };
                    self.send(to, body);
                    sent = true;
                }
                None => {
                    // It needs proposals we compacted: synchronize it again
                    // from the snapshot.
                    l.reported = (epoch, prev);
                    self.start_sync(to);
                    return sent;
                }
            }
        }
    }

    pub(crate) fn flush_leader(&mut self) {
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        let proposals = std::mem::take(&mut lead.proposals_pending);
        let commit_dirty = std::mem::take(&mut lead.commit_dirty);
        let ping = std::mem::take(&mut lead.ping_pending);
        let Some(epoch) = lead.epoch.filter(|_| lead.phase == Phase::Broadcast) else {
            return;
        };
        let synced: Vec<NodeId> = lead
            .learners
            .iter()
            .filter(|(_, l)| l.synced())
            .map(|(&id, _)| id)
            .collect();
        let zxid = self.log.committed;
        for to in synced {
            let sent = (proposals || commit_dirty) && self.send_proposals(to);
            if commit_dirty && !sent {
                self.send(to, MessageBody::Commit { epoch, zxid });
            }
        }
        if ping {
            self.bcast_ping();
        }
    }

    fn bcast_ping(&mut self) {
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        let Some(epoch) = lead.epoch else {
            return;
        };
        lead.ping_elapsed = 0;
        let synced: Vec<NodeId> = lead
            .learners
            .iter()
            .filter(|(_, l)| l.synced())
            .map(|(&id, _)| id)
            .collect();
        let commit = self.log.committed;
        let read_seq = self.leader_reads.pending_seq();
        for to in synced {
            self.send(
                to,
                MessageBody::Ping {
                    epoch,
                    commit,
                    read_seq,
                },
            );
        }
    }

    pub(crate) fn on_ack(&mut self, from: NodeId, epoch: u32, zxid: Zxid) -> Result<(), Error> {
        let last = self.log.last_zxid();
        let Some(lead) = self.lead.as_mut().filter(|l| l.epoch_in(epoch)) else {
            return Ok(());
        };
        let Some(l) = lead.learners.get_mut(&from).filter(|l| l.in_session()) else {
            return Ok(());
        };
        if zxid > last {
            return Err(Error::Malformed("acknowledged beyond the leader's history"));
        }
        l.active = true;
        l.on_ack(zxid);
        self.maybe_commit();
        self.send_proposals(from);
        Ok(())
    }

    pub(crate) fn on_nack(&mut self, from: NodeId, epoch: u32, last: Zxid) {
        let Some(lead) = self.lead.as_mut().filter(|l| l.epoch_in(epoch)) else {
            return;
        };
        let Some(l) = lead.learners.get_mut(&from).filter(|l| l.synced()) else {
            return;
        };
        l.active = true;
        if last < l.next {
            l.rewind(last);
            self.send_proposals(from);
        }
    }

    pub(crate) fn on_ping_ack(&mut self, from: NodeId, epoch: u32, read_seq: u64) {
        let quorum = self.quorum();
        let Some(lead) = self.lead.as_mut().filter(|l| l.epoch_in(epoch)) else {
            return;
        };
        let Some(l) = lead.learners.get_mut(&from).filter(|l| l.in_session()) else {
            return;
        };
        l.active = true;
        for (origin, rs) in self.leader_reads.ack(from, read_seq, quorum) {
            self.send(
                origin,
                MessageBody::SyncResponse {
                    epoch,
                    ctx: rs.ctx,
                    zxid: rs.zxid,
                },
            );
        }
    }

    pub(crate) fn on_sync_request(&mut self, from: NodeId, epoch: u32, ctx: u64) {
        let ok = self.lead.as_ref().is_some_and(|l| {
            l.epoch_in(epoch)
                && l.phase == Phase::Broadcast
                && l.learners.get(&from).is_some_and(Learner::synced)
        });
        if ok {
            self.leader_sync_read(from, ctx);
        }
    }

    /// Registers a sync read from `origin` (maybe us): everything committed
    /// before now is at or below our commit point, since our history holds
    /// every earlier committed proposal and establishment committed it.
    pub(crate) fn leader_sync_read(&mut self, origin: NodeId, ctx: u64) {
        let zxid = self.log.committed;
        if self.voters.len() == 1 {
            self.leader_reads.add_confirmed(ctx, zxid);
            return;
        }
        self.leader_reads.add(origin, ctx, zxid);
        if let Some(l) = self.lead.as_mut() {
            l.ping_pending = true;
        }
    }

    // ---- time -----------------------------------------------------------------

    pub(crate) fn tick_leading(&mut self) {
        let cfg_init = self.cfg.init_limit;
        let cfg_sync = self.cfg.sync_limit;
        let cfg_ping = self.cfg.ping_ticks;
        let resend = self.cfg.resend_ticks();
        let quorum = self.quorum();
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        lead.elapsed += 1;
        if lead.phase != Phase::Broadcast {
            if lead.elapsed >= cfg_init {
                self.become_looking();
                return;
            }
        } else {
            if lead.elapsed >= cfg_sync {
                lead.elapsed = 0;
                // Like CheckQuorum: without a quorum of live followers
                // another leader may be established; stop serving.
                let active = lead
                    .learners
                    .values()
                    .filter(|l| l.in_session() && l.active)
                    .count();
                if active + 1 < quorum {
                    self.become_looking();
                    return;
                }
                for l in lead.learners.values_mut() {
                    l.active = false;
                }
            }
            lead.ping_elapsed += 1;
            if lead.ping_elapsed >= cfg_ping {
                self.bcast_ping();
            }
        }
        // Retransmissions: the network may lose anything.
        let Some(lead) = self.lead.as_mut() else {
            return;
        };
        let epoch = lead.epoch;
        let mut new_epoch: Vec<(NodeId, u64)> = Vec::new();
        let mut new_leader = Vec::new();
        let mut proposals = Vec::new();
        for (&id, l) in lead.learners.iter_mut() {
            match l.state {
                LearnerState::Discovering | LearnerState::Syncing { .. } => {
                    l.resend_elapsed += 1;
                    if l.resend_elapsed >= resend {
                        l.resend_elapsed = 0;
                        if l.state == LearnerState::Discovering {
                            new_epoch.push((id, l.round));
                        } else {
                            new_leader.push(id);
                        }
                    }
                }
                LearnerState::Synced => {
                    if l.tick_stalled(resend) {
                        let acked = l.acked;
                        l.rewind(acked);
                        proposals.push(id);
                    }
                }
                LearnerState::EpochAcked => {}
            }
        }
        if let Some(epoch) = epoch {
            for (to, round) in new_epoch {
                self.send(to, MessageBody::NewEpoch { epoch, round });
            }
        }
        for to in new_leader {
            self.send_new_leader(to);
        }
        for to in proposals {
            self.send_proposals(to);
        }
    }
}
