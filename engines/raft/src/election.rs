//! Leader election: starting a (pre)campaign, deciding whether to grant a
//! (pre)vote, and counting the answers.

use crate::message::{MessageBody, NodeId};
use crate::quorum::{self, VoteResult};
use crate::raft::{Raft, Role};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Campaign {
    /// Election timeout: run PreVote first if configured.
    Timeout,
    /// PreVote won (or is disabled): increment the term and ask for votes.
    Election,
    /// TimeoutNow from the leader: skip PreVote and ask voters to ignore
    /// their leader lease, since the leader itself requested this.
    Transfer,
}

impl Raft {
    pub(crate) fn campaign(&mut self, kind: Campaign) {
        if kind == Campaign::Timeout && self.cfg.pre_vote {
            self.become_pre_candidate();
        } else {
            self.become_candidate();
        }
        let pre = self.role == Role::PreCandidate;
        let transfer = kind == Campaign::Transfer;
        self.votes.insert(self.id, true);
        if quorum::tally(&self.voters, &self.votes) == VoteResult::Won {
            // Single voter: no one to ask.
            if pre {
                self.campaign(Campaign::Election);
            } else {
                self.become_leader();
            }
            return;
        }
        let last_index = self.log.last_index();
        let last_term = self.log.last_term();
        let peers: Vec<NodeId> = self.peers().collect();
        for p in peers {
            if pre {
                let body = MessageBody::PreVote {
                    last_index,
                    last_term,
                };
                self.send_with_term(p, self.term + 1, body);
            } else {
                // Our term and self-vote must be durable before anyone acts
                // on this request, or a restart could vote twice in a term.
                let body = MessageBody::RequestVote {
                    last_index,
                    last_term,
                    transfer,
                };
                self.send_after_persist(p, body);
            }
        }
    }

    /// `term` is the request's term: equal to ours for a real vote (we
    /// adopted it already), possibly higher for a PreVote.
    pub(crate) fn handle_vote_request(
        &mut self,
        from: NodeId,
        term: u64,
        last_index: u64,
        last_term: u64,
        pre: bool,
    ) {
        let can_vote = self.vote == Some(from)
            || (self.vote.is_none() && self.leader.is_none())
            || (pre && term > self.term);
        let grant = can_vote && self.log.is_up_to_date(last_index, last_term);
        if pre {
            // A granted pre-vote echoes the prospective term so the
            // pre-candidate can tell it apart from answers to older rounds.
            let reply_term = if grant { term } else { self.term };
            self.send_with_term(
                from,
                reply_term,
                MessageBody::PreVoteResponse { granted: grant },
            );
            return;
        }
        if grant {
            self.vote = Some(from);
            // Granting a vote is a sign of a live election: do not start one.
            self.reset_election_timer();
        }
        self.send_after_persist(from, MessageBody::VoteResponse { granted: grant });
    }

    pub(crate) fn handle_vote_response(&mut self, from: NodeId, granted: bool) {
        self.votes.insert(from, granted);
        match quorum::tally(&self.voters, &self.votes) {
            VoteResult::Won => {
                if self.role == Role::PreCandidate {
                    self.campaign(Campaign::Election);
                } else {
                    self.become_leader();
                }
            }
            VoteResult::Lost => {
                let term = self.term;
                self.become_follower(term, None);
            }
            VoteResult::Pending => {}
        }
    }
}
