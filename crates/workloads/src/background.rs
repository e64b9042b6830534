//! Sessions a workload runs beside its clients (watchers, observers): opened in setup,
//! counted into the run's counters, and ended by [`Background::stop`].

use std::sync::Mutex;
use std::time::Duration;

use coordbench_drivers::{ClientCounters, Session};
use tokio::task::JoinHandle;

/// How long closing the background sessions may take at the end of a run.
const CLOSE_BOUND: Duration = Duration::from_secs(2);

#[derive(Default)]
pub struct Background {
    sessions: Mutex<Vec<Box<dyn Session>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Background {
    /// Keeps `session` open until [`Background::stop`]; its counters count from now on.
    pub fn keep(&self, session: Box<dyn Session>) {
        locked(&self.sessions).push(session);
    }

    /// Runs `task` until [`Background::stop`].
    pub fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        locked(&self.tasks).push(tokio::spawn(task));
    }

    /// The kept sessions' counters, summed.
    pub fn counters(&self) -> ClientCounters {
        locked(&self.sessions)
            .iter()
            .fold(ClientCounters::default(), |sum, s| sum + s.counters())
    }

    /// Ends every task, then closes every session (bounded: a dead server cannot hold up
    /// the results).
    pub async fn stop(&self) {
        for task in locked(&self.tasks).drain(..) {
            task.abort();
        }
        let mut sessions = std::mem::take(&mut *locked(&self.sessions));
        let close = futures::future::join_all(sessions.iter_mut().map(|s| s.close()));
        let _ = tokio::time::timeout(CLOSE_BOUND, close).await;
    }
}
