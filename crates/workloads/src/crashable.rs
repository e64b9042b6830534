//! A client's session that can crash and come back: what election candidates and discovery
//! instances do under `--crash-leader` / `--crash-instances`, and lock holders whose session
//! expired during a holder pause.
//!
//! A crash abandons the session (it stops refreshing without releasing, so the server frees
//! what it held only on expiry); the client then comes back with a new session. The
//! counters of abandoned sessions are kept, so the run still counts the requests and
//! notifications they carried.

use std::sync::Arc;
use std::time::Duration;

use coordbench_drivers::{
    ClientCounters, Coordinator, CounterHandle, DriverError, Session, SessionOptions,
};

pub(crate) struct CrashableSession {
    /// `None` after a crash until a replacement opens.
    session: Option<Box<dyn Session>>,
    client: usize,
    ttl: Duration,
    /// Where replacements come from; set when the workload was set up.
    coordinator: Option<Arc<dyn Coordinator>>,
    /// Counters of the sessions this client abandoned.
    retired: ClientCounters,
}

impl CrashableSession {
    pub(crate) fn new(
        client: usize,
        session: Box<dyn Session>,
        ttl: Duration,
        coordinator: Option<Arc<dyn Coordinator>>,
    ) -> Self {
        CrashableSession {
            session: Some(session),
            client,
            ttl,
            coordinator,
            retired: ClientCounters::default(),
        }
    }

    /// The live session; an error between a crash and [`Self::reopen`].
    pub(crate) fn get(&mut self) -> Result<&mut Box<dyn Session>, DriverError> {
        self.session
            .as_mut()
            .ok_or_else(|| DriverError::SessionExpired("no session after a crash".into()))
    }

    /// Abandons the session, as a crashed process would.
    pub(crate) fn crash(&mut self) {
        if let Some(mut session) = self.session.take() {
            self.retired = self.retired + session.counters();
            session.abandon();
        }
    }

    /// Opens a replacement after a crash; true if one was opened, false if the session was
    /// still alive.
    pub(crate) async fn reopen(&mut self) -> Result<bool, DriverError> {
        if self.session.is_some() {
            return Ok(false);
        }
        let coordinator = self.coordinator.clone().ok_or_else(|| {
            DriverError::Unsupported("the workload was not set up before its clients ran".into())
        })?;
        let options = SessionOptions { ttl: self.ttl };
        let session = coordinator.open_session(self.client, &options).await?;
        self.session = Some(session);
        Ok(true)
    }

    /// The live session's shared counters (for herd accounting), if it has them.
    pub(crate) fn counter_handle(&self) -> Option<CounterHandle> {
        self.session.as_ref().and_then(|s| s.counter_handle())
    }

    /// Closes the live session, if any (the end of the run).
    pub(crate) async fn close(&mut self) {
        if let Some(session) = self.session.as_mut() {
            let _ = session.close().await;
        }
    }

    /// The counters of every session this client used.
    pub(crate) fn counters(&self) -> ClientCounters {
        self.retired
            + self
                .session
                .as_ref()
                .map_or(ClientCounters::default(), |s| s.counters())
    }
}
