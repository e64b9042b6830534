//! The lock workload: clients contend for a few lock names, hold, release, repeat.
//!
//! Client `c` contends for lock `c % locks`, so each lock has `clients / locks` contenders.
//! Every critical section is recorded for the mutual-exclusion checker, and every release
//! opens a herd window ([`crate::herd`]). An operation is one acquisition; its latency is
//! the acquisition latency (lock() call to return).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{
    ClientCounters, Coordinator, DriverError, LockGuard, LockRecipe, Session,
};

use crate::checker::check_sections;
use crate::herd::HerdMonitor;
use crate::{Actor, CheckReport, OpResult, RunClock, Section, Workload, WorkloadError};

#[derive(Debug, Clone)]
pub struct LockOptions {
    pub locks: usize,
    pub hold: Duration,
    pub recipe: LockRecipe,
}

/// All sections of a run, shared by the actors.
type SectionLog = Arc<Mutex<Vec<Section>>>;

pub struct LockWorkload {
    options: LockOptions,
    clock: RunClock,
    sections: SectionLog,
    herd: Arc<HerdMonitor>,
}

impl LockWorkload {
    pub fn new(options: LockOptions, clock: RunClock) -> Result<Self, WorkloadError> {
        if options.locks == 0 {
            return Err(WorkloadError::Invalid("--locks must be at least 1".into()));
        }
        Ok(LockWorkload {
            options,
            clock,
            sections: SectionLog::default(),
            herd: Arc::default(),
        })
    }

    /// Every section recorded so far (for tests and the history file).
    pub fn sections(&self) -> Vec<Section> {
        lock_log(&self.sections).clone()
    }
}

fn lock_log(log: &SectionLog) -> std::sync::MutexGuard<'_, Vec<Section>> {
    // A panic while pushing cannot leave a Vec half-written; keep going.
    log.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl Workload for LockWorkload {
    fn name(&self) -> &'static str {
        "lock"
    }

    async fn setup(&self, _coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        Ok(())
    }

    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        let lock = format!("lock-{}", client % self.options.locks);
        self.herd.join(&lock, client, session.counter_handle());
        Box::new(LockActor {
            session,
            client,
            lock,
            herd: self.herd.clone(),
            options: self.options.clone(),
            clock: self.clock,
            log: self.sections.clone(),
            held: None,
        })
    }

    fn check(&self, window: (Duration, Duration)) -> CheckReport {
        CheckReport {
            lock: Some(check_sections(&lock_log(&self.sections), window)),
            herd: Some(self.herd.summary(window)),
            ..Default::default()
        }
    }
}

/// A lock the actor holds and the index of its (still open) section in the log.
struct Held {
    guard: LockGuard,
    section: usize,
}

struct LockActor {
    session: Box<dyn Session>,
    client: usize,
    lock: String,
    herd: Arc<HerdMonitor>,
    options: LockOptions,
    clock: RunClock,
    log: SectionLog,
    /// Set while a section is open; left set if the operation was cancelled mid-hold.
    held: Option<Held>,
}

impl LockActor {
    /// Ends the open section at `exit` and releases the lock.
    async fn release(&mut self, held: Held, exit: Duration) -> Result<(), DriverError> {
        lock_log(&self.log)[held.section].exit = exit;
        self.herd.released(&self.lock, self.client, exit);
        let result = self.session.unlock(held.guard).await;
        if result.is_ok() {
            lock_log(&self.log)[held.section].released = Some(self.clock.now());
        }
        result
    }

    /// A previous operation was cancelled while holding: its section ends now (the latest
    /// moment the client could have used the lock) and the lock is released.
    async fn repair(&mut self) {
        if let Some(held) = self.held.take() {
            let _ = self.release(held, self.clock.now()).await;
        }
    }
}

#[async_trait]
impl Actor for LockActor {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        self.repair().await;
        let requested = self.clock.now();
        self.herd.waiting(&self.lock, self.client, true);
        let acquired = self.session.lock(&self.lock, self.options.recipe).await;
        self.herd.waiting(&self.lock, self.client, false);
        let guard = acquired?;
        let enter = self.clock.now();
        self.herd.granted(&self.lock, self.client);
        let section = {
            let mut log = lock_log(&self.log);
            log.push(Section {
                lock: self.lock.clone(),
                client: self.client,
                token: guard.token,
                requested,
                enter,
                exit: Duration::MAX,
                released: None,
            });
            log.len() - 1
        };
        self.held = Some(Held { guard, section });
        if !self.options.hold.is_zero() {
            tokio::time::sleep(self.options.hold).await;
        }
        let exit = self.clock.now();
        if let Some(held) = self.held.take() {
            self.release(held, exit).await?;
        }
        Ok(OpResult {
            latency: Some(enter - requested),
        })
    }

    async fn finish(&mut self) {
        self.repair().await;
        let _ = self.session.close().await;
    }

    fn counters(&self) -> ClientCounters {
        self.session.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_drivers::null::NullCoordinator;
    use coordbench_drivers::SessionOptions;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn null_target_lock_history_is_clean_with_increasing_tokens() {
        let coordinator = NullCoordinator::new();
        let clock = RunClock::start();
        let options = LockOptions {
            locks: 2,
            hold: Duration::from_micros(200),
            recipe: LockRecipe::HerdFree,
        };
        let workload = Arc::new(LockWorkload::new(options, clock).unwrap());
        let mut tasks = Vec::new();
        for c in 0..8 {
            let session = coordinator
                .open_session(
                    c,
                    &SessionOptions {
                        ttl: Duration::from_secs(2),
                    },
                )
                .await
                .unwrap();
            let mut actor = workload.actor(c, session);
            tasks.push(tokio::spawn(async move {
                for _ in 0..20 {
                    actor.run_op().await.unwrap();
                }
                actor.finish().await;
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let report = workload.check((Duration::ZERO, Duration::MAX));
        let lock = report.lock.unwrap();
        assert_eq!(lock.sections, 160);
        assert_eq!((lock.violations, lock.token_regressions), (0, 0));
        assert!(!lock.handover_us.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_cancelled_hold_is_closed_and_released_on_the_next_operation() {
        let coordinator = NullCoordinator::new();
        let clock = RunClock::start();
        let options = LockOptions {
            locks: 1,
            hold: Duration::from_secs(60),
            recipe: LockRecipe::HerdFree,
        };
        let workload = LockWorkload::new(options, clock).unwrap();
        let opts = SessionOptions {
            ttl: Duration::from_secs(2),
        };
        let mut a = workload.actor(0, coordinator.open_session(0, &opts).await.unwrap());
        let cancelled = tokio::time::timeout(Duration::from_millis(20), a.run_op()).await;
        assert!(
            cancelled.is_err(),
            "the 60 s hold should have been cancelled"
        );
        assert_eq!(workload.sections()[0].exit, Duration::MAX);
        // The next operation of the same client repairs: closes the section, releases.
        let mut b = workload.actor(1, coordinator.open_session(1, &opts).await.unwrap());
        a.finish().await;
        let s = workload.sections();
        assert!(s[0].exit < Duration::MAX && s[0].released.is_some());
        let b_op = tokio::time::timeout(Duration::from_millis(20), b.run_op()).await;
        assert!(
            b_op.is_err(),
            "b acquires after a's release, then holds for 60 s"
        );
        assert_eq!(
            workload.check((Duration::ZERO, Duration::MAX)).violations(),
            0
        );
    }
}
