//! The operation timeout with one timer per client instead of one per operation.
//!
//! `tokio::time::timeout` inserts a timer into the runtime's timer wheel for every operation and
//! removes it again when the operation completes, under the time driver's lock. A client's
//! operations start one after another, so the deadline of an earlier operation is never later
//! than the current one's: the client keeps one timer armed at some earlier deadline and, when
//! it fires before the current operation has run `limit`, re-arms it at the current deadline.
//! The timer is touched about once per `limit`, not once per operation, and an operation that
//! exceeds `limit` still ends as a timeout at its own deadline.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

/// Limits beyond this are treated as this.
const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

/// The operation ran for the whole limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

/// One client's operation timeout.
pub struct OpTimeout {
    limit: Duration,
    /// Never later than the deadline of the operation in progress.
    timer: Pin<Box<Sleep>>,
}

impl OpTimeout {
    /// A timeout of `limit` for operations started from now on.
    pub fn new(limit: Duration) -> Self {
        // Longer than any run, and keeps `started + limit` from overflowing the clock.
        let limit = limit.min(LONGEST);
        let timer = Box::pin(tokio::time::sleep_until((Instant::now() + limit).into()));
        Self { limit, timer }
    }

    /// Drives `op`, which began at `started` (no earlier than any operation before it), to
    /// completion or until it has run for the limit.
    pub async fn run<F: Future>(
        &mut self,
        started: Instant,
        mut op: Pin<&mut F>,
    ) -> Result<F::Output, Elapsed> {
        let deadline = started + self.limit;
        loop {
            tokio::select! {
                biased;
                output = op.as_mut() => return Ok(output),
                _ = self.timer.as_mut() => {
                    if Instant::now() >= deadline {
                        return Err(Elapsed);
                    }
                    self.timer.as_mut().reset(deadline.into());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_operation_that_outlasts_the_limit_times_out_at_its_own_deadline() {
        let limit = Duration::from_millis(50);
        let mut timeout = OpTimeout::new(limit);
        // A quick operation first, so the timer is armed at an earlier deadline.
        let quick = Instant::now();
        let r = timeout.run(quick, std::pin::pin!(async { 7 })).await;
        assert_eq!(r, Ok(7));
        tokio::time::sleep(Duration::from_millis(30)).await;
        let started = Instant::now();
        let slow = std::pin::pin!(tokio::time::sleep(Duration::from_secs(5)));
        let r = timeout.run(started, slow).await;
        let ran = started.elapsed();
        assert_eq!(r, Err(Elapsed));
        assert!(ran >= limit, "timed out after {ran:?}, before the limit");
        assert!(
            ran < Duration::from_secs(5),
            "the slow operation was not cut off"
        );
    }

    #[tokio::test]
    async fn operations_within_the_limit_complete_after_the_timer_fired_for_earlier_ones() {
        let limit = Duration::from_millis(40);
        let mut timeout = OpTimeout::new(limit);
        // Each operation takes 15 ms, so the timer armed for earlier ones fires during later
        // ones; none of them may be cut off.
        for i in 0..6 {
            let started = Instant::now();
            let op = std::pin::pin!(async move {
                tokio::time::sleep(Duration::from_millis(15)).await;
                i
            });
            assert_eq!(timeout.run(started, op).await, Ok(i));
        }
    }
}
