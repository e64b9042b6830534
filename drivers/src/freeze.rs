//! A session's freeze switch: what [`crate::Session::freeze`] flips so the session's own
//! background traffic (etcd's lease keep-alive, the bytes of a ZooKeeper connection) stops
//! for a while, as in a GC pause of the client process, and then resumes on its own.
//!
//! The gate holds a deadline rather than an on/off flag, so a freeze whose caller was
//! cancelled still ends on time, and a second freeze can only extend the first.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Shared by a session and the tasks that carry its traffic. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct FreezeGate {
    until: Arc<Mutex<Option<Instant>>>,
}

impl FreezeGate {
    /// Stops traffic through the gate for `d` from now (or until an earlier freeze ends, if
    /// that is later).
    pub fn freeze_for(&self, d: Duration) {
        let end = Instant::now() + d;
        let mut until = self.until.lock().unwrap_or_else(|p| p.into_inner());
        *until = Some(until.map_or(end, |u| u.max(end)));
    }

    /// Freezes the gate for `d` and waits it out: what a session's `freeze` does.
    pub async fn pause(&self, d: Duration) {
        self.freeze_for(d);
        self.thawed().await;
    }

    /// Whether traffic is frozen now.
    pub fn is_frozen(&self) -> bool {
        self.frozen_until().is_some()
    }

    /// Returns once the gate is open (at once when it is not frozen).
    pub async fn thawed(&self) {
        while let Some(until) = self.frozen_until() {
            tokio::time::sleep_until(until).await;
        }
    }

    fn frozen_until(&self) -> Option<Instant> {
        let until = *self.until.lock().unwrap_or_else(|p| p.into_inner());
        until.filter(|u| *u > Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_frozen_gate_opens_after_its_duration_and_an_open_one_at_once() {
        let gate = FreezeGate::default();
        let started = Instant::now();
        gate.thawed().await;
        assert!(started.elapsed() < Duration::from_millis(20));
        gate.freeze_for(Duration::from_millis(60));
        assert!(gate.is_frozen());
        gate.thawed().await;
        assert!(started.elapsed() >= Duration::from_millis(60));
        assert!(!gate.is_frozen());
    }

    #[tokio::test]
    async fn a_shorter_second_freeze_does_not_cut_the_first_short() {
        let gate = FreezeGate::default();
        let started = Instant::now();
        gate.freeze_for(Duration::from_millis(80));
        gate.freeze_for(Duration::from_millis(10));
        gate.thawed().await;
        assert!(started.elapsed() >= Duration::from_millis(80));
    }
}
