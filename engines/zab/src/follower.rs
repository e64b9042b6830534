//! The follower's side of Zab after election: FOLLOWERINFO, accepting the
//! leader's new epoch (durably, before ACKEPOCH), applying its
//! synchronization and adopting the epoch (durably, before acknowledging
//! NEWLEADER), then accepting proposals (each acknowledged only once
//! durable) and commits, answering pings, and forwarding sync reads.
//!
//! Only messages of the current session — from the leader being followed,
//! carrying the epoch this node acknowledged — are acted upon; the network
//! may deliver anything late, twice or not at all.

use crate::error::Error;
use crate::message::{MessageBody, NodeId, Phase, Proposal, SyncKind};
use crate::sync;
use crate::zab::Zab;
use crate::zxid::Zxid;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SyncState {
    /// No synchronization of this session applied yet.
    None,
    /// Applied in memory; acknowledged once durable.
    Pending { sync_id: u64 },
    /// Durable and acknowledged: proposals may follow.
    Done { sync_id: u64 },
}

#[derive(Debug)]
pub(crate) struct Follow {
    pub(crate) leader: NodeId,
    pub(crate) phase: Phase,
    /// The epoch of this session: acknowledged NEWEPOCH from `leader`.
    pub(crate) epoch: Option<u32>,
    pub(crate) sync: SyncState,
    /// Ticks since the last message of the leader.
    since_leader: u32,
    /// Ticks since following started (bounded by initLimit until broadcast).
    phase_elapsed: u32,
    info_elapsed: u32,
}

impl Follow {
    fn synced(&self) -> bool {
        matches!(self.sync, SyncState::Done { .. })
    }
}

impl Zab {
    pub(crate) fn become_following(&mut self, leader: NodeId) {
        self.lead = None;
        self.follow = Some(Follow {
            leader,
            phase: Phase::Discovery,
            epoch: None,
            sync: SyncState::None,
            since_leader: 0,
            phase_elapsed: 0,
            info_elapsed: 0,
        });
        self.send_follower_info(leader);
    }

    fn send_follower_info(&mut self, leader: NodeId) {
        let body = MessageBody::FollowerInfo {
            accepted_epoch: self.accepted_epoch,
            round: self.round,
        };
        // Once the round is durable it names this attempt alone: a restart
        // starts the next round.
        self.send_after_persist(leader, body);
    }

    /// See [`crate::RawNode::peer_disconnected`].
    pub(crate) fn on_peer_disconnected(&mut self, peer: NodeId) {
        if self.follow.as_ref().is_some_and(|f| f.leader == peer) {
            self.become_looking();
        }
    }

    pub(crate) fn tick_following(&mut self) {
        let resend = self.cfg.resend_ticks();
        let (init, sync_limit) = (self.cfg.init_limit, self.cfg.sync_limit);
        let Some(f) = self.follow.as_mut() else {
            return;
        };
        f.since_leader += 1;
        f.phase_elapsed += 1;
        let expired = match f.phase {
            Phase::Broadcast => f.since_leader >= sync_limit,
            _ => f.phase_elapsed >= init,
        };
        if expired {
            self.become_looking();
            return;
        }
        if f.phase == Phase::Discovery && f.epoch.is_none() {
            f.info_elapsed += 1;
            if f.info_elapsed >= resend {
                f.info_elapsed = 0;
                let leader = f.leader;
                self.send_follower_info(leader);
            }
        }
        let dropped = self.follower_reads.tick(sync_limit);
        self.dropped_reads.extend(dropped);
    }

    /// Is this message from the current session? Counts as leader contact.
    fn in_session(&mut self, from: NodeId, epoch: u32) -> bool {
        match self.follow.as_mut() {
            Some(f) if f.leader == from && f.epoch == Some(epoch) => {
                f.since_leader = 0;
                true
            }
            _ => false,
        }
    }

    /// Like `in_session`, and synchronized: proposals and commits apply.
    fn in_synced_session(&mut self, from: NodeId, epoch: u32) -> bool {
        self.in_session(from, epoch) && self.follow.as_ref().is_some_and(Follow::synced)
    }

    pub(crate) fn on_new_epoch(&mut self, from: NodeId, epoch: u32, round: u64) {
        if round != self.round {
            return;
        }
        let Some(f) = self.follow.as_mut().filter(|f| f.leader == from) else {
            return;
        };
        f.since_leader = 0;
        let fresh = if epoch > self.accepted_epoch {
            self.accepted_epoch = epoch;
            self.accepted_from = Some((from, epoch));
            true
        } else if epoch == self.accepted_epoch {
            // Accepted before: fresh only if it was from this leader (a
            // lost ACKEPOCH being repeated).
            self.accepted_from == Some((from, epoch))
        } else {
            return;
        };
        if f.epoch != Some(epoch) {
            if f.epoch.is_some() {
                let dropped = self.follower_reads.clear();
                self.dropped_reads.extend(dropped);
            }
            f.epoch = Some(epoch);
            f.phase = Phase::Synchronization;
            f.sync = SyncState::None;
            f.phase_elapsed = 0;
        }
        let body = MessageBody::AckEpoch {
            epoch,
            round,
            fresh,
            current_epoch: self.current_epoch,
            last_zxid: self.log.last_zxid(),
        };
        // The accepted epoch must be durable first.
        self.send_after_persist(from, body);
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_new_leader(
        &mut self,
        from: NodeId,
        epoch: u32,
        sync_id: u64,
        kind: SyncKind,
        proposals: Vec<Proposal>,
        last: Zxid,
        commit: Zxid,
    ) -> Result<(), Error> {
        if epoch != self.accepted_epoch || !self.in_session(from, epoch) {
            return Ok(());
        }
        let Some(f) = self.follow.as_ref() else {
            return Ok(());
        };
        match f.sync {
            SyncState::Pending { sync_id: s } if sync_id <= s => return Ok(()),
            SyncState::Done { sync_id: s } if sync_id < s => return Ok(()),
            SyncState::Done { sync_id: s } if sync_id == s => {
                // Our acknowledgement was lost; the history is still synced.
                let body = MessageBody::AckNewLeader {
                    epoch,
                    round: self.round,
                    sync_id,
                    last_zxid: self.log.last_zxid(),
                };
                self.send_after_persist(from, body);
                return Ok(());
            }
            _ => {}
        }
        sync::apply(&mut self.log, kind, proposals, last)?;
        self.log.commit_to(commit);
        if let Some(f) = self.follow.as_mut() {
            f.sync = SyncState::Pending { sync_id };
        }
        self.maybe_finish_sync();
        Ok(())
    }

    /// Once the synchronized history is durable: adopt the epoch and
    /// acknowledge NEWLEADER (sent after the epoch is durable too). Adopting
    /// the epoch only after the history is durable means a crash never
    /// leaves the new epoch paired with the old history.
    pub(crate) fn maybe_finish_sync(&mut self) {
        if !self.log.history_durable() {
            return;
        }
        let Some(f) = self.follow.as_mut() else {
            return;
        };
        let (SyncState::Pending { sync_id }, Some(epoch)) = (f.sync, f.epoch) else {
            return;
        };
        f.sync = SyncState::Done { sync_id };
        let leader = f.leader;
        self.current_epoch = epoch;
        let body = MessageBody::AckNewLeader {
            epoch,
            round: self.round,
            sync_id,
            last_zxid: self.log.last_zxid(),
        };
        self.send_after_persist(leader, body);
    }

    pub(crate) fn on_up_to_date(&mut self, from: NodeId, epoch: u32, commit: Zxid) {
        if !self.in_synced_session(from, epoch) {
            return;
        }
        self.serve();
        self.log.commit_to(commit);
    }

    /// The leader is established and we hold its history: serve.
    fn serve(&mut self) {
        if let Some(f) = self.follow.as_mut() {
            f.phase = Phase::Broadcast;
        }
    }

    pub(crate) fn on_propose(
        &mut self,
        from: NodeId,
        epoch: u32,
        prev: Zxid,
        proposals: Vec<Proposal>,
        commit: Zxid,
    ) -> Result<(), Error> {
        if !self.in_synced_session(from, epoch) {
            return Ok(());
        }
        let last = self.log.last_zxid();
        if prev > last {
            // A batch before this one was lost or is late.
            self.send(
                from,
                MessageBody::Nack {
                    epoch,
                    last_zxid: last,
                },
            );
            return Ok(());
        }
        let snap = self.log.snapshot_zxid();
        let mut p_prev = prev;
        for p in &proposals {
            if p.zxid <= p_prev || p.zxid.epoch() != epoch {
                return Err(Error::Malformed(
                    "proposals out of order or of another epoch",
                ));
            }
            // What we hold of it must be the same history.
            if p.zxid <= last && p.zxid > snap && !self.log.contains(p.zxid) {
                return Err(Error::Malformed("proposal contradicts the synced history"));
            }
            p_prev = p.zxid;
        }
        if prev > snap && !self.log.contains(prev) {
            return Err(Error::Malformed("proposal batch follows an unknown zxid"));
        }
        self.log.append_new(proposals);
        self.log.commit_to(commit);
        let body = MessageBody::Ack {
            epoch,
            zxid: self.log.last_zxid(),
        };
        // Promises durability: sent only after the write.
        self.send_after_persist(from, body);
        Ok(())
    }

    pub(crate) fn on_commit(&mut self, from: NodeId, epoch: u32, zxid: Zxid) {
        if self.in_synced_session(from, epoch) {
            self.log.commit_to(zxid);
        }
    }

    pub(crate) fn on_ping(&mut self, from: NodeId, epoch: u32, commit: Zxid, read_seq: u64) {
        if !self.in_synced_session(from, epoch) {
            return;
        }
        // Only an established leader pings: as good as UPTODATE.
        self.serve();
        self.log.commit_to(commit);
        self.send(from, MessageBody::PingAck { epoch, read_seq });
    }

    pub(crate) fn on_sync_response(&mut self, from: NodeId, epoch: u32, ctx: u64, zxid: Zxid) {
        if self.in_session(from, epoch) {
            self.follower_reads.answer(ctx, zxid);
        }
    }
}
