//! Election timing a run asks for (`--election-timeout MIN-MAX`, `--heartbeat D`), the
//! checks every target shares, and the record of what a started cluster made of it
//! (run.json `cluster.election_timing`). Each provisioner maps the request onto its own
//! settings: etcd's flags (`provision::etcd`), the engines' ticks (`provision::raft`, also
//! for zab) and ZooKeeper's tickTime and limits (`provision::zookeeper`); docs/reference.md
//! ("Election timing") has the table.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use coordbench_results::timeout_range::{self as range, TimeoutRange};

/// Minimum election timeout per heartbeat when only the timeout is given: etcd's and the
/// engines' default ratio (100 ms heartbeat, 1 s timeout).
pub const HEARTBEATS_PER_TIMEOUT: u32 = 10;

/// What a run asked for; `None` leaves the target's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ElectionTiming {
    pub timeout: Option<TimeoutRange>,
    /// Whole milliseconds, at least 1.
    pub heartbeat_ms: Option<u32>,
}

impl ElectionTiming {
    /// Checks what holds for every target: a heartbeat of whole milliseconds, shorter than
    /// the shortest election timeout. Errors are one line naming the option.
    pub fn new(timeout: Option<TimeoutRange>, heartbeat: Option<Duration>) -> Result<Self, String> {
        let heartbeat_ms = match heartbeat {
            None => None,
            Some(d) => match range::whole_ms(d) {
                Some(ms) if ms > 0 => Some(ms),
                _ => {
                    return Err(format!(
                        "--heartbeat must be a whole number of milliseconds, at least 1ms (got {})",
                        humantime::format_duration(d)
                    ))
                }
            },
        };
        let timing = ElectionTiming {
            timeout,
            heartbeat_ms,
        };
        if let (Some(t), Some(hb)) = (timeout, heartbeat_ms) {
            timing.check_heartbeat_below(t.min_ms, hb)?;
        }
        Ok(timing)
    }

    /// Nothing asked for: every target keeps its defaults.
    pub fn is_default(&self) -> bool {
        self.timeout.is_none() && self.heartbeat_ms.is_none()
    }

    /// The heartbeat, ms: as asked; else, with a timeout asked for, its MIN over
    /// [`HEARTBEATS_PER_TIMEOUT`]; else the target's `default_ms`.
    pub fn heartbeat_or(&self, default_ms: u32) -> u32 {
        self.heartbeat_ms
            .or(self
                .timeout
                .map(|t| (t.min_ms / HEARTBEATS_PER_TIMEOUT).max(1)))
            .unwrap_or(default_ms)
    }

    /// The timeout range: as asked, else the target's `default`.
    pub fn timeout_or(&self, default: TimeoutRange) -> TimeoutRange {
        self.timeout.unwrap_or(default)
    }

    /// A heartbeat must come more often than the shortest timeout, or followers time out
    /// on a live leader.
    pub fn check_heartbeat_below(&self, min_ms: u32, heartbeat_ms: u32) -> Result<(), String> {
        if heartbeat_ms >= min_ms {
            return Err(format!(
                "--heartbeat {heartbeat_ms}ms must be shorter than the election timeout's minimum ({min_ms} ms)"
            ));
        }
        Ok(())
    }

    /// The request as run.json's `config` records it: `election_timeout` as written
    /// (`150-300`, ms) and `heartbeat_ms`.
    pub fn requested(&self) -> (Option<String>, Option<u32>) {
        (self.timeout.map(|t| t.to_string()), self.heartbeat_ms)
    }
}

/// What a started cluster runs with (run.json `cluster.election_timing`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectiveTiming {
    /// The shortest and longest time a member waits for a silent leader before it starts
    /// an election, ms (both ends included).
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// How often the leader tells followers it is alive, ms.
    pub heartbeat_ms: u64,
    /// The target's own settings that carry it (flags, zoo.cfg keys).
    pub settings: String,
    /// What differs from the request, and why; absent when it was met exactly or nothing
    /// was asked for.
    pub note: Option<String>,
}

impl EffectiveTiming {
    /// `note` when the effective range or heartbeat differs from `requested`'s.
    pub fn noting(mut self, requested: &ElectionTiming, note: impl FnOnce() -> String) -> Self {
        let range_differs = requested.timeout.is_some_and(|t| {
            (u64::from(t.min_ms), u64::from(t.max_ms))
                != (self.election_timeout_min_ms, self.election_timeout_max_ms)
        });
        let heartbeat_differs = requested
            .heartbeat_ms
            .is_some_and(|hb| u64::from(hb) != self.heartbeat_ms);
        if range_differs || heartbeat_differs {
            self.note = Some(note());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(s: &str) -> Option<TimeoutRange> {
        Some(TimeoutRange::parse(s).unwrap())
    }

    #[test]
    fn heartbeat_defaults_to_a_tenth_of_the_minimum_timeout() {
        let t = ElectionTiming::new(range("150-300"), None).unwrap();
        assert_eq!(t.heartbeat_or(100), 15);
        let t = ElectionTiming::new(None, Some(Duration::from_millis(20))).unwrap();
        assert_eq!(t.heartbeat_or(100), 20);
        assert_eq!(ElectionTiming::default().heartbeat_or(100), 100);
        assert!(ElectionTiming::default().is_default());
        assert_eq!(
            ElectionTiming::new(range("150-300"), Some(Duration::from_millis(15)))
                .unwrap()
                .requested(),
            (Some("150-300".to_string()), Some(15))
        );
    }

    #[test]
    fn bad_heartbeats_are_refused_in_one_line() {
        for (timeout, heartbeat) in [
            (None, Duration::ZERO),
            (None, Duration::from_micros(1500)),
            (range("150-300"), Duration::from_millis(150)),
            (range("150-300"), Duration::from_secs(1)),
        ] {
            let err = ElectionTiming::new(timeout, Some(heartbeat)).unwrap_err();
            assert!(
                err.starts_with("--heartbeat") && !err.contains('\n'),
                "{err}"
            );
        }
    }
}
