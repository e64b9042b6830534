//! Fast leader election, in the manner of ZooKeeper's: each looking node
//! votes for the best (epoch, last zxid, id) it has heard of in the current
//! round and rebroadcasts whenever its vote changes; once a quorum agrees on
//! its vote and `finalize_ticks` pass without a better one it decides
//! (LEADING if the vote names itself, FOLLOWING otherwise). Nodes that are
//! already following or leading answer looking ones with their decided vote,
//! so a node that comes back joins an established leader when a quorum
//! reports following it and the leader itself reports leading.
//!
//! Election decides only who tries to lead: safety rests on the epochs of
//! discovery, so votes need not be durable.

use std::collections::BTreeMap;

use crate::message::{MessageBody, NodeId, Role, Vote};
use crate::zab::Zab;

#[derive(Debug, Default)]
pub(crate) struct Election {
    /// Votes of looking peers in the current round.
    received: BTreeMap<NodeId, Vote>,
    /// Decided votes reported by following / leading peers.
    out_of_election: BTreeMap<NodeId, (Role, Vote)>,
    /// Ticks left before deciding, once a quorum agrees with our vote.
    finalize_left: Option<u32>,
    resend_elapsed: u32,
    resend_after: u32,
}

impl Zab {
    pub(crate) fn self_vote(&self) -> Vote {
        Vote {
            epoch: self.current_epoch,
            zxid: self.log.last_zxid(),
            leader: self.id,
        }
    }

    /// Starts a new round voting for ourselves.
    pub(crate) fn start_election(&mut self) {
        self.round = self.round.saturating_add(1);
        self.vote = self.self_vote();
        self.election = Election::default();
        self.bcast_notification();
        self.check_decision();
    }

    fn notification(&self) -> MessageBody {
        MessageBody::Notification {
            vote: self.vote,
            round: self.round,
            state: self.role(),
        }
    }

    fn bcast_notification(&mut self) {
        for p in self.peers() {
            let n = self.notification();
            self.send(p, n);
        }
        let base = self.cfg.notify_ticks;
        self.election.resend_elapsed = 0;
        self.election.resend_after = self.rng.range(base, base + base / 2 + 1);
    }

    pub(crate) fn tick_election(&mut self) {
        self.election.resend_elapsed += 1;
        if self.election.resend_elapsed >= self.election.resend_after {
            // Lost notifications are only ever recovered by resending.
            self.bcast_notification();
        }
        if let Some(left) = self.election.finalize_left {
            if left <= 1 {
                self.election.finalize_left = Some(0);
                self.decide();
            } else {
                self.election.finalize_left = Some(left - 1);
            }
        }
    }

    pub(crate) fn on_notification(&mut self, from: NodeId, vote: Vote, round: u64, state: Role) {
        match self.role() {
            Role::Looking => self.looking_notification(from, vote, round, state),
            _ if state != Role::Looking => {}
            Role::Following
                if self.follow.as_ref().is_some_and(|f| f.leader == from) && round > self.round =>
            {
                // Our leader gave up and looks for a new one: so do we.
                self.become_looking();
                self.looking_notification(from, vote, round, state);
            }
            _ => {
                let n = self.notification();
                self.send(from, n);
            }
        }
    }

    fn looking_notification(&mut self, from: NodeId, vote: Vote, round: u64, state: Role) {
        if state != Role::Looking {
            self.election.out_of_election.insert(from, (state, vote));
            self.maybe_join(vote.leader, round);
            return;
        }
        if round > self.round {
            self.round = round;
            self.election.received.clear();
            self.vote = vote.max(self.self_vote());
            self.election.finalize_left = None;
            self.bcast_notification();
        } else if round < self.round {
            // Bring the sender to our round.
            let n = self.notification();
            self.send(from, n);
            return;
        } else if vote > self.vote {
            self.vote = vote;
            self.election.finalize_left = None;
            self.bcast_notification();
        } else if vote < self.vote {
            let n = self.notification();
            self.send(from, n);
        }
        self.election.received.insert(from, vote);
        self.check_decision();
    }

    fn support(&self) -> usize {
        1 + self
            .election
            .received
            .values()
            .filter(|&&v| v == self.vote)
            .count()
    }

    /// Starts (or cancels) the finalize wait depending on whether a quorum
    /// agrees with our vote.
    fn check_decision(&mut self) {
        if self.support() < self.quorum() {
            self.election.finalize_left = None;
            return;
        }
        if self.election.finalize_left.is_none() {
            self.election.finalize_left = Some(self.cfg.finalize_ticks);
            if self.cfg.finalize_ticks == 0 {
                self.decide();
            }
        }
    }

    fn decide(&mut self) {
        if self.support() < self.quorum() {
            self.election.finalize_left = None;
            return;
        }
        if self.vote.leader == self.id {
            self.become_leading();
        } else {
            self.become_following(self.vote.leader);
        }
    }

    /// Follows `leader` if it reports leading and, with it, a quorum of
    /// peers (not counting us) reports following it.
    fn maybe_join(&mut self, leader: NodeId, round: u64) {
        if leader == self.id {
            return;
        }
        let oe = &self.election.out_of_election;
        let leads = oe
            .get(&leader)
            .is_some_and(|(s, v)| *s == Role::Leading && v.leader == leader);
        let backers = oe.values().filter(|(_, v)| v.leader == leader).count();
        if !leads || backers < self.quorum() {
            return;
        }
        if let Some((_, v)) = oe.get(&leader) {
            self.vote = *v;
        }
        self.round = self.round.max(round);
        self.become_following(leader);
    }
}
