//! When to compact the history automatically, and to which revision: etcd 3.6's two
//! compactors (server/etcdserver/api/v3compactor) as a sans-IO unit. The caller
//! (auto_compaction.rs) calls [`Compactor::tick`] one [`Compactor::interval`] after its
//! previous call ended, with its clock, the store's revision and whether this member
//! leads, proposes the compaction it is given, and reports it done with
//! [`Compactor::compacted`].
//!
//! Revision mode, retention N: every 5 minutes the leader compacts to `revision - N`,
//! unless that is not positive or is the revision it last compacted to.
//!
//! Periodic mode, retention P: every member samples the revision every tenth of P (of an
//! hour, when P is longer), keeping the samples of the last P plus one interval. The
//! leader compacts to the oldest sample once P has passed since it started, then once
//! every P (every hour when P is longer) since its last success, unless that sample is the
//! revision it last compacted to. A follower keeps sampling and never compacts; one that
//! becomes leader compacts at its next tick if a compaction is due.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use coordbench_kv::Retention;

/// How often the revision compactor looks (etcd's).
pub(crate) const REVISION_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// Periods longer than this compact once per this (etcd's).
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

/// Samples taken per compaction wait (etcd's).
const SAMPLES_PER_WAIT: u32 = 10;

/// What to compact to, given the clock and the revisions seen.
#[derive(Debug)]
pub(crate) enum Compactor {
    Revision(ByRevision),
    Periodic(ByPeriod),
}

#[derive(Debug)]
pub(crate) struct ByRevision {
    keep: i64,
    /// The revision last compacted to (0: none yet).
    last: i64,
}

#[derive(Debug)]
pub(crate) struct ByPeriod {
    interval: Duration,
    /// The wait between compactions after the first.
    every: Duration,
    /// The wait before the next compaction: the whole period before the first.
    wait: Duration,
    /// Revisions sampled every `interval`, oldest first, at most `capacity`.
    samples: VecDeque<i64>,
    capacity: usize,
    last_success: Instant,
    /// The revision last compacted to (0: none yet).
    last: i64,
}

impl Compactor {
    /// A compactor started at `now` on a store at `revision`.
    pub fn new(retention: Retention, now: Instant, revision: i64) -> Compactor {
        match retention {
            Retention::Revisions(keep) => Compactor::Revision(ByRevision { keep, last: 0 }),
            Retention::Period(period) => {
                let every = period.min(LONGEST_WAIT);
                let interval = every / SAMPLES_PER_WAIT;
                let capacity = period.as_nanos() / interval.as_nanos().max(1) + 1;
                Compactor::Periodic(ByPeriod {
                    interval,
                    every,
                    wait: period,
                    samples: VecDeque::from([revision]),
                    capacity: usize::try_from(capacity).unwrap_or(usize::MAX),
                    last_success: now,
                    last: 0,
                })
            }
        }
    }

    /// How long to wait before each call of [`Compactor::tick`]: after start, and after
    /// the previous call and any compaction it asked for.
    pub fn interval(&self) -> Duration {
        match self {
            Compactor::Revision(_) => REVISION_INTERVAL,
            Compactor::Periodic(p) => p.interval,
        }
    }

    /// One look at `now`, the store at `revision`: the revision to compact to, if this
    /// member leads and a compaction is due.
    pub fn tick(&mut self, now: Instant, revision: i64, leader: bool) -> Option<i64> {
        match self {
            Compactor::Revision(r) => {
                let target = revision - r.keep;
                (leader && target > 0 && target != r.last).then_some(target)
            }
            Compactor::Periodic(p) => {
                // Decided on the samples before this one, as etcd samples after its wait.
                let target = p.samples.front().copied().unwrap_or(revision);
                let due = now.saturating_duration_since(p.last_success) >= p.wait;
                let decision = (leader && due && target != p.last).then(|| {
                    p.wait = p.every;
                    target
                });
                p.samples.push_back(revision);
                if p.samples.len() > p.capacity {
                    p.samples.pop_front();
                }
                decision
            }
        }
    }

    /// The compaction to `revision` was applied at `now`, or `revision` was found
    /// compacted already: either way it is not asked for again.
    pub fn compacted(&mut self, revision: i64, now: Instant) {
        match self {
            Compactor::Revision(r) => r.last = revision,
            Compactor::Periodic(p) => {
                p.last = revision;
                p.last_success = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compactor under an injected clock: `tick` advances it one interval.
    struct Clocked {
        c: Compactor,
        now: Instant,
    }

    impl Clocked {
        fn new(retention: Retention, revision: i64) -> Clocked {
            let now = Instant::now();
            Clocked {
                c: Compactor::new(retention, now, revision),
                now,
            }
        }

        /// Advances one interval, looks, and reports any compaction done at once.
        fn tick(&mut self, revision: i64, leader: bool) -> Option<i64> {
            self.now += self.c.interval();
            let target = self.c.tick(self.now, revision, leader);
            if let Some(t) = target {
                self.c.compacted(t, self.now);
            }
            target
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn revision_mode_keeps_n_revisions_every_five_minutes() {
        let mut c = Clocked::new(Retention::Revisions(100), 1);
        assert_eq!(c.c.interval(), secs(300));
        assert_eq!(c.tick(50, true), None, "nothing to compact below 100");
        assert_eq!(c.tick(100, true), None, "revision 0 is never compacted to");
        assert_eq!(c.tick(150, true), Some(50));
        assert_eq!(c.tick(150, true), None, "already compacted to 50");
        assert_eq!(c.tick(300, false), None, "only the leader compacts");
        assert_eq!(c.tick(300, true), Some(200));
    }

    #[test]
    fn revision_mode_asks_again_after_a_failure() {
        let now = Instant::now();
        let mut c = Compactor::new(Retention::Revisions(10), now, 1);
        assert_eq!(c.tick(now, 20, true), Some(10));
        // Not reported compacted: the next look asks again.
        assert_eq!(c.tick(now, 20, true), Some(10));
        c.compacted(10, now);
        assert_eq!(c.tick(now, 20, true), None);
    }

    #[test]
    fn periodic_samples_a_tenth_of_the_period() {
        let c = Compactor::new(Retention::Period(secs(10)), Instant::now(), 1);
        assert_eq!(c.interval(), secs(1));
        let c = Compactor::new(Retention::Period(secs(59 * 60)), Instant::now(), 1);
        assert_eq!(c.interval(), secs(354));
        // Beyond an hour: every 6 minutes.
        let c = Compactor::new(Retention::Period(secs(24 * 3600)), Instant::now(), 1);
        assert_eq!(c.interval(), secs(360));
    }

    /// Period 10 s, one write a second: the revision at time t is t + 1.
    #[test]
    fn periodic_waits_a_period_then_compacts_every_period() {
        let mut c = Clocked::new(Retention::Period(secs(10)), 1);
        let mut compactions = Vec::new();
        for t in 1..=40 {
            if let Some(rev) = c.tick(t + 1, true) {
                compactions.push((t, rev));
            }
        }
        // First after the whole period, to the revision at start; then every period, to
        // the revision one period and one interval before.
        assert_eq!(compactions, vec![(10, 1), (20, 10), (30, 20), (40, 30)]);
    }

    #[test]
    fn periodic_over_an_hour_compacts_hourly_keeping_the_period() {
        // One write a second: the revision is 1 + the seconds since start.
        let mut c = Clocked::new(Retention::Period(secs(2 * 3600)), 1);
        let start = c.now;
        let mut compactions = Vec::new();
        for _ in 0..50 {
            let elapsed = (c.now + c.c.interval() - start).as_secs() as i64;
            if let Some(rev) = c.tick(elapsed + 1, true) {
                compactions.push((elapsed / 60, (rev - 1) / 60));
            }
        }
        // In minutes: first at 2 h to the start; then hourly, keeping 2 h and one 6-minute
        // interval.
        assert_eq!(
            compactions,
            vec![(120, 0), (180, 54), (240, 114), (300, 174)]
        );
    }

    #[test]
    fn periodic_only_the_leader_compacts_and_a_new_leader_catches_up() {
        let mut c = Clocked::new(Retention::Period(secs(10)), 1);
        for t in 1..=25 {
            assert_eq!(c.tick(t + 1, false), None, "a follower never compacts");
        }
        // Leader from t = 26: due at once (no success yet), to the revision 11 s before.
        assert_eq!(c.tick(27, true), Some(16));
        assert_eq!(c.tick(28, true), None, "then a whole period later");
    }

    #[test]
    fn periodic_skips_a_revision_already_compacted_and_retries_a_failure() {
        let mut c = Compactor::new(Retention::Period(secs(10)), Instant::now(), 5);
        let start = Instant::now();
        let at = |s| start + secs(s);
        // No writes: the oldest sample stays at 5.
        for t in 1..10 {
            assert_eq!(c.tick(at(t), 5, true), None);
        }
        assert_eq!(c.tick(at(10), 5, true), Some(5));
        // Not reported: asked again at the next look.
        assert_eq!(c.tick(at(11), 5, true), Some(5));
        c.compacted(5, at(11));
        assert_eq!(c.tick(at(21), 5, true), None, "5 again: nothing to do");
        assert_eq!(
            c.tick(at(22), 9, true),
            None,
            "the oldest sample is still 5"
        );
    }
}
