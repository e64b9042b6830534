//! The discovery checker: how long membership changes take to reach every watcher.
//!
//! Every registration uses a fresh instance name, so a name is registered once and removed
//! at most once (deregistered, or crashed: its session abandoned). A watcher's view
//! *reflects* a registration from the first view that lists the name, and a removal from
//! the first view after that which does not (or, if the watcher never listed the name, from
//! its first view received after the removal was sent). A change's propagation latency runs
//! from its acknowledgement to the last watcher reflecting it (clamped at zero). A
//! registration some watcher never listed because it was removed first is *superseded*, not
//! late. For a crash, the figure is how long the name stayed listed: from the crash to the
//! last watcher's view without it, against the session TTL.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::histogram::latency_histogram;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Register,
    Deregister,
    /// The instance's session was abandoned; the server removes the name on expiry.
    Crash,
}

/// One membership change an instance made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub name: String,
    pub kind: ChangeKind,
    /// The request was sent (for a crash: the session was abandoned).
    pub sent: Duration,
    /// The request was acknowledged (for a crash: equal to `sent`).
    pub ack: Duration,
}

/// What one watcher saw, reduced to what the checker needs.
#[derive(Debug, Clone, Default)]
pub struct WatcherLog {
    current: BTreeSet<String>,
    first_listed: HashMap<String, Duration>,
    /// First view without the name after it was listed.
    unlisted: HashMap<String, Duration>,
    views: Vec<Duration>,
}

impl WatcherLog {
    /// The watcher received `members` at `at`.
    pub fn view(&mut self, at: Duration, members: BTreeSet<String>) {
        for added in members.difference(&self.current) {
            self.first_listed.entry(added.clone()).or_insert(at);
        }
        for removed in self.current.difference(&members) {
            self.unlisted.entry(removed.clone()).or_insert(at);
        }
        self.current = members;
        self.views.push(at);
    }

    /// When this watcher's view reflects `change`, if it does yet.
    fn reflects(&self, change: &Change) -> Option<Duration> {
        match change.kind {
            ChangeKind::Register => self.first_listed.get(&change.name).copied(),
            ChangeKind::Deregister | ChangeKind::Crash => {
                if self.first_listed.contains_key(&change.name) {
                    self.unlisted.get(&change.name).copied()
                } else {
                    self.views.iter().copied().find(|t| *t >= change.sent)
                }
            }
        }
    }
}

/// What a discovery history shows.
#[derive(Debug, Clone)]
pub struct PropagationCheck {
    pub watchers: u64,
    /// Acknowledged changes inside the window (crashes included).
    pub changes: u64,
    /// Registration latency, µs (registrations acknowledged inside the window).
    pub registration_us: Histogram<u64>,
    /// Acknowledgement to the last watcher reflecting it, µs (registrations and
    /// deregistrations acknowledged inside the window).
    pub propagation_us: Histogram<u64>,
    /// Changes inside the window that some watcher never reflected.
    pub unpropagated: u64,
    /// Registrations some watcher never listed because they were removed first.
    pub superseded: u64,
    /// Crashes (whole run), and how long the name stayed listed after each, µs, for those
    /// every watcher saw go.
    pub crashes: u64,
    pub crash_listed_us: Histogram<u64>,
    pub ttl: Duration,
}

/// Judges `changes` against what `watchers` saw.
pub fn check_propagation(
    changes: &[Change],
    watchers: &[WatcherLog],
    window: (Duration, Duration),
    ttl: Duration,
) -> PropagationCheck {
    let removed: HashSet<&str> = changes
        .iter()
        .filter(|c| c.kind != ChangeKind::Register)
        .map(|c| c.name.as_str())
        .collect();
    let mut check = PropagationCheck {
        watchers: watchers.len() as u64,
        changes: 0,
        registration_us: latency_histogram(),
        propagation_us: latency_histogram(),
        unpropagated: 0,
        superseded: 0,
        crashes: 0,
        crash_listed_us: latency_histogram(),
        ttl,
    };
    let us = |d: Duration| d.as_micros() as u64;
    for change in changes {
        let inside = change.ack >= window.0 && change.ack <= window.1;
        let reflected: Option<Vec<Duration>> =
            watchers.iter().map(|w| w.reflects(change)).collect();
        let everywhere = reflected.and_then(|r| r.into_iter().max());
        if change.kind == ChangeKind::Crash {
            check.crashes += 1;
            if let Some(at) = everywhere {
                check
                    .crash_listed_us
                    .saturating_record(us(at.saturating_sub(change.sent)));
            }
        }
        if !inside {
            continue;
        }
        check.changes += 1;
        if change.kind == ChangeKind::Register {
            check
                .registration_us
                .saturating_record(us(change.ack.saturating_sub(change.sent)));
        }
        match everywhere {
            Some(at) if change.kind != ChangeKind::Crash => check
                .propagation_us
                .saturating_record(us(at.saturating_sub(change.ack))),
            Some(_) => {}
            None if change.kind == ChangeKind::Register
                && removed.contains(change.name.as_str()) =>
            {
                check.superseded += 1
            }
            None => check.unpropagated += 1,
        }
    }
    check
}

/// The serializable digest in run.json.
#[derive(Debug, Clone, Serialize)]
pub struct PropagationSummary {
    pub watchers: u64,
    pub changes: u64,
    pub registration_p50_us: Option<u64>,
    pub registration_p99_us: Option<u64>,
    pub propagation_p50_us: Option<u64>,
    pub propagation_p99_us: Option<u64>,
    pub propagation_max_us: Option<u64>,
    pub unpropagated: u64,
    pub superseded: u64,
    pub crashes: u64,
    pub crash_listed_p50_ms: Option<f64>,
    pub crash_listed_max_ms: Option<f64>,
    /// `crash_listed_max_ms` / TTL.
    pub crash_listed_ttl_ratio: Option<f64>,
}

impl PropagationCheck {
    pub fn summary(&self) -> PropagationSummary {
        let q = |h: &Histogram<u64>, p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
        let max = |h: &Histogram<u64>| (!h.is_empty()).then(|| h.max());
        let crash_max_ms = max(&self.crash_listed_us).map(|v| v as f64 / 1000.0);
        PropagationSummary {
            watchers: self.watchers,
            changes: self.changes,
            registration_p50_us: q(&self.registration_us, 0.5),
            registration_p99_us: q(&self.registration_us, 0.99),
            propagation_p50_us: q(&self.propagation_us, 0.5),
            propagation_p99_us: q(&self.propagation_us, 0.99),
            propagation_max_us: max(&self.propagation_us),
            unpropagated: self.unpropagated,
            superseded: self.superseded,
            crashes: self.crashes,
            crash_listed_p50_ms: q(&self.crash_listed_us, 0.5).map(|v| v as f64 / 1000.0),
            crash_listed_max_ms: crash_max_ms,
            crash_listed_ttl_ratio: crash_max_ms
                .map(|m| m / (self.ttl.as_secs_f64() * 1000.0).max(f64::MIN_POSITIVE)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn change(name: &str, kind: ChangeKind, sent: u64, ack: u64) -> Change {
        Change {
            name: name.into(),
            kind,
            sent: ms(sent),
            ack: ms(ack),
        }
    }

    const ALL: (Duration, Duration) = (Duration::ZERO, Duration::MAX);

    #[test]
    fn propagation_runs_from_the_ack_to_the_last_watcher() {
        let changes = vec![
            change("a", ChangeKind::Register, 0, 10),
            change("a", ChangeKind::Deregister, 50, 60),
        ];
        let mut fast = WatcherLog::default();
        fast.view(ms(0), set(&[]));
        fast.view(ms(11), set(&["a"]));
        fast.view(ms(61), set(&[]));
        let mut slow = WatcherLog::default();
        slow.view(ms(0), set(&[]));
        slow.view(ms(30), set(&["a"]));
        slow.view(ms(90), set(&[]));
        let c = check_propagation(&changes, &[fast, slow], ALL, ms(1000));
        assert_eq!((c.changes, c.unpropagated, c.superseded), (2, 0, 0));
        let p = &c.propagation_us;
        assert!(p.equivalent(p.max(), 30_000), "{}", p.max()); // deregistration: 60 -> 90
        assert!(p.equivalent(p.min(), 20_000), "{}", p.min()); // registration: 10 -> 30
        assert!(c
            .registration_us
            .equivalent(c.registration_us.max(), 10_000));
    }

    #[test]
    fn a_change_a_watcher_never_reflects_is_unpropagated_and_a_skipped_one_superseded() {
        let changes = vec![
            change("a", ChangeKind::Register, 0, 10),
            change("b", ChangeKind::Register, 0, 10),
            change("b", ChangeKind::Deregister, 11, 12),
        ];
        let mut w = WatcherLog::default();
        w.view(ms(0), set(&[]));
        w.view(ms(20), set(&[])); // never lists a; b came and went in between
        let c = check_propagation(&changes, &[w], ALL, ms(1000));
        assert_eq!((c.unpropagated, c.superseded), (1, 1));
        // b's removal is reflected by the first view after it was sent.
        assert_eq!(c.propagation_us.len(), 1);
    }

    #[test]
    fn a_crashed_instance_stays_listed_until_the_watchers_see_it_go() {
        let changes = vec![
            change("a", ChangeKind::Register, 0, 10),
            change("a", ChangeKind::Crash, 100, 100),
        ];
        let mut w = WatcherLog::default();
        w.view(ms(11), set(&["a"]));
        w.view(ms(2100), set(&[]));
        let c = check_propagation(&changes, &[w], ALL, ms(2000));
        assert_eq!(c.crashes, 1);
        let s = c.summary();
        let listed = s.crash_listed_max_ms.unwrap();
        assert!((listed - 2000.0).abs() < 5.0, "{listed}"); // histogram resolution
        assert!((s.crash_listed_ttl_ratio.unwrap() - 1.0).abs() < 0.01);
        // The crash is not a propagation figure.
        assert_eq!(c.propagation_us.len(), 1);
    }
}
