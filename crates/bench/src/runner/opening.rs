//! Opening the clients' sessions before warm-up, a bounded number at a time.
//!
//! Opening every client's session at once makes each open wait behind all the others: at
//! 10,000 ZooKeeper sessions the first ones missed the driver's connect timeout while the
//! crowd behind them connected. Here at most `at_once` opens are in flight (a sliding
//! window: a finished open lets the next begin), so each waits behind at most that many,
//! whatever the number of clients, and each is still bounded by the driver's own connect
//! timeout. The same applies to every target.

use std::time::{Duration, Instant};

use coordbench_drivers::{Coordinator, DriverError, Session, SessionOptions};
use futures::StreamExt;

/// Sessions opened at once unless `--session-opens` says otherwise (the same bound as a
/// workload's own setup sessions).
pub const DEFAULT_AT_ONCE: usize = coordbench_workloads::bounded::AT_ONCE;

/// How opening the clients' sessions went (run.json `results.session_opening`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Opening {
    /// Sessions opened (this process's clients).
    pub sessions: usize,
    /// At most this many were opening at once.
    pub at_once: usize,
    /// From the first open to the last session open.
    pub took: Duration,
    /// The longest single open.
    pub slowest: Duration,
}

/// A session that did not open, and how far opening had got.
#[derive(Debug, thiserror::Error)]
#[error("could not open the session of client {client}: {source} ({opened} of {sessions} sessions open after {after:.1?}, at most {at_once} opening at once)")]
pub struct OpenFailure {
    pub client: usize,
    pub source: DriverError,
    pub opened: usize,
    pub sessions: usize,
    pub after: Duration,
    pub at_once: usize,
}

/// Opens the session of every client in `clients`, at most `at_once` at a time; the
/// sessions come back in the order of `clients`. The first failure ends opening (the
/// sessions already open are dropped).
pub async fn open_sessions(
    coordinator: &dyn Coordinator,
    clients: &[usize],
    options: &SessionOptions,
    at_once: usize,
) -> Result<(Vec<Box<dyn Session>>, Opening), OpenFailure> {
    let at_once = at_once.max(1);
    let began = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut opened: Vec<Option<Box<dyn Session>>> = Vec::with_capacity(clients.len());
    opened.resize_with(clients.len(), || None);
    let mut done = 0;
    // Each open's clock starts when it is first polled, i.e. when it enters the window.
    let mut opens =
        futures::stream::iter(clients.iter().enumerate().map(|(i, &client)| async move {
            let start = Instant::now();
            let result = coordinator.open_session(client, options).await;
            (i, result, start.elapsed())
        }))
        .buffer_unordered(at_once);
    while let Some((i, result, took)) = opens.next().await {
        slowest = slowest.max(took);
        match result {
            Ok(session) => opened[i] = Some(session),
            Err(source) => {
                return Err(OpenFailure {
                    client: clients[i],
                    source,
                    opened: done,
                    sessions: clients.len(),
                    after: began.elapsed(),
                    at_once,
                })
            }
        }
        done += 1;
    }
    let sessions = opened.into_iter().flatten().collect();
    let opening = Opening {
        sessions: clients.len(),
        at_once,
        took: began.elapsed(),
        slowest,
    };
    Ok((sessions, opening))
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_drivers::null::NullCoordinator;

    #[tokio::test]
    async fn every_client_gets_a_session_whatever_the_window() {
        let coordinator = NullCoordinator::new();
        let options = SessionOptions {
            ttl: Duration::from_secs(10),
        };
        let clients: Vec<usize> = (0..50).map(|c| c * 3).collect();
        for at_once in [0, 1, 7, 50, 1000] {
            let (sessions, opening) = open_sessions(&coordinator, &clients, &options, at_once)
                .await
                .expect("null sessions open");
            assert_eq!(sessions.len(), clients.len());
            assert_eq!(opening.sessions, clients.len());
            assert_eq!(opening.at_once, at_once.max(1));
            assert!(opening.slowest <= opening.took);
        }
    }
}
