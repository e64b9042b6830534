//! The run's one monotonic clock: every client's events are offsets from a shared origin,
//! so sections recorded by different clients can be compared directly.

use std::time::{Duration, Instant};

/// A shared origin on the monotonic clock. Copy it into every actor.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    origin: Instant,
}

impl RunClock {
    pub fn start() -> Self {
        RunClock {
            origin: Instant::now(),
        }
    }

    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Time since the origin.
    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// An instant expressed on this clock (zero if it precedes the origin).
    pub fn at(&self, instant: Instant) -> Duration {
        instant.saturating_duration_since(self.origin)
    }
}
