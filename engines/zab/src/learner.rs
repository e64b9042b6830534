//! [`Learner`]: what a leader tracks about one follower (ZooKeeper's
//! LearnerHandler): how far it got with discovery and synchronization, and,
//! once synced, the pipelined flow of proposal batches to it.

use std::collections::VecDeque;

use crate::zxid::Zxid;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LearnerState {
    /// Sent FOLLOWERINFO; waiting for its ACKEPOCH.
    Discovering,
    /// Acknowledged the epoch; synchronized once discovery completes.
    EpochAcked,
    /// NEWLEADER sent; waiting for its acknowledgement.
    Syncing { sync_id: u64 },
    /// Holds the leader's history; receives proposals.
    Synced,
}

#[derive(Debug)]
pub(crate) struct Learner {
    pub(crate) state: LearnerState,
    /// Election round of the follower's current attempt to follow us.
    pub(crate) round: u64,
    /// From ACKEPOCH: counts toward establishing the epoch.
    pub(crate) fresh: bool,
    /// From ACKEPOCH: the follower's (current epoch, last zxid).
    pub(crate) reported: (u32, Zxid),
    /// Durably acknowledged: the follower holds our history up to here.
    pub(crate) acked: Zxid,
    /// Last zxid sent: the next batch follows it.
    pub(crate) next: Zxid,
    /// Last zxid of each batch in flight.
    inflight: VecDeque<Zxid>,
    /// Ticks without acknowledgement progress while batches are in flight.
    pub(crate) stall: u32,
    /// Ticks since the last discovery / sync message was (re)sent.
    pub(crate) resend_elapsed: u32,
    /// Heard from in the current check-quorum window.
    pub(crate) active: bool,
}

impl Learner {
    pub(crate) fn new(round: u64) -> Self {
        Self {
            state: LearnerState::Discovering,
            round,
            fresh: false,
            reported: (0, Zxid::ZERO),
            acked: Zxid::ZERO,
            next: Zxid::ZERO,
            inflight: VecDeque::new(),
            stall: 0,
            resend_elapsed: 0,
            active: true,
        }
    }

    /// In the leader's session (synchronized now or before): its
    /// acknowledgements count.
    pub(crate) fn in_session(&self) -> bool {
        matches!(
            self.state,
            LearnerState::Syncing { .. } | LearnerState::Synced
        )
    }

    pub(crate) fn synced(&self) -> bool {
        self.state == LearnerState::Synced
    }

    /// Synchronization acknowledged: the follower holds our history up to
    /// `last`; proposals continue from there.
    pub(crate) fn become_synced(&mut self, last: Zxid) {
        self.state = LearnerState::Synced;
        self.acked = self.acked.max(last);
        self.next = last;
        self.inflight.clear();
        self.stall = 0;
    }

    pub(crate) fn window_full(&self, max: usize) -> bool {
        self.inflight.len() >= max
    }

    pub(crate) fn sent(&mut self, last: Zxid) {
        self.next = last;
        self.inflight.push_back(last);
    }

    pub(crate) fn on_ack(&mut self, z: Zxid) {
        if z > self.acked {
            self.acked = z;
            self.stall = 0;
        }
        while self.inflight.front().is_some_and(|&b| b <= z) {
            self.inflight.pop_front();
        }
    }

    /// Sends again from `from` (a gap report, or no progress for a while).
    pub(crate) fn rewind(&mut self, from: Zxid) {
        self.next = from;
        self.inflight.clear();
        self.stall = 0;
    }

    /// Counts a tick; true when in-flight batches went unanswered too long.
    pub(crate) fn tick_stalled(&mut self, limit: u32) -> bool {
        if self.next <= self.acked {
            self.stall = 0;
            return false;
        }
        self.stall += 1;
        self.stall >= limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_opens_on_acks_and_stalls_rewind() {
        let mut l = Learner::new(1);
        l.become_synced(Zxid(3));
        l.sent(Zxid(5));
        l.sent(Zxid(7));
        assert!(l.window_full(2));
        l.on_ack(Zxid(5));
        assert!(!l.window_full(2));
        assert_eq!(l.acked, Zxid(5));
        assert!(!l.tick_stalled(2));
        assert!(l.tick_stalled(2));
        l.rewind(l.acked);
        assert_eq!(l.next, Zxid(5));
        assert!(!l.tick_stalled(2));
    }
}
