//! The Zab state machine: roles and their transitions, logical time
//! (`tick`), the checks every incoming message goes through, and the client
//! entry points (propose, sync read). Election lives in `election.rs`, the
//! leader's side of discovery / synchronization / broadcast in `leader.rs`,
//! the follower's in `follower.rs`.

use crate::config::Config;
use crate::election::Election;
use crate::error::Error;
use crate::follower::{Follow, SyncState};
use crate::leader::Lead;
use crate::log::ZabLog;
use crate::message::{HardState, Message, MessageBody, NodeId, Phase, Proposal, Role, Vote};
use crate::quorum;
use crate::read::{FollowerReads, LeaderReads};
use crate::ready::SoftState;
use crate::rng::SplitMix64;
use crate::zxid::Zxid;

pub(crate) struct Zab {
    pub(crate) id: NodeId,
    pub(crate) cfg: Config,
    /// Sorted ids of the ensemble (including self).
    pub(crate) voters: Vec<NodeId>,

    pub(crate) accepted_epoch: u32,
    pub(crate) current_epoch: u32,
    pub(crate) round: u64,
    /// The hard state `advance` last confirmed durable.
    pub(crate) durable: HardState,
    pub(crate) log: ZabLog,

    /// Looking: the current vote. Otherwise: the decided one.
    pub(crate) vote: Vote,
    pub(crate) election: Election,
    pub(crate) lead: Option<Lead>,
    pub(crate) follow: Option<Follow>,
    /// The leader and epoch this node last accepted as a new epoch; lets it
    /// repeat a lost fresh ACKEPOCH to that leader (volatile on purpose:
    /// after a restart the acknowledgement is no longer fresh).
    pub(crate) accepted_from: Option<(NodeId, u32)>,

    pub(crate) leader_reads: LeaderReads,
    pub(crate) follower_reads: FollowerReads,
    pub(crate) dropped_reads: Vec<u64>,
    pub(crate) msgs: Vec<Message>,
    pub(crate) persisted_msgs: Vec<Message>,
    pub(crate) rng: SplitMix64,
}

impl Zab {
    pub(crate) fn new(cfg: Config, hs: HardState, log: ZabLog) -> Result<Self, Error> {
        cfg.validate()?;
        if hs.current_epoch > hs.accepted_epoch {
            return Err(Error::InvalidPersistedState(format!(
                "current epoch {} above accepted epoch {}",
                hs.current_epoch, hs.accepted_epoch
            )));
        }
        let mut voters = cfg.peers.clone();
        voters.sort_unstable();
        let id = cfg.id;
        Ok(Self {
            id,
            voters,
            accepted_epoch: hs.accepted_epoch,
            current_epoch: hs.current_epoch,
            round: hs.round,
            durable: hs,
            log,
            vote: Vote::default(),
            election: Election::default(),
            lead: None,
            follow: None,
            accepted_from: None,
            leader_reads: LeaderReads::new(id),
            follower_reads: FollowerReads::default(),
            dropped_reads: Vec::new(),
            msgs: Vec::new(),
            persisted_msgs: Vec::new(),
            rng: SplitMix64::new(cfg.seed),
            cfg,
        })
    }

    pub(crate) fn role(&self) -> Role {
        if self.lead.is_some() {
            Role::Leading
        } else if self.follow.is_some() {
            Role::Following
        } else {
            Role::Looking
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        match (&self.lead, &self.follow) {
            (Some(l), _) => l.phase,
            (None, Some(f)) => f.phase,
            (None, None) => Phase::Election,
        }
    }

    pub(crate) fn leader(&self) -> Option<NodeId> {
        match (&self.lead, &self.follow) {
            (Some(_), _) => Some(self.id),
            (None, Some(f)) => Some(f.leader),
            (None, None) => None,
        }
    }

    pub(crate) fn soft_state(&self) -> SoftState {
        SoftState {
            role: self.role(),
            phase: self.phase(),
            leader: self.leader(),
            epoch: self.current_epoch,
        }
    }

    pub(crate) fn hard_state(&self) -> HardState {
        HardState {
            accepted_epoch: self.accepted_epoch,
            current_epoch: self.current_epoch,
            commit: self.log.committed,
            round: self.round,
        }
    }

    pub(crate) fn quorum(&self) -> usize {
        quorum::majority(self.voters.len())
    }

    pub(crate) fn is_voter(&self, id: NodeId) -> bool {
        self.voters.binary_search(&id).is_ok()
    }

    pub(crate) fn peers(&self) -> Vec<NodeId> {
        self.voters
            .iter()
            .copied()
            .filter(|&v| v != self.id)
            .collect()
    }

    pub(crate) fn send(&mut self, to: NodeId, body: MessageBody) {
        self.msgs.push(Message {
            from: self.id,
            to,
            body,
        });
    }

    /// Sent only once everything this node holds now is durable.
    pub(crate) fn send_after_persist(&mut self, to: NodeId, body: MessageBody) {
        self.persisted_msgs.push(Message {
            from: self.id,
            to,
            body,
        });
    }

    /// Leaves any session and starts a new election round.
    pub(crate) fn become_looking(&mut self) {
        if self.lead.take().is_some() {
            let dropped = self.leader_reads.clear();
            self.dropped_reads.extend(dropped);
        }
        if self.follow.take().is_some() {
            let dropped = self.follower_reads.clear();
            self.dropped_reads.extend(dropped);
        }
        self.start_election();
    }

    // ---- time ---------------------------------------------------------------

    pub(crate) fn tick(&mut self) {
        match self.role() {
            Role::Looking => self.tick_election(),
            Role::Following => self.tick_following(),
            Role::Leading => self.tick_leading(),
        }
    }

    // ---- messages -----------------------------------------------------------

    pub(crate) fn step(&mut self, m: Message) -> Result<(), Error> {
        if m.to != self.id {
            return Err(Error::WrongRecipient {
                to: m.to,
                me: self.id,
            });
        }
        if m.from == self.id || !self.is_voter(m.from) {
            return Err(Error::UnknownPeer(m.from));
        }
        let from = m.from;
        let leading = self.lead.is_some();
        let following = self.follow.is_some();
        match m.body {
            MessageBody::Notification { vote, round, state } => {
                if !self.is_voter(vote.leader) {
                    return Err(Error::Malformed("vote for a node outside the ensemble"));
                }
                self.on_notification(from, vote, round, state);
            }
            MessageBody::FollowerInfo {
                accepted_epoch,
                round,
            } if leading => self.on_follower_info(from, accepted_epoch, round),
            MessageBody::NewEpoch { epoch, round } if following => {
                self.on_new_epoch(from, epoch, round)
            }
            MessageBody::AckEpoch {
                epoch,
                round,
                fresh,
                current_epoch,
                last_zxid,
            } if leading => {
                self.on_ack_epoch(from, epoch, round, fresh, (current_epoch, last_zxid))
            }
            MessageBody::NewLeader {
                epoch,
                round,
                sync_id,
                sync,
                proposals,
                last_zxid,
                commit,
            } if following && round == self.round => {
                self.on_new_leader(from, epoch, sync_id, sync, proposals, last_zxid, commit)?
            }
            MessageBody::AckNewLeader {
                epoch,
                round,
                sync_id,
                last_zxid,
            } if leading => self.on_ack_new_leader(from, epoch, round, sync_id, last_zxid)?,
            MessageBody::UpToDate { epoch, commit } if following => {
                self.on_up_to_date(from, epoch, commit)
            }
            MessageBody::Propose {
                epoch,
                prev,
                proposals,
                commit,
            } if following => self.on_propose(from, epoch, prev, proposals, commit)?,
            MessageBody::Ack { epoch, zxid } if leading => self.on_ack(from, epoch, zxid)?,
            MessageBody::Nack { epoch, last_zxid } if leading => {
                self.on_nack(from, epoch, last_zxid)
            }
            MessageBody::Commit { epoch, zxid } if following => self.on_commit(from, epoch, zxid),
            MessageBody::Ping {
                epoch,
                commit,
                read_seq,
            } if following => self.on_ping(from, epoch, commit, read_seq),
            MessageBody::PingAck { epoch, read_seq } if leading => {
                self.on_ping_ack(from, epoch, read_seq)
            }
            MessageBody::SyncRequest { epoch, ctx } if leading => {
                self.on_sync_request(from, epoch, ctx)
            }
            MessageBody::SyncResponse { epoch, ctx, zxid } if following => {
                self.on_sync_response(from, epoch, ctx, zxid)
            }
            // Meant for a role this node no longer (or not yet) plays.
            _ => {}
        }
        Ok(())
    }

    // ---- client entry points ------------------------------------------------

    fn leader_hint(&self) -> Option<NodeId> {
        match (&self.lead, &self.follow) {
            (None, Some(f)) => Some(f.leader),
            _ => None,
        }
    }

    pub(crate) fn propose(&mut self, data: Vec<u8>) -> Result<Zxid, Error> {
        let Some(epoch) = self
            .lead
            .as_ref()
            .filter(|l| l.phase == Phase::Broadcast)
            .and_then(|l| l.epoch)
        else {
            return Err(Error::NotLeader {
                leader_hint: self.leader_hint(),
            });
        };
        let last = self.log.last_zxid();
        let counter = if last.epoch() == epoch {
            last.counter()
        } else {
            0
        };
        if counter == u32::MAX {
            // ZooKeeper does the same: a new epoch restarts the counter.
            self.become_looking();
            return Err(Error::ZxidExhausted);
        }
        let zxid = Zxid::new(epoch, counter + 1);
        self.log.append(Proposal { zxid, data });
        if let Some(l) = self.lead.as_mut() {
            l.proposals_pending = true;
        }
        Ok(zxid)
    }

    pub(crate) fn sync_read(&mut self, ctx: u64) -> Result<(), Error> {
        if self.phase() != Phase::Broadcast {
            return Err(Error::NotServing {
                leader_hint: self.leader_hint(),
            });
        }
        if self.lead.is_some() {
            self.leader_sync_read(self.id, ctx);
        } else if let Some(f) = &self.follow {
            let (leader, epoch) = (f.leader, f.epoch.unwrap_or(self.current_epoch));
            self.follower_reads.add(ctx);
            self.send(leader, MessageBody::SyncRequest { epoch, ctx });
        }
        Ok(())
    }

    /// Sends what was batched since the last Ready (proposals, commits,
    /// pings confirming reads).
    pub(crate) fn flush(&mut self) {
        self.flush_leader();
    }

    pub(crate) fn has_flush_work(&self) -> bool {
        self.lead.as_ref().is_some_and(|l| l.has_flush_work())
    }

    /// The runtime made a Ready durable.
    pub(crate) fn on_persisted(
        &mut self,
        snapshot: Option<Zxid>,
        mark: Option<(u64, Zxid)>,
        hard_state: Option<HardState>,
    ) {
        self.log.on_persisted(snapshot, mark);
        if let Some(hs) = hard_state {
            self.durable = hs;
        }
        if self.lead.is_some() {
            self.leader_progress();
        }
        if self
            .follow
            .as_ref()
            .is_some_and(|f| matches!(f.sync, SyncState::Pending { .. }))
        {
            self.maybe_finish_sync();
        }
    }
}
