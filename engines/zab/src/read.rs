//! Sync reads (ZooKeeper's `sync()`, made linearizable). The leader records
//! its commit point for each request, proves it is still the established
//! leader by a ping round answered by a quorum, and then either serves the
//! read locally once applied or tells the asking follower the point it must
//! apply first. The follower's side keeps its requests until answered (or
//! given up) and serves them once it has applied that point.
//!
//! Each request gets an increasing sequence number carried by pings. An
//! answer to sequence `s` proves leadership at a moment after every request
//! `<= s` was registered, so it counts for all of them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::message::NodeId;
use crate::ready::ReadState;
use crate::zxid::Zxid;

#[derive(Debug)]
struct Pending {
    seq: u64,
    origin: NodeId,
    read: ReadState,
    acks: BTreeSet<NodeId>,
}

/// The leader's side: requests waiting for a quorum of ping answers, and
/// its own confirmed reads waiting to be applied.
#[derive(Debug)]
pub(crate) struct LeaderReads {
    me: NodeId,
    last_seq: u64,
    pending: VecDeque<Pending>,
    /// Confirmed local reads; zxids are non-decreasing (commit points).
    local: VecDeque<ReadState>,
}

impl LeaderReads {
    pub(crate) fn new(me: NodeId) -> Self {
        Self {
            me,
            last_seq: 0,
            pending: VecDeque::new(),
            local: VecDeque::new(),
        }
    }

    /// Registers a read from `origin` that must observe `zxid`; returns the
    /// sequence number pings must carry.
    pub(crate) fn add(&mut self, origin: NodeId, ctx: u64, zxid: Zxid) -> u64 {
        self.last_seq += 1;
        self.pending.push_back(Pending {
            seq: self.last_seq,
            origin,
            read: ReadState { ctx, zxid },
            acks: BTreeSet::from([self.me]),
        });
        self.last_seq
    }

    /// A local read that needs no confirmation round (single node).
    pub(crate) fn add_confirmed(&mut self, ctx: u64, zxid: Zxid) {
        self.local.push_back(ReadState { ctx, zxid });
    }

    /// Newest pending sequence number, 0 if none is waiting.
    pub(crate) fn pending_seq(&self) -> u64 {
        self.pending.back().map_or(0, |p| p.seq)
    }

    /// `from` answered a ping carrying `seq`. Returns the newly confirmed
    /// reads of other nodes (local ones are kept to be served here).
    pub(crate) fn ack(
        &mut self,
        from: NodeId,
        seq: u64,
        quorum: usize,
    ) -> Vec<(NodeId, ReadState)> {
        let mut remote = Vec::new();
        if seq == 0 {
            return remote;
        }
        for p in self.pending.iter_mut().take_while(|p| p.seq <= seq) {
            p.acks.insert(from);
        }
        // Older requests have a superset of the acks of newer ones.
        while self.pending.front().is_some_and(|p| p.acks.len() >= quorum) {
            if let Some(p) = self.pending.pop_front() {
                if p.origin == self.me {
                    self.local.push_back(p.read);
                } else {
                    remote.push((p.origin, p.read));
                }
            }
        }
        remote
    }

    pub(crate) fn has_ready(&self, applied: Zxid) -> bool {
        self.local.front().is_some_and(|r| r.zxid <= applied)
    }

    pub(crate) fn take_ready(&mut self, applied: Zxid) -> Vec<ReadState> {
        let mut out = Vec::new();
        while self.local.front().is_some_and(|r| r.zxid <= applied) {
            if let Some(r) = self.local.pop_front() {
                out.push(r);
            }
        }
        out
    }

    /// Drops every request (leadership lost); returns the local contexts
    /// (followers give up on theirs by timeout).
    pub(crate) fn clear(&mut self) -> Vec<u64> {
        let me = self.me;
        let mut ctxs: Vec<u64> = self
            .pending
            .drain(..)
            .filter(|p| p.origin == me)
            .map(|p| p.read.ctx)
            .collect();
        ctxs.extend(self.local.drain(..).map(|r| r.ctx));
        ctxs
    }
}

/// The follower's side.
#[derive(Debug, Default)]
pub(crate) struct FollowerReads {
    /// Sent to the leader, not answered yet: ctx -> ticks waited.
    waiting: BTreeMap<u64, u32>,
    /// Answered; served once the state machine applied the point.
    answered: Vec<ReadState>,
}

impl FollowerReads {
    pub(crate) fn add(&mut self, ctx: u64) {
        self.waiting.insert(ctx, 0);
    }

    /// The leader's answer; false if the request is unknown (given up on,
    /// or a duplicate answer).
    pub(crate) fn answer(&mut self, ctx: u64, zxid: Zxid) -> bool {
        if self.waiting.remove(&ctx).is_none() {
            return false;
        }
        self.answered.push(ReadState { ctx, zxid });
        true
    }

    /// Ages the unanswered requests; returns those waited on for `limit`
    /// ticks (the request or its answer was probably lost).
    pub(crate) fn tick(&mut self, limit: u32) -> Vec<u64> {
        let mut expired = Vec::new();
        self.waiting.retain(|&ctx, age| {
            *age += 1;
            if *age >= limit {
                expired.push(ctx);
                false
            } else {
                true
            }
        });
        expired
    }

    pub(crate) fn has_ready(&self, applied: Zxid) -> bool {
        self.answered.iter().any(|r| r.zxid <= applied)
    }

    pub(crate) fn take_ready(&mut self, applied: Zxid) -> Vec<ReadState> {
        let (ready, rest) = std::mem::take(&mut self.answered)
            .into_iter()
            .partition(|r| r.zxid <= applied);
        self.answered = rest;
        ready
    }

    /// Drops everything (the session ended); returns the contexts.
    pub(crate) fn clear(&mut self) -> Vec<u64> {
        let mut ctxs: Vec<u64> = std::mem::take(&mut self.waiting).into_keys().collect();
        ctxs.extend(self.answered.drain(..).map(|r| r.ctx));
        ctxs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_of_newer_seq_confirms_older_reads_and_routes_remote_ones() {
        let mut r = LeaderReads::new(1);
        let s1 = r.add(1, 100, Zxid(5));
        let s2 = r.add(3, 200, Zxid(6));
        assert_eq!(r.pending_seq(), s2);
        assert!(r.ack(2, s1, 2).is_empty());
        assert!(r.has_ready(Zxid(10)));
        assert_eq!(
            r.ack(2, s2, 2),
            vec![(
                3,
                ReadState {
                    ctx: 200,
                    zxid: Zxid(6)
                }
            )]
        );
        assert_eq!(r.take_ready(Zxid(4)), vec![]);
        assert_eq!(
            r.take_ready(Zxid(5)),
            vec![ReadState {
                ctx: 100,
                zxid: Zxid(5)
            }]
        );
        assert_eq!(r.pending_seq(), 0);
    }

    #[test]
    fn duplicate_acks_do_not_count_twice_and_clear_returns_local_only() {
        let mut r = LeaderReads::new(1);
        let s = r.add(1, 1, Zxid(1));
        r.add(2, 7, Zxid(1));
        r.ack(2, s, 3);
        r.ack(2, s, 3);
        assert!(!r.has_ready(Zxid(10)));
        assert_eq!(r.clear(), vec![1]);
    }

    #[test]
    fn follower_reads_expire_and_wait_for_apply() {
        let mut f = FollowerReads::default();
        f.add(1);
        f.add(2);
        assert!(f.answer(1, Zxid(9)));
        assert!(!f.answer(1, Zxid(9)));
        assert_eq!(f.tick(2), Vec::<u64>::new());
        assert_eq!(f.tick(2), vec![2]);
        assert!(!f.has_ready(Zxid(8)));
        assert_eq!(f.take_ready(Zxid(9)).len(), 1);
        f.add(3);
        assert_eq!(f.clear(), vec![3]);
    }
}
