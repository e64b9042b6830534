//! Server counters for the four-letter words: packets received and sent, outstanding
//! requests, and request latency (min / avg / max, in ms as ZooKeeper reports it).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Stats {
    started: Instant,
    received: AtomicU64,
    sent: AtomicU64,
    outstanding: AtomicI64,
    latency_count: AtomicU64,
    latency_total_us: AtomicU64,
    latency_min_us: AtomicU64,
    latency_max_us: AtomicU64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            outstanding: AtomicI64::new(0),
            latency_count: AtomicU64::new(0),
            latency_total_us: AtomicU64::new(0),
            latency_min_us: AtomicU64::new(u64::MAX),
            latency_max_us: AtomicU64::new(0),
        }
    }
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counters {
    pub received: u64,
    pub sent: u64,
    pub outstanding: i64,
    pub min_latency_ms: u64,
    pub avg_latency_ms: f64,
    pub max_latency_ms: u64,
    pub uptime: Duration,
}

impl Stats {
    pub fn received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
    }

    pub fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A request began processing.
    pub fn begin(&self) -> Instant {
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        Instant::now()
    }

    /// A request that began at `start` was answered.
    pub fn end(&self, start: Instant) {
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_total_us.fetch_add(us, Ordering::Relaxed);
        self.latency_min_us.fetch_min(us, Ordering::Relaxed);
        self.latency_max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// `srst`: zeroes packet and latency counters.
    pub fn reset(&self) {
        self.received.store(0, Ordering::Relaxed);
        self.sent.store(0, Ordering::Relaxed);
        self.latency_count.store(0, Ordering::Relaxed);
        self.latency_total_us.store(0, Ordering::Relaxed);
        self.latency_min_us.store(u64::MAX, Ordering::Relaxed);
        self.latency_max_us.store(0, Ordering::Relaxed);
    }

    pub fn counters(&self) -> Counters {
        let count = self.latency_count.load(Ordering::Relaxed);
        let total = self.latency_total_us.load(Ordering::Relaxed);
        let min = self.latency_min_us.load(Ordering::Relaxed);
        Counters {
            received: self.received.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            outstanding: self.outstanding.load(Ordering::Relaxed).max(0),
            min_latency_ms: if count == 0 { 0 } else { min / 1000 },
            avg_latency_ms: if count == 0 {
                0.0
            } else {
                total as f64 / count as f64 / 1000.0
            },
            max_latency_ms: self.latency_max_us.load(Ordering::Relaxed) / 1000,
            uptime: self.started.elapsed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_resets() {
        let s = Stats::default();
        s.received();
        s.sent();
        let t = s.begin();
        assert_eq!(s.counters().outstanding, 1);
        s.end(t);
        let c = s.counters();
        assert_eq!((c.received, c.sent, c.outstanding), (1, 1, 0));
        assert!(c.min_latency_ms <= c.max_latency_ms);
        s.reset();
        let c = s.counters();
        assert_eq!(
            (c.received, c.min_latency_ms, c.avg_latency_ms),
            (0, 0, 0.0)
        );
    }
}
