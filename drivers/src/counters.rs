//! Per-client counters of requests sent and notifications received.
//!
//! Herd-effect figures are built from these: a waiter's requests and watch events between a
//! release and the next grant. They are atomics because a session's background tasks (lease
//! keep-alive, watch streams) count too. `session_reestablishments` counts sessions a client
//! library replaced on its own after the server expired them (zookeeper-async does): the old
//! session's ephemeral nodes, locks included, are gone without the client being told.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A snapshot of one client's counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ClientCounters {
    /// Requests this client sent to the server (RPCs, including stream openings).
    pub requests: u64,
    /// Watch events this client received.
    pub notifications: u64,
    /// Session keep-alive requests (kept apart so they do not blur herd figures).
    pub keepalives: u64,
    /// Times the client library silently replaced an expired session with a new one.
    pub session_reestablishments: u64,
}

impl std::ops::Add for ClientCounters {
    type Output = ClientCounters;
    fn add(self, rhs: ClientCounters) -> ClientCounters {
        ClientCounters {
            requests: self.requests + rhs.requests,
            notifications: self.notifications + rhs.notifications,
            keepalives: self.keepalives + rhs.keepalives,
            session_reestablishments: self.session_reestablishments + rhs.session_reestablishments,
        }
    }
}

impl std::ops::Sub for ClientCounters {
    type Output = ClientCounters;
    fn sub(self, rhs: ClientCounters) -> ClientCounters {
        ClientCounters {
            requests: self.requests.saturating_sub(rhs.requests),
            notifications: self.notifications.saturating_sub(rhs.notifications),
            keepalives: self.keepalives.saturating_sub(rhs.keepalives),
            session_reestablishments: self
                .session_reestablishments
                .saturating_sub(rhs.session_reestablishments),
        }
    }
}

/// A shared, cheaply cloned handle a session and its tasks count into.
#[derive(Debug, Default, Clone)]
pub struct CounterHandle(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    notifications: AtomicU64,
    keepalives: AtomicU64,
    session_reestablishments: AtomicU64,
}

impl CounterHandle {
    pub fn request(&self) {
        self.0.requests.fetch_add(1, Ordering::Relaxed);
    }
    pub fn notifications(&self, n: u64) {
        self.0.notifications.fetch_add(n, Ordering::Relaxed);
    }
    pub fn keepalive(&self) {
        self.0.keepalives.fetch_add(1, Ordering::Relaxed);
    }
    pub fn session_reestablished(&self) {
        self.0
            .session_reestablishments
            .fetch_add(1, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> ClientCounters {
        ClientCounters {
            requests: self.0.requests.load(Ordering::Relaxed),
            notifications: self.0.notifications.load(Ordering::Relaxed),
            keepalives: self.0.keepalives.load(Ordering::Relaxed),
            session_reestablishments: self.0.session_reestablishments.load(Ordering::Relaxed),
        }
    }
}
