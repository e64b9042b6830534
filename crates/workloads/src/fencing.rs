//! What holder pauses did: the record the lock workload keeps of every paused section and
//! protected write, and the figures judged from it (docs/reference.md, "Holder pauses").
//!
//! A paused section is **unsafe** when, by the time its holder resumed, another holder of
//! the same lock had entered: the paused holder still believes it holds a lock someone else
//! holds. The write it makes on resuming is then a **stale write**, accepted or rejected by
//! the protected resource (or failed in flight). Every holder writes to the in-process
//! resource *before* its enter time is stamped, so an entry the checker sees before a
//! resumption was seen by the resource before the stale write that follows it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::resource::{Protection, WriteOutcome};
use crate::Section;

/// One paused section as its holder lived it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PausedSection {
    /// Index of the section in the lock workload's section log.
    pub section: usize,
    /// When the holder resumed from its pause (run clock).
    pub resumed: Duration,
    /// What the resource did with the holder's write right after resuming.
    pub write_after: WriteOutcome,
}

/// Everything the actors record about pauses and protected writes.
#[derive(Debug, Clone, Default)]
pub struct FencingLog {
    pub paused: Vec<PausedSection>,
    /// Releases of paused sections that failed because the lock was gone.
    pub lost_locks: u64,
    /// Every protected write, and those the resource rejected.
    pub writes: u64,
    pub writes_rejected: u64,
}

impl FencingLog {
    pub fn record_write(&mut self, outcome: WriteOutcome) {
        self.writes += 1;
        if outcome == WriteOutcome::Rejected {
            self.writes_rejected += 1;
        }
    }
}

/// The figures of a run with holder pauses or a protected resource (run.json
/// `results.holder_pauses`, summary.csv).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FencingCheck {
    /// `--protect`: none, token or txn.
    pub protect: &'static str,
    pub paused_sections: u64,
    pub unsafe_sections: u64,
    pub stale_writes_accepted: u64,
    pub stale_writes_rejected: u64,
    /// Stale writes that failed in flight (neither accepted nor rejected).
    pub stale_writes_failed: u64,
    pub lost_locks: u64,
    /// Protected writes of all holders, and those the resource rejected (stale or not).
    pub protected_writes: u64,
    pub protected_writes_rejected: u64,
}

/// Judges `log` against the run's `sections` (whole run, like the other safety checks).
pub fn check_pauses(
    sections: &[Section],
    log: &FencingLog,
    protection: Protection,
) -> FencingCheck {
    // Per lock, every section's enter time, sorted: whether someone entered in between is
    // then one binary search.
    let mut enters: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for s in sections {
        enters.entry(&s.lock).or_default().push(s.enter);
    }
    for list in enters.values_mut() {
        list.sort_unstable();
    }
    let mut check = FencingCheck {
        protect: protection.name(),
        paused_sections: log.paused.len() as u64,
        lost_locks: log.lost_locks,
        protected_writes: log.writes,
        protected_writes_rejected: log.writes_rejected,
        ..Default::default()
    };
    for p in &log.paused {
        let Some(own) = sections.get(p.section) else {
            continue;
        };
        let list = &enters[own.lock.as_str()];
        let next = list.partition_point(|e| *e <= own.enter);
        let overtaken = list.get(next).is_some_and(|e| *e <= p.resumed);
        if !overtaken {
            continue;
        }
        check.unsafe_sections += 1;
        match p.write_after {
            WriteOutcome::Accepted => check.stale_writes_accepted += 1,
            WriteOutcome::Rejected => check.stale_writes_rejected += 1,
            WriteOutcome::Failed => check.stale_writes_failed += 1,
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn section(lock: &str, token: i64, enter: u64, exit: u64) -> Section {
        Section {
            lock: lock.into(),
            client: token as usize,
            token,
            requested: ms(enter),
            enter: ms(enter),
            exit: ms(exit),
            released: None,
        }
    }

    fn paused(section: usize, resumed: u64, write_after: WriteOutcome) -> PausedSection {
        PausedSection {
            section,
            resumed: ms(resumed),
            write_after,
        }
    }

    #[test]
    fn a_pause_overtaken_by_another_holder_is_unsafe_and_its_write_stale() {
        let sections = vec![
            section("a", 1, 0, 3000),    // paused 3 s; the lock expired under it
            section("a", 2, 2200, 2300), // entered while 1 was paused
            section("a", 3, 2400, 5400), // paused, but nobody entered before it resumed
            section("b", 4, 100, 3100),  // another lock's pause: b had no other holder
        ];
        let log = FencingLog {
            paused: vec![
                paused(0, 3000, WriteOutcome::Accepted),
                paused(2, 5400, WriteOutcome::Accepted),
                paused(3, 3100, WriteOutcome::Accepted),
            ],
            lost_locks: 1,
            writes: 8,
            writes_rejected: 0,
        };
        let c = check_pauses(&sections, &log, Protection::None);
        assert_eq!((c.paused_sections, c.unsafe_sections), (3, 1));
        assert_eq!((c.stale_writes_accepted, c.stale_writes_rejected), (1, 0));
        assert_eq!(
            (c.lost_locks, c.protected_writes, c.protect),
            (1, 8, "none")
        );
    }

    #[test]
    fn stale_writes_are_counted_by_what_the_resource_did() {
        let sections = vec![
            section("a", 1, 0, 3000),
            section("a", 2, 1000, 1100),
            section("a", 3, 1200, 4000),
            section("a", 4, 3500, 3600),
            section("a", 5, 3700, 9000),
            section("a", 6, 8000, 8100),
        ];
        let log = FencingLog {
            paused: vec![
                paused(0, 3000, WriteOutcome::Rejected),
                paused(2, 4000, WriteOutcome::Failed),
                paused(4, 9000, WriteOutcome::Rejected),
            ],
            ..Default::default()
        };
        let c = check_pauses(&sections, &log, Protection::Token);
        assert_eq!(c.unsafe_sections, 3);
        assert_eq!(
            (
                c.stale_writes_accepted,
                c.stale_writes_rejected,
                c.stale_writes_failed
            ),
            (0, 2, 1)
        );
    }

    #[test]
    fn an_entry_after_the_resumption_does_not_make_a_pause_unsafe() {
        let sections = vec![section("a", 1, 0, 3000), section("a", 2, 3001, 3100)];
        let log = FencingLog {
            paused: vec![paused(0, 3000, WriteOutcome::Accepted)],
            ..Default::default()
        };
        assert_eq!(
            check_pauses(&sections, &log, Protection::None).unsafe_sections,
            0
        );
    }
}
