//! An injected service time for the null target: every request is served by one of `C`
//! servers and takes `D` of its time, first come first served, so the target's capacity is
//! exactly `C / D` requests per second, as a test of a capacity search needs.
//!
//! The queue is computed rather than waited out: a request arriving at `t` takes the
//! server that frees first, starts at `max(t, free)` and finishes `D` later, and only then
//! sleeps until its finish. Timer overshoot therefore adds to a request's latency but never
//! to the servers' busy time, and the capacity stays `C / D` whatever the timer's jitter.
//! A request arrives at its intended start where the load generator set one
//! ([`crate::schedule`]): the offered schedule, not the moment a stalled generator got
//! round to sending it, so the generator's stalls show as its schedule lag, not as bursts
//! that queue at the servers.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `C` servers taking `D` per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceModel {
    /// D: how long one request occupies a server.
    pub time: Duration,
    /// C: requests served at once.
    pub concurrency: usize,
}

impl ServiceModel {
    /// The most requests per second the servers complete: `C / D`.
    pub fn capacity(&self) -> f64 {
        self.concurrency as f64 / self.time.as_secs_f64()
    }
}

/// The servers' queue: when each server is next free.
pub(super) struct ServiceQueue {
    model: ServiceModel,
    free_at: Mutex<Vec<Instant>>,
}

impl ServiceQueue {
    pub(super) fn new(model: ServiceModel) -> Self {
        let now = Instant::now();
        ServiceQueue {
            model,
            free_at: Mutex::new(vec![now; model.concurrency.max(1)]),
        }
    }

    /// Waits until a request arriving now has been served.
    pub(super) async fn serve(&self) {
        let now = Instant::now();
        let arrival = crate::schedule::intended_start().map_or(now, |t| t.min(now));
        let finish = self.admit(arrival);
        tokio::time::sleep_until(finish.into()).await;
    }

    /// Books the request arriving at `arrival` on the server that frees first; its finish.
    fn admit(&self, arrival: Instant) -> Instant {
        let mut free_at = self.free_at.lock().unwrap_or_else(|p| p.into_inner());
        let (slot, free) = free_at
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|(_, t)| *t)
            .unwrap_or((0, arrival));
        let finish = free.max(arrival) + self.model.time;
        free_at[slot] = finish;
        finish
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_queue_behind_busy_servers_and_capacity_is_c_over_d() {
        let model = ServiceModel {
            time: Duration::from_millis(10),
            concurrency: 2,
        };
        assert_eq!(model.capacity(), 200.0);
        let queue = ServiceQueue::new(model);
        let t = Instant::now() + Duration::from_secs(1);
        let ms = |n: u64| Duration::from_millis(n);
        // Two servers take the first two at once; the third waits for the first free one.
        assert_eq!(queue.admit(t), t + ms(10));
        assert_eq!(queue.admit(t), t + ms(10));
        assert_eq!(queue.admit(t), t + ms(20));
        // After the backlog drained, a request is served at once again.
        assert_eq!(queue.admit(t + ms(100)), t + ms(110));
    }
}
