//! Capped exponential backoff with jitter: how polling lock waiters (Redis SET NX, Redlock,
//! the PostgreSQL lease row) space their retries.

use std::time::Duration;

use rand::Rng;

/// First and largest pause between a waiter's attempts.
pub const RANGE: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(32));

/// Each wait is drawn uniformly from [d/2, d], then d doubles up to [`RANGE`]'s cap.
pub struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(RANGE.0)
    }
}

impl Backoff {
    pub async fn wait(&mut self) {
        let d = self.0;
        let jittered = rand::rng().random_range(d / 2..=d);
        tokio::time::sleep(jittered).await;
        self.0 = (d * 2).min(RANGE.1);
    }
}
