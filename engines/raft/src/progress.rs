//! The leader's view of one follower's replication: what it has (`matched`),
//! what to send next (`next`), and the flow-control state.
//!
//! * `Probe`: the leader does not know where the logs agree; it sends one
//!   AppendEntries and waits for the answer before sending another.
//! * `Replicate`: logs agree up to `matched`; the leader pipelines up to
//!   `max_inflight_msgs` appends, advancing `next` optimistically.
//! * `Snapshot`: the entries the follower needs were compacted; an
//!   InstallSnapshot is outstanding and nothing else is sent.

use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProgressState {
    Probe,
    Replicate,
    Snapshot { pending: u64 },
}

/// Last indices of the appends in flight, oldest first.
#[derive(Clone, Debug)]
pub(crate) struct Inflights {
    cap: usize,
    queue: VecDeque<u64>,
}

impl Inflights {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            queue: VecDeque::new(),
        }
    }

    pub(crate) fn full(&self) -> bool {
        self.queue.len() >= self.cap
    }

    pub(crate) fn add(&mut self, last_index: u64) {
        self.queue.push_back(last_index);
    }

    /// An ack up to `index` frees every append that ended at or before it.
    pub(crate) fn free_to(&mut self, index: u64) {
        while self.queue.front().is_some_and(|&i| i <= index) {
            self.queue.pop_front();
        }
    }

    /// Makes room for one more message (used when the window is full but the
    /// follower answered a heartbeat, so some appends were probably lost).
    pub(crate) fn free_first(&mut self) {
        self.queue.pop_front();
    }

    pub(crate) fn reset(&mut self) {
        self.queue.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Progress {
    pub(crate) matched: u64,
    pub(crate) next: u64,
    pub(crate) state: ProgressState,
    /// In `Probe`: an append was sent and is unanswered.
    pub(crate) probe_sent: bool,
    pub(crate) inflights: Inflights,
    /// Heard from this follower in the current check-quorum window.
    pub(crate) recent_active: bool,
    /// Ticks spent in `Snapshot` state, to resend a lost snapshot.
    pub(crate) snapshot_ticks: u32,
}

impl Progress {
    pub(crate) fn new(next: u64, max_inflight: usize) -> Self {
        Self {
            matched: 0,
            next,
            state: ProgressState::Probe,
            probe_sent: false,
            inflights: Inflights::new(max_inflight),
            recent_active: false,
            snapshot_ticks: 0,
        }
    }

    pub(crate) fn become_probe(&mut self) {
        self.state = ProgressState::Probe;
        self.next = self.matched + 1;
        self.probe_sent = false;
        self.inflights.reset();
    }

    pub(crate) fn become_replicate(&mut self) {
        self.state = ProgressState::Replicate;
        self.next = self.matched + 1;
        self.probe_sent = false;
        self.inflights.reset();
    }

    pub(crate) fn become_snapshot(&mut self, index: u64) {
        self.state = ProgressState::Snapshot { pending: index };
        self.probe_sent = false;
        self.snapshot_ticks = 0;
        self.inflights.reset();
    }

    /// Records an acknowledgement up to `index`; true if `matched` grew.
    pub(crate) fn maybe_update(&mut self, index: u64) -> bool {
        let updated = index > self.matched;
        if updated {
            self.matched = index;
            self.probe_sent = false;
        }
        self.next = self.next.max(index + 1);
        updated
    }

    /// Handles a rejection of the append whose prev index was `rejected`;
    /// `hint` is the highest index the logs may still agree on. Returns false
    /// for stale rejections (answers to appends sent before a later
    /// decision), which must not move `next` backwards again.
    pub(crate) fn maybe_decr_to(&mut self, rejected: u64, hint: u64) -> bool {
        if self.state == ProgressState::Replicate {
            if rejected <= self.matched {
                return false;
            }
            self.next = self.matched + 1;
            return true;
        }
        if self.next.checked_sub(1) != Some(rejected) {
            return false;
        }
        self.next = rejected.min(hint.saturating_add(1)).max(self.matched + 1);
        self.probe_sent = false;
        true
    }

    pub(crate) fn is_paused(&self) -> bool {
        match self.state {
            ProgressState::Probe => self.probe_sent,
            ProgressState::Replicate => self.inflights.full(),
            ProgressState::Snapshot { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflights_window() {
        let mut f = Inflights::new(3);
        f.add(2);
        f.add(4);
        f.add(6);
        assert!(f.full());
        f.free_to(4);
        assert_eq!(f.len(), 1);
        f.free_first();
        assert_eq!(f.len(), 0);
    }

    #[test]
    fn probe_pauses_until_answer() {
        let mut p = Progress::new(5, 4);
        assert!(!p.is_paused());
        p.probe_sent = true;
        assert!(p.is_paused());
        assert!(p.maybe_update(4));
        assert!(!p.is_paused());
        assert_eq!((p.matched, p.next), (4, 5));
    }

    #[test]
    fn decr_ignores_stale_rejections() {
        let mut p = Progress::new(10, 4);
        // Probe sent with prev index 9; a rejection for prev 7 is stale.
        assert!(!p.maybe_decr_to(7, 3));
        assert!(p.maybe_decr_to(9, 3));
        assert_eq!(p.next, 4);
        // next is never moved below matched + 1.
        p.matched = 5;
        p.next = 8;
        assert!(p.maybe_decr_to(7, 1));
        assert_eq!(p.next, 6);
    }

    #[test]
    fn decr_in_replicate_falls_back_to_matched() {
        let mut p = Progress::new(10, 4);
        p.matched = 6;
        p.become_replicate();
        p.next = 12;
        assert!(!p.maybe_decr_to(5, 0), "already matched past it: stale");
        assert!(p.maybe_decr_to(9, 0));
        assert_eq!(p.next, 7);
    }
}
