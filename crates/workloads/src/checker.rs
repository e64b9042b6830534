//! The mutual-exclusion checker: judges recorded critical sections (lock sections, and
//! leadership intervals of elections, where an overlap is a split brain).
//!
//! Every section is (lock, client, token, requested, enter, exit, released) on the run's one
//! monotonic clock. Two sections of one lock that overlap in time are a violation; the
//! tokens of successive holders of one lock must strictly increase. Handover latency is
//! taken from release acknowledged to the next holder's grant, counted only when the next
//! holder was already waiting (otherwise it measures idle time, not a handover).

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::barrier::BarrierCheck;
use crate::election::ElectionCheck;
use crate::fencing::FencingCheck;
use crate::herd::HerdSummary;
use crate::histogram::latency_histogram;
use crate::propagation::PropagationCheck;
use crate::register::RegisterCheck;
use crate::versions::VersionCheck;
use serde::Serialize;

/// One critical section as a client lived it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub lock: String,
    pub client: usize,
    pub token: i64,
    /// lock() was called.
    pub requested: Duration,
    /// lock() returned: the client believes it holds the lock from here.
    pub enter: Duration,
    /// The client stopped using the lock (before sending the release).
    pub exit: Duration,
    /// The release was acknowledged; `None` if it failed or never happened.
    pub released: Option<Duration>,
}

/// What a lock history shows.
#[derive(Debug, Clone, Default)]
pub struct LockCheck {
    pub sections: u64,
    /// Pairs of overlapping sections of the same lock.
    pub violations: u64,
    /// Successive holders whose token did not increase.
    pub token_regressions: u64,
    /// Handover latencies in microseconds (within the window).
    pub handover_us: Option<Histogram<u64>>,
}

/// A workload's verdict, stored in run.json and summarized in summary.csv. Each workload
/// fills in its own part.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub lock: Option<LockCheck>,
    /// Lock and election: what waiters received and sent per release.
    pub herd: Option<HerdSummary>,
    pub election: Option<ElectionCheck>,
    pub discovery: Option<PropagationCheck>,
    pub config_watch: Option<VersionCheck>,
    /// register: the linearizability verdict.
    pub register: Option<RegisterCheck>,
    /// Lock with holder pauses or a protected resource: unsafe sections, stale writes.
    pub fencing: Option<FencingCheck>,
    /// barrier: barriers passed and early exits.
    pub barrier: Option<BarrierCheck>,
}

impl CheckReport {
    /// Safety violations of any kind (0 for workloads without a safety property): lock
    /// overlaps and token regressions, election split brains and token regressions.
    pub fn violations(&self) -> u64 {
        let lock = self
            .lock
            .as_ref()
            .map_or(0, |l| l.violations + l.token_regressions);
        let election = self.election.as_ref().map_or(0, |e| {
            e.intervals.violations + e.intervals.token_regressions
        });
        let barrier = self.barrier.as_ref().map_or(0, |b| b.violations);
        lock + election + barrier
    }

    /// Handover latencies, µs: lock or election.
    pub fn handovers(&self) -> Option<&Histogram<u64>> {
        self.lock
            .as_ref()
            .or(self.election.as_ref().map(|e| &e.intervals))
            .and_then(|l| l.handover_us.as_ref())
    }
}

/// A serializable digest of a [`LockCheck`].
#[derive(Debug, Clone, Serialize)]
pub struct LockCheckSummary {
    pub sections: u64,
    pub violations: u64,
    pub token_regressions: u64,
    pub handovers: u64,
    pub handover_p50_us: Option<u64>,
    pub handover_p99_us: Option<u64>,
    pub handover_max_us: Option<u64>,
}

impl LockCheck {
    pub fn summary(&self) -> LockCheckSummary {
        let h = self.handover_us.as_ref().filter(|h| !h.is_empty());
        LockCheckSummary {
            sections: self.sections,
            violations: self.violations,
            token_regressions: self.token_regressions,
            handovers: h.map_or(0, |h| h.len()),
            handover_p50_us: h.map(|h| h.value_at_quantile(0.5)),
            handover_p99_us: h.map(|h| h.value_at_quantile(0.99)),
            handover_max_us: h.map(|h| h.max()),
        }
    }
}

/// Checks all sections; handovers are counted when the new holder entered inside `window`.
pub fn check_sections(sections: &[Section], window: (Duration, Duration)) -> LockCheck {
    let mut check = LockCheck::of_count(sections);
    let mut handovers = latency_histogram();
    for list in by_lock(sections).values_mut() {
        list.sort_by_key(|s| (s.enter, s.exit));
        // The latest exit among earlier sections: any later enter before it overlaps.
        let mut busy_until = Duration::ZERO;
        let mut previous: Option<&Section> = None;
        for s in list.iter() {
            if let Some(prev) = previous {
                if s.enter < busy_until {
                    check.violations += 1;
                }
                // A holder whose release failed (its answer lost in a failover) and that
                // finds its own key still at the head on its next call holds on: the same
                // client with the same token is that re-entry, not a regression.
                let reentry = s.token == prev.token && s.client == prev.client;
                if s.token < prev.token || (s.token == prev.token && !reentry) {
                    check.token_regressions += 1;
                }
                record_handover(&mut handovers, prev, s, window);
            }
            busy_until = busy_until.max(s.exit);
            previous = Some(s);
        }
    }
    check.handover_us = Some(handovers);
    check
}

/// Each lock's sections.
fn by_lock(sections: &[Section]) -> BTreeMap<&str, Vec<&Section>> {
    let mut by_lock: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for s in sections {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    by_lock
}

impl LockCheck {
    /// Nothing found yet among `sections`.
    fn of_count(sections: &[Section]) -> Self {
        LockCheck {
            sections: sections.len() as u64,
            ..Default::default()
        }
    }
}

/// The handover from `prev` to `next`, when `next` was already waiting at the release and
/// entered inside `window`.
fn record_handover(
    handovers: &mut Histogram<u64>,
    prev: &Section,
    next: &Section,
    window: (Duration, Duration),
) {
    if let Some(released) = prev.released {
        let waited = next.requested <= released;
        if waited && next.enter >= window.0 && next.enter <= window.1 {
            let us = next.enter.saturating_sub(released).as_micros() as u64;
            handovers.saturating_record(us);
        }
    }
}

/// Checks sections recorded by several processes whose clocks agree only to within
/// `uncertainty`: the fencing tokens (etcd's create revision, ZooKeeper's czxid), not the
/// clocks, order each lock's holders. A section overlaps an earlier holder's (lower token)
/// only when it entered more than `uncertainty` before that holder's exit; a token
/// regression is a higher token that entered more than `uncertainty` before a lower one,
/// or one token held by two clients. Handovers are timed across the processes' clocks, so
/// each carries up to `uncertainty` of error.
pub fn check_sections_by_token(
    sections: &[Section],
    window: (Duration, Duration),
    uncertainty: Duration,
) -> LockCheck {
    let mut check = LockCheck::of_count(sections);
    let mut handovers = latency_histogram();
    for list in by_lock(sections).values_mut() {
        list.sort_by_key(|s| (s.token, s.enter));
        let mut busy_until = Duration::ZERO;
        for pair in list.windows(2) {
            let (prev, s) = (pair[0], pair[1]);
            busy_until = busy_until.max(prev.exit);
            let reentry = s.token == prev.token && s.client == prev.client;
            if (s.token == prev.token && !reentry) || s.enter + uncertainty < prev.enter {
                check.token_regressions += 1;
            } else if s.enter + uncertainty < busy_until {
                check.violations += 1;
            }
            record_handover(&mut handovers, prev, s, window);
        }
    }
    check.handover_us = Some(handovers);
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn section(
        lock: &str,
        token: i64,
        requested: u64,
        enter: u64,
        exit: u64,
        released: u64,
    ) -> Section {
        Section {
            lock: lock.into(),
            client: token as usize,
            token,
            requested: ms(requested),
            enter: ms(enter),
            exit: ms(exit),
            released: Some(ms(released)),
        }
    }

    const ALL: (Duration, Duration) = (Duration::ZERO, Duration::MAX);

    #[test]
    fn across_processes_tokens_order_the_holders_within_the_clock_uncertainty() {
        // Back to back by token, but the second process's clock reads 2 ms early.
        let clean = vec![
            section("a", 1, 0, 0, 10, 11),
            section("a", 2, 1, 9, 20, 21),
            section("b", 7, 0, 0, 5, 6),
        ];
        let c = check_sections_by_token(&clean, ALL, ms(2));
        assert_eq!((c.sections, c.violations, c.token_regressions), (3, 0, 0));
        // Beyond the uncertainty it is an overlap.
        let c = check_sections_by_token(&clean, ALL, ms(0));
        assert_eq!((c.violations, c.token_regressions), (1, 0));
        // A higher token that entered well before a lower one: the tokens regressed.
        let regressed = vec![
            section("a", 1, 0, 50, 60, 61),
            section("a", 2, 0, 10, 20, 21),
        ];
        let c = check_sections_by_token(&regressed, ALL, ms(2));
        assert_eq!((c.violations, c.token_regressions), (0, 1));
        // One token, two clients.
        let mut twice = vec![section("a", 3, 0, 0, 5, 6), section("a", 3, 0, 10, 15, 16)];
        twice[1].client = 9;
        assert_eq!(
            check_sections_by_token(&twice, ALL, ms(2)).token_regressions,
            1
        );
    }

    #[test]
    fn back_to_back_sections_are_clean_and_handovers_are_measured() {
        let s = vec![
            section("a", 1, 0, 0, 10, 12),
            section("a", 2, 1, 15, 20, 21),
        ];
        let c = check_sections(&s, ALL);
        assert_eq!((c.violations, c.token_regressions), (0, 0));
        let h = c.handover_us.unwrap();
        assert_eq!(h.len(), 1);
        assert!(h.equivalent(h.max(), 3000), "handover {}", h.max());
    }

    #[test]
    fn overlapping_sections_of_one_lock_are_violations() {
        let s = vec![section("a", 1, 0, 0, 10, 11), section("a", 2, 0, 5, 12, 13)];
        assert_eq!(check_sections(&s, ALL).violations, 1);
    }

    #[test]
    fn a_section_inside_a_long_earlier_one_is_caught() {
        // The middle section ends early; the third still overlaps the first.
        let s = vec![
            section("a", 1, 0, 0, 100, 101),
            section("a", 2, 0, 10, 20, 21),
            section("a", 3, 0, 30, 40, 41),
        ];
        assert_eq!(check_sections(&s, ALL).violations, 2);
    }

    #[test]
    fn sections_of_different_locks_may_overlap() {
        let s = vec![section("a", 1, 0, 0, 10, 11), section("b", 1, 0, 5, 12, 13)];
        let c = check_sections(&s, ALL);
        assert_eq!((c.violations, c.token_regressions), (0, 0));
    }

    #[test]
    fn a_token_that_does_not_increase_is_a_regression() {
        let mut s = vec![
            section("a", 5, 0, 0, 10, 11),
            section("a", 5, 0, 12, 14, 15),
        ];
        s[1].client = 9;
        assert_eq!(check_sections(&s, ALL).token_regressions, 1);
        let s = vec![
            section("a", 5, 0, 0, 10, 11),
            section("a", 4, 0, 12, 14, 15),
        ];
        assert_eq!(check_sections(&s, ALL).token_regressions, 1);
    }

    #[test]
    fn the_same_holder_reentering_with_its_own_token_is_no_regression() {
        // The first release failed; the client found its key still at the head.
        let mut s = vec![
            section("a", 5, 0, 0, 10, 11),
            section("a", 5, 12, 12, 14, 15),
        ];
        s[0].released = None;
        let c = check_sections(&s, ALL);
        assert_eq!((c.violations, c.token_regressions), (0, 0));
    }

    #[test]
    fn idle_gaps_and_handovers_outside_the_window_are_not_handovers() {
        // The second client asked only after the release: idle time, not a handover.
        let s = vec![
            section("a", 1, 0, 0, 10, 11),
            section("a", 2, 50, 51, 60, 61),
        ];
        assert_eq!(check_sections(&s, ALL).handover_us.unwrap().len(), 0);
        let s = vec![
            section("a", 1, 0, 0, 10, 11),
            section("a", 2, 1, 12, 20, 21),
        ];
        assert_eq!(
            check_sections(&s, (ms(100), ms(200)))
                .handover_us
                .unwrap()
                .len(),
            0
        );
    }
}
