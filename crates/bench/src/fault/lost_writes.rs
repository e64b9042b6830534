//! The lost-write check that ends every run with `--fault`: once the last fault has healed,
//! every acknowledged probe write is read back linearizably. A key that is missing or holds
//! another value is a lost write: the cluster acknowledged it and then forgot it.
//!
//! Reads go through a few sessions of their own, each key retried a few times on errors (a
//! cluster that just healed may still be electing), within an overall bound; keys the bound
//! left unread are counted as unchecked, never as kept.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coordbench_drivers::{Consistency, Coordinator, SessionOptions};
use serde::Serialize;
use tokio::task::JoinSet;

/// Sessions reading back in parallel.
const READERS: usize = 8;
/// Attempts per key before it counts as unchecked.
const ATTEMPTS: usize = 5;
/// Pause between attempts on one key.
const RETRY_AFTER: Duration = Duration::from_millis(200);
/// Lost keys listed in run.json (the count is always complete).
const LISTED: usize = 100;

/// What the read-back found, for run.json (`faults.lost_writes`) and summary.csv.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LostWrites {
    /// Acknowledged writes read back.
    pub checked: u64,
    /// Of those, missing or holding another value.
    pub lost: u64,
    /// Acknowledged writes the bound (or read errors) left unread.
    pub unchecked: u64,
    /// The first lost keys.
    pub lost_keys: Vec<String>,
}

/// Reads every `(key, value)` in `acked` back and reports those not found as written.
pub async fn read_back(
    coordinator: Arc<dyn Coordinator>,
    acked: Vec<(String, Vec<u8>)>,
    bound: Duration,
) -> LostWrites {
    let total = acked.len() as u64;
    let queue = Arc::new(Mutex::new(VecDeque::from(acked)));
    let found = Arc::new(Mutex::new(LostWrites::default()));
    let mut readers = JoinSet::new();
    for r in 0..READERS {
        let (coordinator, queue, found) = (coordinator.clone(), queue.clone(), found.clone());
        readers.spawn(async move {
            let options = SessionOptions {
                ttl: Duration::from_secs(10),
            };
            let Ok(mut session) = coordinator
                .open_session(usize::MAX - 100 - r, &options)
                .await
            else {
                return;
            };
            loop {
                let next = queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pop_front();
                let Some((key, value)) = next else { break };
                let Some(kept) = read_key(session.as_mut(), &key, &value).await else {
                    continue; // unreadable: counted as unchecked below
                };
                let mut f = found.lock().unwrap_or_else(PoisonError::into_inner);
                f.checked += 1;
                if !kept {
                    f.lost += 1;
                    if f.lost_keys.len() < LISTED {
                        f.lost_keys.push(key);
                    }
                }
            }
            let _ = session.close().await;
        });
    }
    // Past the bound the readers are abandoned; what they had not read stays unchecked.
    let _ = tokio::time::timeout(bound, async {
        while readers.join_next().await.is_some() {}
    })
    .await;
    readers.abort_all();
    let mut result = found.lock().unwrap_or_else(PoisonError::into_inner).clone();
    result.lost_keys.sort();
    result.unchecked = total - result.checked;
    result
}

/// Whether `key` holds `value`; `None` if it could not be read.
async fn read_key(
    session: &mut dyn coordbench_drivers::Session,
    key: &str,
    value: &[u8],
) -> Option<bool> {
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_AFTER).await;
        }
        let read = tokio::time::timeout(
            Duration::from_secs(2),
            session.get(key, Consistency::Linearizable),
        )
        .await;
        if let Ok(Ok(current)) = read {
            return Some(current.as_deref() == Some(value));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_drivers::null::NullCoordinator;

    async fn write_all(coordinator: &Arc<dyn Coordinator>, n: usize) -> Vec<(String, Vec<u8>)> {
        let options = SessionOptions {
            ttl: Duration::from_secs(10),
        };
        let mut session = coordinator.open_session(0, &options).await.unwrap();
        let mut acked = Vec::new();
        for i in 0..n {
            let (key, value) = (format!("/probe/{i:04}"), i.to_string().into_bytes());
            session.put(&key, &value).await.unwrap();
            acked.push((key, value));
        }
        acked
    }

    #[tokio::test]
    async fn a_target_that_keeps_every_write_has_none_lost() {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::new());
        let acked = write_all(&coordinator, 200).await;
        let lost = read_back(coordinator, acked, Duration::from_secs(10)).await;
        assert_eq!((lost.checked, lost.lost, lost.unchecked), (200, 0, 0));
    }

    #[tokio::test]
    async fn writes_a_target_acknowledged_and_dropped_are_found_lost() {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::losing_writes(50));
        let acked = write_all(&coordinator, 200).await;
        let lost = read_back(coordinator, acked, Duration::from_secs(10)).await;
        assert_eq!((lost.checked, lost.lost), (200, 4));
        assert_eq!(lost.lost_keys[0], "/probe/0049");
    }

    #[tokio::test]
    async fn an_overwritten_value_is_a_lost_write() {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::new());
        let mut acked = write_all(&coordinator, 3).await;
        acked[1].1 = b"something else".to_vec();
        let lost = read_back(coordinator, acked, Duration::from_secs(10)).await;
        assert_eq!(lost.lost_keys, vec!["/probe/0001".to_string()]);
    }
}
