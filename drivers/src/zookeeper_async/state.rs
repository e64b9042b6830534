//! Session state as zookeeper-async reports it, and what it never says outright: that it
//! replaced an expired session with a new one.
//!
//! The crate reports state changes only to listeners (`ZooKeeper::add_listener`); its
//! watcher sees no session events (servers send none, and the crate synthesizes none). When
//! a server answers a reconnect with "session expired" (a ConnectResponse with timeout 0),
//! the crate forgets the session id, reports `NotConnected`, and on its next connection asks
//! for a new session, reporting `Connected` again. `NotConnected` is reported on that path
//! only, so `NotConnected` followed by `Connected` is one silent re-establishment.
//!
//! The crate also does not re-register watches after a reconnect (no SetWatches), and the
//! server keeps watches per connection, so every `Connected` bumps an epoch that lock
//! waiters wake on to look again.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;
use zookeeper_async::{ZkState, ZooKeeper};

use crate::CounterHandle;

/// Subscribes to `zk`'s state changes: counts re-establishments into `counters` and returns
/// a receiver of the connection epoch (bumped on every `Connected`).
pub(super) fn track(zk: &ZooKeeper, counters: CounterHandle) -> watch::Receiver<u64> {
    let (epoch_tx, epoch_rx) = watch::channel(0u64);
    let expired = AtomicBool::new(false);
    // Runs inside the crate's connection task: atomics and a watch send only.
    zk.add_listener(move |state| {
        if on_state(state, &expired) {
            counters.session_reestablished();
        }
        if matches!(state, ZkState::Connected | ZkState::ConnectedReadOnly) {
            epoch_tx.send_modify(|epoch| *epoch += 1);
        }
    });
    epoch_rx
}

/// Feeds one state change to the detector; true when it completes a re-establishment.
#[allow(deprecated)] // NotConnected is deprecated, yet it is what the crate reports on expiry.
fn on_state(state: ZkState, expired: &AtomicBool) -> bool {
    match state {
        ZkState::NotConnected => {
            expired.store(true, Ordering::Relaxed);
            false
        }
        ZkState::Connected | ZkState::ConnectedReadOnly => expired.swap(false, Ordering::Relaxed),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn only_a_connection_after_an_expiry_is_a_reestablishment() {
        let expired = AtomicBool::new(false);
        let count = |states: &[ZkState]| states.iter().filter(|&&s| on_state(s, &expired)).count();
        // First connection, then a plain reconnect that kept the session.
        assert_eq!(count(&[ZkState::Connecting, ZkState::Connected]), 0);
        assert_eq!(count(&[ZkState::Connecting, ZkState::Connected]), 0);
        // The server said expired: the next connection is a new session.
        assert_eq!(
            count(&[
                ZkState::NotConnected,
                ZkState::Connecting,
                ZkState::Connected
            ]),
            1
        );
        assert_eq!(
            count(&[ZkState::Connecting, ZkState::Connected, ZkState::Closed]),
            0
        );
    }
}
