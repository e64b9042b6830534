//! The config-watch checker: which versions of the config each watcher saw, and when.
//!
//! The writer's versions are 1, 2, 3, ...; each is acknowledged at a time on the run's
//! clock. A watcher "has" version v from the first moment it sees v or a later version.
//! Per version: first and last watcher to have it (notification latency from the
//! acknowledgement, clamped at zero). A version a watcher jumped over is *missed* when its
//! watches deliver every version (etcd style) and *coalesced* when they are one-shot
//! (ZooKeeper: the value read after an event may be several versions on); a version a
//! watcher still lacks at the end is missed either way.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::histogram::latency_histogram;

#[derive(Debug, Clone, Copy, Default)]
struct Version {
    ack: Option<Duration>,
    first: Option<Duration>,
    last: Option<Duration>,
    holders: u64,
}

/// Every version's acknowledgement and reception, shared by the writer and the watchers.
#[derive(Debug, Default)]
pub struct VersionLog {
    versions: Vec<Version>,
    /// Versions watchers jumped over, summed over watchers.
    skipped: u64,
    /// New versions watchers received, counted per millisecond of the run: a count per
    /// reception would hold millions of entries at 100,000 watchers.
    received_per_ms: Vec<u32>,
}

impl VersionLog {
    fn slot(&mut self, v: u64) -> &mut Version {
        let i = v as usize;
        if self.versions.len() <= i {
            self.versions.resize(i + 1, Version::default());
        }
        &mut self.versions[i]
    }

    /// The writer's write of version `v` was acknowledged at `at`.
    pub fn acked(&mut self, v: u64, at: Duration) {
        self.slot(v).ack = Some(at);
    }

    /// The highest acknowledged version (0 before the first).
    pub fn last_acked(&self) -> u64 {
        self.versions
            .iter()
            .rposition(|v| v.ack.is_some())
            .unwrap_or(0) as u64
    }

    /// A watcher whose latest version is `*last` received version `v` at `at`; older or
    /// repeated versions change nothing.
    pub fn seen(&mut self, last: &mut u64, v: u64, at: Duration) {
        if v <= *last {
            return;
        }
        self.skipped += v - *last - 1;
        let ms = at.as_millis() as usize;
        if self.received_per_ms.len() <= ms {
            self.received_per_ms.resize(ms + 1, 0);
        }
        self.received_per_ms[ms] = self.received_per_ms[ms].saturating_add(1);
        for version in *last + 1..=v {
            let s = self.slot(version);
            s.first = Some(s.first.map_or(at, |f| f.min(at)));
            s.last = Some(s.last.map_or(at, |l| l.max(at)));
            s.holders += 1;
        }
        *last = v;
    }

    /// Judges the log. `finals` is every watcher's latest version at the end; latencies
    /// and deliveries count versions acknowledged inside `window`.
    pub fn check(
        &self,
        finals: &[u64],
        every_version: bool,
        window: (Duration, Duration),
    ) -> VersionCheck {
        let last_acked = self.last_acked();
        let tail: u64 = finals.iter().map(|f| last_acked.saturating_sub(*f)).sum();
        let (missed, coalesced) = if every_version {
            (self.skipped + tail, 0)
        } else {
            (tail, self.skipped)
        };
        let mut first = latency_histogram();
        let mut last = latency_histogram();
        let mut updates = 0;
        let mut delivered_to_all = 0;
        let inside = |t: Duration| t >= window.0 && t <= window.1;
        for v in &self.versions {
            let Some(ack) = v.ack.filter(|a| inside(*a)) else {
                continue;
            };
            updates += 1;
            if let Some(f) = v.first {
                first.saturating_record(micros(f.saturating_sub(ack)));
            }
            if v.holders >= finals.len() as u64 {
                delivered_to_all += 1;
                if let Some(l) = v.last {
                    last.saturating_record(micros(l.saturating_sub(ack)));
                }
            }
        }
        VersionCheck {
            watchers: finals.len() as u64,
            updates,
            delivered_to_all,
            notifications: self.received_inside(inside),
            missed,
            coalesced,
            first_us: first,
            last_us: last,
        }
    }

    /// Receptions inside the window, to the millisecond: a millisecond counts if
    /// `inside` its beginning.
    fn received_inside(&self, inside: impl Fn(Duration) -> bool) -> u64 {
        self.received_per_ms
            .iter()
            .enumerate()
            .filter(|(ms, _)| inside(Duration::from_millis(*ms as u64)))
            .map(|(_, n)| u64::from(*n))
            .sum()
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// What a config-watch history shows.
#[derive(Debug, Clone)]
pub struct VersionCheck {
    pub watchers: u64,
    /// Versions acknowledged inside the window.
    pub updates: u64,
    /// Of those, versions every watcher has by the end.
    pub delivered_to_all: u64,
    /// New versions watchers received inside the window (all watchers; to the millisecond).
    pub notifications: u64,
    /// Versions a watcher never saw although its watch promises every version, plus
    /// versions it still lacked at the end; summed over watchers, whole run.
    pub missed: u64,
    /// Versions one-shot watches jumped over (the value read after an event was newer);
    /// summed over watchers, whole run. Not errors.
    pub coalesced: u64,
    /// Acknowledgement to the first watcher having the version, µs.
    pub first_us: Histogram<u64>,
    /// Acknowledgement to the last watcher having it (versions every watcher has), µs.
    pub last_us: Histogram<u64>,
}

/// The serializable digest in run.json.
#[derive(Debug, Clone, Serialize)]
pub struct VersionSummary {
    pub watchers: u64,
    pub updates: u64,
    pub delivered_to_all: u64,
    pub updates_delivered_per_s: Option<f64>,
    pub notifications: u64,
    pub missed_versions: u64,
    pub coalesced_versions: u64,
    pub notify_first_p50_us: Option<u64>,
    pub notify_first_p99_us: Option<u64>,
    pub notify_last_p50_us: Option<u64>,
    pub notify_last_p99_us: Option<u64>,
    pub notify_last_max_us: Option<u64>,
}

impl VersionCheck {
    pub fn summary(&self, window_s: f64) -> VersionSummary {
        let q = |h: &Histogram<u64>, p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
        VersionSummary {
            watchers: self.watchers,
            updates: self.updates,
            delivered_to_all: self.delivered_to_all,
            updates_delivered_per_s: (window_s > 0.0)
                .then(|| self.delivered_to_all as f64 / window_s),
            notifications: self.notifications,
            missed_versions: self.missed,
            coalesced_versions: self.coalesced,
            notify_first_p50_us: q(&self.first_us, 0.5),
            notify_first_p99_us: q(&self.first_us, 0.99),
            notify_last_p50_us: q(&self.last_us, 0.5),
            notify_last_p99_us: q(&self.last_us, 0.99),
            notify_last_max_us: (!self.last_us.is_empty()).then(|| self.last_us.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    const ALL: (Duration, Duration) = (Duration::ZERO, Duration::MAX);

    /// Versions 1..=4 acknowledged at 10, 20, 30, 40 ms; watcher A sees every one 1 ms
    /// later, watcher B sees 1 then 4 (at 45 ms).
    fn log_with_a_jump() -> (VersionLog, Vec<u64>) {
        let mut log = VersionLog::default();
        let (mut a, mut b) = (0, 0);
        for v in 1..=4 {
            log.acked(v, ms(10 * v));
            log.seen(&mut a, v, ms(10 * v + 1));
        }
        log.seen(&mut b, 1, ms(12));
        log.seen(&mut b, 1, ms(13)); // a repeat changes nothing
        log.seen(&mut b, 4, ms(45));
        (log, vec![a, b])
    }

    #[test]
    fn a_jump_is_missed_for_etcd_style_watches_and_coalesced_for_one_shot_ones() {
        let (log, finals) = log_with_a_jump();
        let every = log.check(&finals, true, ALL);
        assert_eq!((every.missed, every.coalesced), (2, 0));
        let one_shot = log.check(&finals, false, ALL);
        assert_eq!((one_shot.missed, one_shot.coalesced), (0, 2));
        assert_eq!(one_shot.delivered_to_all, 4);
        assert_eq!(one_shot.notifications, 4 + 2);
    }

    #[test]
    fn first_and_last_watcher_latency_per_version() {
        let (log, finals) = log_with_a_jump();
        let c = log.check(&finals, false, ALL);
        // First watcher: 1 ms for every version.
        assert_eq!(c.first_us.len(), 4);
        assert!(c.first_us.equivalent(c.first_us.max(), 1000));
        // Last watcher: B has 2 at 45 ms (acked at 20): 25 ms; 4 at 45 (acked 40): 5 ms.
        assert!(c.last_us.equivalent(c.last_us.max(), 25_000));
        assert!(c.last_us.equivalent(c.last_us.min(), 2000)); // version 1: B at 12 ms
    }

    #[test]
    fn versions_a_watcher_lacks_at_the_end_are_missed_either_way() {
        let mut log = VersionLog::default();
        let mut a = 0;
        log.acked(1, ms(1));
        log.acked(2, ms(2));
        log.seen(&mut a, 1, ms(3));
        for every_version in [true, false] {
            let c = log.check(&[a], every_version, ALL);
            assert_eq!(c.missed, 1, "every_version {every_version}");
            assert_eq!(c.delivered_to_all, 1);
        }
    }

    #[test]
    fn only_versions_acknowledged_in_the_window_enter_the_latencies() {
        let (log, finals) = log_with_a_jump();
        let c = log.check(&finals, true, (ms(25), ms(100)));
        assert_eq!((c.updates, c.first_us.len()), (2, 2));
        let s = c.summary(2.0);
        assert_eq!(s.updates_delivered_per_s, Some(1.0));
    }
}
