//! What the failover tests of every engine share: writers that put unique keys and record
//! which puts were acknowledged, and the client-visible figures around a kill (first write
//! after it, longest gap between acknowledgements).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordbench_drivers::Session;
use tokio::task::JoinHandle;

use super::within;

/// One put may take this long before the writer gives up on it (its outcome is then
/// unknown, and it is not counted as acknowledged).
pub const PUT_BOUND: Duration = Duration::from_secs(2);

/// One acknowledged put: key, when it was issued and when its answer came.
#[derive(Debug, Clone)]
pub struct Ack {
    pub key: String,
    pub issued: Instant,
    pub acked: Instant,
}

/// Puts `key_of(seq)` = the key itself, in a closed loop until `stop`, and returns the puts
/// that were acknowledged.
pub async fn writer(
    key_of: impl Fn(u64) -> String,
    mut session: Box<dyn Session>,
    stop: Arc<AtomicBool>,
) -> Vec<Ack> {
    let mut acks = Vec::new();
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = key_of(seq);
        seq += 1;
        let issued = Instant::now();
        match tokio::time::timeout(PUT_BOUND, session.put(&key, key.as_bytes())).await {
            Ok(Ok(())) => acks.push(Ack {
                key,
                issued,
                acked: Instant::now(),
            }),
            // Refused or unanswered while there is no leader: try the next key.
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    acks
}

/// Stops the writers and gathers their acknowledged puts, sorted by acknowledgement time.
pub async fn stop_writers(writers: Vec<JoinHandle<Vec<Ack>>>, stop: &AtomicBool) -> Vec<Ack> {
    stop.store(true, Ordering::Relaxed);
    let mut acks = Vec::new();
    for w in writers {
        acks.extend(
            within(PUT_BOUND * 2, "a writer's end", w)
                .await
                .expect("writer task"),
        );
    }
    acks.sort_by_key(|a| a.acked);
    acks
}

/// What clients saw around a fault injected at `killed`.
#[derive(Debug)]
pub struct Unavailability {
    /// Kill to the acknowledgement of the first put issued after it.
    pub first_write_after: Duration,
    /// Longest time between two successive acknowledgements.
    pub longest_gap: Duration,
    /// Puts acknowledged before the kill.
    pub before: usize,
}

/// Measures `acks` (sorted by acknowledgement, as [`stop_writers`] returns them).
pub fn unavailability(acks: &[Ack], killed: Instant) -> Unavailability {
    Unavailability {
        first_write_after: acks
            .iter()
            .filter(|a| a.issued > killed)
            .map(|a| a.acked.duration_since(killed))
            .min()
            .expect("no put issued after the kill was acknowledged"),
        longest_gap: acks
            .windows(2)
            .map(|p| p[1].acked.duration_since(p[0].acked))
            .max()
            .expect("acks"),
        before: acks.iter().filter(|a| a.acked < killed).count(),
    }
}
