//! The lock workload: clients contend for a few lock names, hold, release, repeat.
//!
//! Client `c` contends for lock `c % locks`, so each lock has `clients / locks` contenders.
//! Every critical section is recorded for the mutual-exclusion checker, and every release
//! opens a herd window ([`crate::herd`]). An operation is one acquisition; its latency is
//! the acquisition latency (lock() call to return).
//!
//! With [`FencingOptions`] (`--holder-pause`, `--protect`), each lock protects a resource
//! ([`crate::resource`]) that every holder writes right after entering and again at the end
//! of its section; a seeded fraction of holders freeze ([`Session::freeze`]) inside their
//! section first, as in a GC pause. A paused holder that lost its lock meanwhile still
//! makes its write on resuming (what the resource does with it is the point: see
//! [`crate::fencing`]); its release then fails, which is counted as a lost lock, and it
//! carries on with a new session.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{
    ClientCounters, Coordinator, DriverError, LockGuard, LockRecipe, Session, SessionOptions,
};

use crate::checker::check_sections;
use crate::crashable::CrashableSession;
use crate::fencing::{check_pauses, FencingLog, PausedSection};
use crate::herd::HerdMonitor;
use crate::pause::{HolderPause, PauseDraw};
use crate::resource::{resource_key, Protection, Resources, WriteOutcome};
use crate::{Actor, CheckReport, OpResult, RunClock, Section, Workload, WorkloadError};

#[derive(Debug, Clone)]
pub struct LockOptions {
    pub locks: usize,
    pub hold: Duration,
    pub recipe: LockRecipe,
    /// TTL of the session a client comes back with after its own expired (a pause or a
    /// fault outlasted it).
    pub session_ttl: Duration,
}

/// Holder pauses and the protected resource (both optional; without either the workload
/// writes no resource at all).
#[derive(Debug, Clone, Default)]
pub struct FencingOptions {
    pub pause: Option<HolderPause>,
    pub protection: Protection,
    /// The run's seed: the pause draw comes from it.
    pub seed: u64,
}

/// All sections of a run, shared by the actors.
type SectionLog = Arc<Mutex<Vec<Section>>>;

/// What the actors share when fencing is on.
struct Fencing {
    options: FencingOptions,
    resources: Resources,
    log: Mutex<FencingLog>,
}

pub struct LockWorkload {
    options: LockOptions,
    clock: RunClock,
    sections: SectionLog,
    herd: Arc<HerdMonitor>,
    fencing: Option<Arc<Fencing>>,
    coordinator: OnceLock<Arc<dyn Coordinator>>,
    /// Whether `write_history` writes the sections (sections.jsonl).
    keep_sections: bool,
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
            fencing: None,
            coordinator: OnceLock::new(),
            keep_sections: false,
        })
    }

    /// Writes every section into the run directory (`sections.jsonl`) at the end, for a
    /// check across the processes of a sharded run.
    pub fn keeping_sections(mut self) -> Self {
        self.keep_sections = true;
        self
    }

    /// Turns on holder pauses and the protected resource.
    pub fn with_fencing(mut self, options: FencingOptions) -> Result<Self, WorkloadError> {
        if let Some(p) = options.pause {
            if p.duration.is_zero() || !(p.ratio > 0.0 && p.ratio <= 1.0) {
                return Err(WorkloadError::Invalid(
                    "--holder-pause must be > 0 and --holder-pause-ratio in (0, 1]".into(),
                ));
            }
        }
        self.fencing = Some(Arc::new(Fencing {
            resources: Resources::new(options.protection),
            options,
            log: Mutex::default(),
        }));
        Ok(self)
    }

    /// Every section recorded so far (for tests and the history file).
    pub fn sections(&self) -> Vec<Section> {
        lock_log(&self.sections).clone()
    }

    fn lock_name(&self, i: usize) -> String {
        format!("lock-{i}")
    }
}

fn lock_log<T>(log: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while pushing cannot leave the log half-written; keep going.
    log.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl Workload for LockWorkload {
    fn name(&self) -> &'static str {
        "lock"
    }

    /// With `--protect txn`, creates every lock's resource key (a znode must exist before a
    /// multi can set it).
    async fn setup(&self, coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        let _ = self.coordinator.set(coordinator.clone());
        let Some(fencing) = &self.fencing else {
            return Ok(());
        };
        if fencing.resources.protection() != Protection::Txn {
            return Ok(());
        }
        let options = SessionOptions {
            ttl: self.options.session_ttl,
        };
        // A client id past the contenders', so drivers spread it like a client.
        let mut session = coordinator
            .open_session(200_000, &options)
            .await
            .map_err(WorkloadError::Setup)?;
        for i in 0..self.options.locks {
            let key = resource_key(&self.lock_name(i));
            session.put(&key, b"").await.map_err(WorkloadError::Setup)?;
        }
        session.close().await.map_err(WorkloadError::Setup)
    }

    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        let lock = self.lock_name(client % self.options.locks);
        self.herd.join(&lock, client, session.counter_handle());
        let ttl = self.options.session_ttl;
        let pauses = self.fencing.as_ref().and_then(|f| {
            let pause = f.options.pause?;
            Some((
                pause.duration,
                PauseDraw::new(f.options.seed, client, pause.ratio),
            ))
        });
        Box::new(LockActor {
            session: CrashableSession::new(client, session, ttl, self.coordinator.get().cloned()),
            client,
            lock,
            herd: self.herd.clone(),
            options: self.options.clone(),
            clock: self.clock,
            log: self.sections.clone(),
            held: None,
            fencing: self.fencing.clone(),
            pauses,
        })
    }

    fn check(&self, window: (Duration, Duration)) -> CheckReport {
        let sections = lock_log(&self.sections);
        CheckReport {
            lock: Some(check_sections(&sections, window)),
            herd: Some(self.herd.summary(window)),
            fencing: self
                .fencing
                .as_ref()
                .map(|f| check_pauses(&sections, &lock_log(&f.log), f.resources.protection())),
            ..Default::default()
        }
    }

    fn write_history(&self, dir: &std::path::Path) -> std::io::Result<()> {
        if !self.keep_sections {
            return Ok(());
        }
        crate::section_log::write(
            &dir.join(crate::section_log::SECTIONS_FILE),
            &lock_log(&self.sections),
        )
    }
}

/// A lock the actor holds and the index of its (still open) section in the log.
struct Held {
    guard: LockGuard,
    section: usize,
}

struct LockActor {
    session: CrashableSession,
    client: usize,
    lock: String,
    herd: Arc<HerdMonitor>,
    options: LockOptions,
    clock: RunClock,
    log: SectionLog,
    /// Set while a section is open; left set if the operation was cancelled mid-hold.
    held: Option<Held>,
    fencing: Option<Arc<Fencing>>,
    /// With holder pauses: how long, and this client's draw of which acquisitions pause.
    pauses: Option<(Duration, PauseDraw)>,
}

impl LockActor {
    /// Ends the open section at `exit` and releases the lock.
    async fn release(&mut self, held: Held, exit: Duration) -> Result<(), DriverError> {
        lock_log(&self.log)[held.section].exit = exit;
        self.herd.released(&self.lock, self.client, exit);
        let result = self.session.get()?.unlock(held.guard).await;
        if result.is_ok() {
            lock_log(&self.log)[held.section].released = Some(self.clock.now());
        }
        result
    }

    /// A previous operation was cancelled while holding: its section ends now (the latest
    /// moment the client could have used the lock) and the lock is released. If the session
    /// expired meanwhile (a pause or a fault outlasted it), the client comes back with a new
    /// session on its next operation.
    async fn repair(&mut self) {
        if let Some(held) = self.held.take() {
            let released = self.release(held, self.clock.now()).await;
            if matches!(released, Err(DriverError::SessionExpired(_))) {
                self.session.crash();
            }
        }
    }

    /// A client whose session expired (a pause or a fault outlasted it) comes back with a
    /// new one, as an application would, whose counters the herd accounting follows from
    /// then on.
    async fn reopen(&mut self) -> Result<(), DriverError> {
        if self.session.reopen().await? {
            self.herd
                .join(&self.lock, self.client, self.session.counter_handle());
        }
        Ok(())
    }

    /// Writes the protected resource as `guard`'s holder (nothing without fencing).
    async fn write_resource(&mut self, guard: &LockGuard, phase: &str) -> Option<WriteOutcome> {
        let fencing = self.fencing.clone()?;
        let value = format!("client-{} token-{} {phase}", self.client, guard.token);
        let outcome = match self.session.get() {
            Ok(session) => {
                fencing
                    .resources
                    .write(session.as_mut(), guard, value.as_bytes())
                    .await
            }
            Err(_) => WriteOutcome::Failed,
        };
        lock_log(&fencing.log).record_write(outcome);
        Some(outcome)
    }

    /// Opens the section: the in-process resource sees the entry write before `enter` is
    /// stamped, so a later holder's entry always reaches it before any stale write that
    /// follows it; through the service (`txn`) the write follows the stamp, so handovers
    /// are not charged for it.
    async fn enter(&mut self, guard: LockGuard, requested: Duration) -> Duration {
        let in_process = self
            .fencing
            .as_ref()
            .is_some_and(|f| f.resources.in_process());
        if in_process {
            self.write_resource(&guard, "entry").await;
        }
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
        self.held = Some(Held {
            guard: guard.clone(),
            section,
        });
        if !in_process {
            self.write_resource(&guard, "entry").await;
        }
        enter
    }

    /// The section's body: the hold, then (if drawn) the pause and the write on resuming.
    /// Returns whether the holder paused.
    async fn hold(&mut self, guard: &LockGuard) -> Result<bool, DriverError> {
        if !self.options.hold.is_zero() {
            tokio::time::sleep(self.options.hold).await;
        }
        let pause = self
            .pauses
            .as_mut()
            .and_then(|(d, draw)| draw.next_pauses().then_some(*d));
        if let Some(d) = pause {
            self.session.get()?.freeze(d).await?;
        }
        let resumed = self.clock.now();
        let write_after = self.write_resource(guard, "exit").await;
        if let (Some(_), Some(fencing), Some(held)) = (pause, &self.fencing, &self.held) {
            lock_log(&fencing.log).paused.push(PausedSection {
                section: held.section,
                resumed,
                write_after: write_after.unwrap_or(WriteOutcome::Failed),
            });
        }
        Ok(pause.is_some())
    }
}

#[async_trait]
impl Actor for LockActor {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        self.repair().await;
        self.reopen().await?;
        let requested = self.clock.now();
        self.herd.waiting(&self.lock, self.client, true);
        let acquired = self
            .session
            .get()?
            .lock(&self.lock, self.options.recipe)
            .await;
        self.herd.waiting(&self.lock, self.client, false);
        let guard = match acquired {
            Ok(guard) => guard,
            Err(e) => {
                // The session expired (a cancelled pause, a fault): come back with a new one.
                if matches!(e, DriverError::SessionExpired(_)) {
                    self.session.crash();
                }
                return Err(e);
            }
        };
        let enter = self.enter(guard.clone(), requested).await;
        let paused = self.hold(&guard).await?;
        let exit = self.clock.now();
        if let Some(held) = self.held.take() {
            match self.release(held, exit).await {
                Ok(()) => {}
                // The pause outlasted the session: the lock went with it, as expected.
                Err(DriverError::SessionExpired(_)) if paused => {
                    if let Some(fencing) = &self.fencing {
                        lock_log(&fencing.log).lost_locks += 1;
                    }
                    self.session.crash();
                }
                // The session expired under an unpaused holder (a fault outlasted it): an
                // error, and a new session for the next operation.
                Err(e @ DriverError::SessionExpired(_)) => {
                    self.session.crash();
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(OpResult {
            latency: Some(enter - requested),
        })
    }

    async fn finish(&mut self) {
        self.repair().await;
        self.session.close().await;
    }

    fn counters(&self) -> ClientCounters {
        self.session.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_drivers::null::NullCoordinator;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn null_target_lock_history_is_clean_with_increasing_tokens() {
        let coordinator = NullCoordinator::new();
        let clock = RunClock::start();
        let options = LockOptions {
            locks: 2,
            hold: Duration::from_micros(200),
            recipe: LockRecipe::HerdFree,
            session_ttl: Duration::from_secs(2),
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

    /// Three holders of one null-target lock, every one pausing past its 150 ms TTL, under
    /// `protection`; returns the run's verdict.
    async fn paused_holders(protection: Protection) -> CheckReport {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::new());
        let ttl = Duration::from_millis(150);
        let options = LockOptions {
            locks: 1,
            hold: Duration::ZERO,
            recipe: LockRecipe::HerdFree,
            session_ttl: ttl,
        };
        let fencing = FencingOptions {
            pause: Some(HolderPause {
                duration: Duration::from_millis(300),
                ratio: 1.0,
            }),
            protection,
            seed: 1,
        };
        let workload = Arc::new(
            LockWorkload::new(options, RunClock::start())
                .unwrap()
                .with_fencing(fencing)
                .unwrap(),
        );
        workload.setup(&coordinator).await.unwrap();
        let mut tasks = Vec::new();
        for c in 0..3 {
            let session = coordinator
                .open_session(c, &SessionOptions { ttl })
                .await
                .unwrap();
            let mut actor = workload.actor(c, session);
            tasks.push(tokio::spawn(async move {
                for _ in 0..2 {
                    actor.run_op().await.expect("a paused holder carries on");
                }
                actor.finish().await;
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        workload.check((Duration::ZERO, Duration::MAX))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn paused_holders_write_stale_data_unless_the_resource_fences_them() {
        let (none, token, txn) = tokio::join!(
            paused_holders(Protection::None),
            paused_holders(Protection::Token),
            paused_holders(Protection::Txn),
        );
        for (report, name) in [(&none, "none"), (&token, "token"), (&txn, "txn")] {
            let f = report.fencing.as_ref().unwrap();
            assert_eq!((f.protect, f.paused_sections), (name, 6), "{f:?}");
            assert!(f.unsafe_sections >= 3, "{name}: {f:?}");
            assert!(f.lost_locks >= 3, "{name}: {f:?}");
            assert_eq!(f.stale_writes_failed, 0, "{name}: {f:?}");
            // Mutual exclusion was lost from the clients' view, whatever the resource did.
            assert!(report.violations() > 0, "{name}: no overlap recorded");
        }
        let f = none.fencing.unwrap();
        assert_eq!(f.stale_writes_accepted, f.unsafe_sections, "{f:?}");
        for f in [token.fencing.unwrap(), txn.fencing.unwrap()] {
            assert_eq!(f.stale_writes_accepted, 0, "{f:?}");
            assert_eq!(f.stale_writes_rejected, f.unsafe_sections, "{f:?}");
        }
    }

    #[tokio::test]
    async fn without_fencing_no_resource_is_written_and_no_figures_are_reported() {
        let coordinator = NullCoordinator::new();
        let options = LockOptions {
            locks: 1,
            hold: Duration::ZERO,
            recipe: LockRecipe::HerdFree,
            session_ttl: Duration::from_secs(2),
        };
        let workload = LockWorkload::new(options, RunClock::start()).unwrap();
        let opts = SessionOptions {
            ttl: Duration::from_secs(2),
        };
        let mut a = workload.actor(0, coordinator.open_session(0, &opts).await.unwrap());
        a.run_op().await.unwrap();
        a.finish().await;
        assert!(workload
            .check((Duration::ZERO, Duration::MAX))
            .fencing
            .is_none());
    }

    #[test]
    fn a_pause_of_zero_or_a_ratio_outside_zero_to_one_is_refused() {
        let options = LockOptions {
            locks: 1,
            hold: Duration::ZERO,
            recipe: LockRecipe::HerdFree,
            session_ttl: Duration::from_secs(2),
        };
        for (duration, ratio) in [(0, 0.5), (100, 0.0), (100, 1.5)] {
            let fencing = FencingOptions {
                pause: Some(HolderPause {
                    duration: Duration::from_millis(duration),
                    ratio,
                }),
                ..Default::default()
            };
            let refused = LockWorkload::new(options.clone(), RunClock::start())
                .unwrap()
                .with_fencing(fencing);
            assert!(refused.is_err(), "{duration} ms at {ratio}");
        }
    }

    #[tokio::test]
    async fn a_cancelled_hold_is_closed_and_released_on_the_next_operation() {
        let coordinator = NullCoordinator::new();
        let clock = RunClock::start();
        let options = LockOptions {
            locks: 1,
            hold: Duration::from_secs(60),
            recipe: LockRecipe::HerdFree,
            session_ttl: Duration::from_secs(2),
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
