//! Linearizable reads via ReadIndex. The leader records the index a read must
//! observe, proves it is still leader by a heartbeat round acknowledged by a
//! quorum, and releases the read once the state machine has applied that
//! index.
//!
//! Each request gets an increasing sequence number carried by heartbeats.
//! An ack of sequence `s` proves leadership at a moment after every request
//! `<= s` was registered, so it counts for all of them.

use std::collections::{BTreeSet, VecDeque};

use crate::message::NodeId;
use crate::ready::ReadState;

#[derive(Debug)]
struct Pending {
    seq: u64,
    ctx: u64,
    index: u64,
    acks: BTreeSet<NodeId>,
}

#[derive(Debug, Default)]
pub(crate) struct ReadOnly {
    last_seq: u64,
    pending: VecDeque<Pending>,
    /// Leadership confirmed; waiting for `applied >= index`. Indexes are
    /// non-decreasing because they derive from a monotonic commit index.
    confirmed: VecDeque<ReadState>,
}

impl ReadOnly {
    /// Registers a read; returns the sequence number heartbeats must carry.
    pub(crate) fn add(&mut self, ctx: u64, index: u64, leader: NodeId) -> u64 {
        self.last_seq += 1;
        let mut acks = BTreeSet::new();
        acks.insert(leader);
        self.pending.push_back(Pending {
            seq: self.last_seq,
            ctx,
            index,
            acks,
        });
        self.last_seq
    }

    /// For a single-voter cluster no confirmation round is needed.
    pub(crate) fn add_confirmed(&mut self, ctx: u64, index: u64) {
        self.confirmed.push_back(ReadState { ctx, index });
    }

    /// Newest pending sequence number, 0 if none is waiting.
    pub(crate) fn pending_seq(&self) -> u64 {
        self.pending.back().map_or(0, |p| p.seq)
    }

    /// `from` acknowledged a heartbeat carrying `seq`.
    pub(crate) fn ack(&mut self, from: NodeId, seq: u64, quorum: usize) {
        if seq == 0 {
            return;
        }
        for p in self.pending.iter_mut().take_while(|p| p.seq <= seq) {
            p.acks.insert(from);
        }
        // Older requests have a superset of the acks of newer ones.
        while self.pending.front().is_some_and(|p| p.acks.len() >= quorum) {
            if let Some(p) = self.pending.pop_front() {
                self.confirmed.push_back(ReadState {
                    ctx: p.ctx,
                    index: p.index,
                });
            }
        }
    }

    pub(crate) fn has_ready(&self, applied: u64) -> bool {
        self.confirmed.front().is_some_and(|r| r.index <= applied)
    }

    pub(crate) fn take_ready(&mut self, applied: u64) -> Vec<ReadState> {
        let mut out = Vec::new();
        while self.confirmed.front().is_some_and(|r| r.index <= applied) {
            if let Some(r) = self.confirmed.pop_front() {
                out.push(r);
            }
        }
        out
    }

    /// Drops every request (leadership lost); returns their contexts.
    pub(crate) fn clear(&mut self) -> Vec<u64> {
        let mut ctxs: Vec<u64> = self.pending.drain(..).map(|p| p.ctx).collect();
        ctxs.extend(self.confirmed.drain(..).map(|r| r.ctx));
        ctxs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_of_newer_seq_confirms_older_reads() {
        let mut r = ReadOnly::default();
        let s1 = r.add(100, 5, 1);
        let s2 = r.add(200, 6, 1);
        assert_eq!(r.pending_seq(), s2);
        r.ack(2, s1, 2);
        assert!(r.has_ready(10));
        r.ack(3, s2, 2);
        assert_eq!(
            r.take_ready(5),
            vec![ReadState { ctx: 100, index: 5 }],
            "second read waits for apply"
        );
        assert_eq!(r.take_ready(6), vec![ReadState { ctx: 200, index: 6 }]);
        assert_eq!(r.pending_seq(), 0);
    }

    #[test]
    fn duplicate_acks_do_not_count_twice() {
        let mut r = ReadOnly::default();
        let s = r.add(1, 1, 1);
        r.ack(2, s, 3);
        r.ack(2, s, 3);
        assert!(!r.has_ready(10));
        r.ack(3, s, 3);
        assert!(r.has_ready(10));
        assert_eq!(r.clear(), vec![1]);
    }
}
