//! Herd-effect accounting for queues with one holder at a time (locks, elections).
//!
//! Every contender of a queue registers its session's live counters. When the holder sends
//! its release (or is crashed), a herd window opens: the counters of every other contender
//! are summed; when the next holder's grant returns, they are summed again. The difference
//! is what the waiters received and sent between that release and the next grant. The
//! number of contenders with a pending acquisition at the release is that release's waiters.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use coordbench_drivers::{ClientCounters, CounterHandle};
use serde::Serialize;

struct Contender {
    client: usize,
    counters: CounterHandle,
    waiting: bool,
}

/// A release whose next grant has not happened yet.
struct Open {
    releaser: usize,
    at: Duration,
    waiters: u64,
    before: ClientCounters,
}

#[derive(Default)]
struct Queue {
    contenders: Vec<Contender>,
    open: Option<Open>,
}

impl Queue {
    fn others(&self, releaser: usize) -> impl Iterator<Item = &Contender> {
        self.contenders.iter().filter(move |c| c.client != releaser)
    }

    fn sum_others(&self, releaser: usize) -> ClientCounters {
        self.others(releaser)
            .fold(ClientCounters::default(), |sum, c| {
                sum + c.counters.snapshot()
            })
    }
}

/// One closed herd window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// When the release was sent, on the run's clock.
    pub at: Duration,
    pub waiters: u64,
    pub notifications: u64,
    pub requests: u64,
}

/// Herd figures over the releases sent inside the measured window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HerdSummary {
    /// Releases followed by a grant (herd windows closed).
    pub releases: u64,
    /// Mean contenders with a pending acquisition when a release was sent.
    pub waiters: Option<f64>,
    pub notifications_per_release: Option<f64>,
    pub requests_per_release: Option<f64>,
}

/// The herd windows of every queue of a run. Contenders without live counters (a driver
/// that cannot share them) are left out of the sums.
#[derive(Default)]
pub struct HerdMonitor {
    queues: Mutex<HashMap<String, Queue>>,
    closed: Mutex<Vec<Release>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HerdMonitor {
    /// Registers `client` as a contender of `queue` (once per session it uses).
    pub fn join(&self, queue: &str, client: usize, counters: Option<CounterHandle>) {
        let mut queues = locked(&self.queues);
        let q = queues.entry(queue.to_string()).or_default();
        q.contenders.retain(|c| c.client != client);
        if let Some(counters) = counters {
            q.contenders.push(Contender {
                client,
                counters,
                waiting: false,
            });
        }
    }

    /// `client` starts (true) or stops (false) waiting for `queue`.
    pub fn waiting(&self, queue: &str, client: usize, waiting: bool) {
        let mut queues = locked(&self.queues);
        if let Some(c) = queues
            .get_mut(queue)
            .and_then(|q| q.contenders.iter_mut().find(|c| c.client == client))
        {
            c.waiting = waiting;
        }
    }

    /// The holder `client` sends its release (or crashes) at `at`.
    pub fn released(&self, queue: &str, client: usize, at: Duration) {
        let mut queues = locked(&self.queues);
        let Some(q) = queues.get_mut(queue) else {
            return;
        };
        let waiters = q.others(client).filter(|c| c.waiting).count() as u64;
        let before = q.sum_others(client);
        q.open = Some(Open {
            releaser: client,
            at,
            waiters,
            before,
        });
    }

    /// `client` was granted `queue`: closes the open herd window, if any.
    pub fn granted(&self, queue: &str, client: usize) {
        let closed = {
            let mut queues = locked(&self.queues);
            let Some(q) = queues.get_mut(queue) else {
                return;
            };
            if let Some(c) = q.contenders.iter_mut().find(|c| c.client == client) {
                c.waiting = false;
            }
            let Some(open) = q.open.take() else {
                return;
            };
            let delta = q.sum_others(open.releaser) - open.before;
            Release {
                at: open.at,
                waiters: open.waiters,
                notifications: delta.notifications,
                requests: delta.requests,
            }
        };
        locked(&self.closed).push(closed);
    }

    /// Every closed window so far.
    pub fn releases(&self) -> Vec<Release> {
        locked(&self.closed).clone()
    }

    /// Figures over the releases sent inside `window`.
    pub fn summary(&self, window: (Duration, Duration)) -> HerdSummary {
        summarize(&self.releases(), window)
    }
}

/// Means over the releases sent inside `window`.
pub fn summarize(releases: &[Release], window: (Duration, Duration)) -> HerdSummary {
    let inside: Vec<&Release> = releases
        .iter()
        .filter(|r| r.at >= window.0 && r.at <= window.1)
        .collect();
    let n = inside.len() as u64;
    let mean = |f: fn(&Release) -> u64| {
        (n > 0).then(|| inside.iter().map(|r| f(r)).sum::<u64>() as f64 / n as f64)
    };
    HerdSummary {
        releases: n,
        waiters: mean(|r| r.waiters),
        notifications_per_release: mean(|r| r.notifications),
        requests_per_release: mean(|r| r.requests),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_window_counts_what_the_other_contenders_did_between_release_and_grant() {
        let m = HerdMonitor::default();
        let handles: Vec<CounterHandle> = (0..3).map(|_| CounterHandle::default()).collect();
        for (c, h) in handles.iter().enumerate() {
            m.join("l", c, Some(h.clone()));
        }
        m.waiting("l", 1, true);
        m.waiting("l", 2, true);
        // Before the release: not counted.
        handles[1].notifications(5);
        m.released("l", 0, ms(10));
        handles[0].request(); // the releaser's own requests are not a waiter's
        handles[1].notifications(1);
        handles[1].request();
        handles[2].notifications(1);
        handles[2].request();
        handles[2].request();
        m.granted("l", 1);
        // After the grant: not counted.
        handles[2].notifications(1);
        let r = m.releases();
        assert_eq!(
            r,
            vec![Release {
                at: ms(10),
                waiters: 2,
                notifications: 2,
                requests: 3
            }]
        );
        let s = m.summary((ms(0), ms(100)));
        assert_eq!(s.releases, 1);
        assert_eq!(s.notifications_per_release, Some(2.0));
        assert_eq!(m.summary((ms(20), ms(100))).releases, 0);
    }

    #[test]
    fn a_grant_without_an_open_release_closes_nothing() {
        let m = HerdMonitor::default();
        m.join("l", 0, Some(CounterHandle::default()));
        m.granted("l", 0);
        m.granted("other", 0);
        assert!(m.releases().is_empty());
        assert_eq!(m.summary((ms(0), ms(1))).waiters, None);
    }
}
