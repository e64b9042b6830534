//! The discovery workload: every client is a service instance; each operation is one
//! membership change of that instance (paced by the run's rate: `--churn`), alternately
//! registering under a fresh name (a leased key / ephemeral znode living as long as the
//! session) and deregistering. The first `crash_instances` instances crash instead of
//! deregistering: they abandon their session, whose registration the server removes only
//! on expiry, and come back with a new session. `watchers` background watchers, spread over
//! `sessions` sessions, keep the membership current with `watch_members`;
//! [`crate::propagation`] judges what they saw.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{
    ClientCounters, Coordinator, DriverError, MembersWatch, Registration, Session, SessionOptions,
};

use crate::background::Background;
use crate::bounded;
use crate::crashable::CrashableSession;
use crate::propagation::{check_propagation, Change, ChangeKind, WatcherLog};
use crate::{Actor, CheckReport, OpResult, RunClock, Workload, WorkloadError};

/// The one service every instance registers with.
pub const SERVICE: &str = "coordbench-discovery";
/// How long the watchers may take to reflect every change once the window ends (crashes:
/// the TTL on top, for the server to expire the abandoned sessions).
const DRAIN_BOUND: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct DiscoveryOptions {
    pub watchers: usize,
    /// Background sessions the watchers are spread over.
    pub sessions: usize,
    pub crash_instances: usize,
    pub ttl: Duration,
}

type Changes = Arc<Mutex<Vec<Change>>>;
type Watchers = Arc<Vec<Mutex<WatcherLog>>>;

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct DiscoveryWorkload {
    options: DiscoveryOptions,
    clock: RunClock,
    changes: Changes,
    watchers: Watchers,
    coordinator: OnceLock<Arc<dyn Coordinator>>,
    background: Background,
}

impl DiscoveryWorkload {
    pub fn new(options: DiscoveryOptions, clock: RunClock) -> Result<Self, WorkloadError> {
        if options.watchers == 0 || options.sessions == 0 {
            return Err(WorkloadError::Invalid(
                "--watchers and --conns must be at least 1".into(),
            ));
        }
        let watchers = Arc::new(
            (0..options.watchers)
                .map(|_| Mutex::new(WatcherLog::default()))
                .collect(),
        );
        Ok(DiscoveryWorkload {
            options,
            clock,
            changes: Changes::default(),
            watchers,
            coordinator: OnceLock::new(),
            background: Background::default(),
        })
    }

    fn judge(&self, window: (Duration, Duration)) -> crate::propagation::PropagationCheck {
        let logs: Vec<WatcherLog> = self.watchers.iter().map(|w| locked(w).clone()).collect();
        check_propagation(&locked(&self.changes), &logs, window, self.options.ttl)
    }

    /// Opens session `s` and the watches of watchers `s`, `s + sessions`, ...
    async fn open_watchers(
        &self,
        coordinator: &Arc<dyn Coordinator>,
        s: usize,
    ) -> Result<(Box<dyn Session>, Vec<(usize, Box<dyn MembersWatch>)>), DriverError> {
        let options = SessionOptions {
            ttl: self.options.ttl,
        };
        let mut session = coordinator.open_session(100_000 + s, &options).await?;
        let mut watches = Vec::new();
        for w in (s..self.options.watchers).step_by(self.options.sessions) {
            let mut watch = session.watch_members(SERVICE).await?;
            let members = watch.next().await?;
            locked(&self.watchers[w]).view(self.clock.now(), members);
            watches.push((w, watch));
        }
        Ok((session, watches))
    }
}

/// Follows the membership until stopped.
async fn follow(mut watch: Box<dyn MembersWatch>, log: Watchers, w: usize, clock: RunClock) {
    while let Ok(members) = watch.next().await {
        locked(&log[w]).view(clock.now(), members);
    }
}

#[async_trait]
impl Workload for DiscoveryWorkload {
    fn name(&self) -> &'static str {
        "discovery"
    }

    async fn setup(&self, coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        let _ = self.coordinator.set(coordinator.clone());
        let sessions = self.options.sessions.min(self.options.watchers);
        let opened = bounded::at_most(
            (0..sessions).map(|s| self.open_watchers(coordinator, s)),
            bounded::AT_ONCE,
        )
        .await
        .map_err(WorkloadError::Setup)?;
        for (session, watches) in opened {
            self.background.keep(session);
            for (w, watch) in watches {
                self.background
                    .spawn(follow(watch, self.watchers.clone(), w, self.clock));
            }
        }
        Ok(())
    }

    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        Box::new(Instance {
            session: CrashableSession::new(
                client,
                session,
                self.options.ttl,
                self.coordinator.get().cloned(),
            ),
            client,
            generation: 0,
            registered: None,
            crashes: client < self.options.crash_instances,
            clock: self.clock,
            changes: self.changes.clone(),
        })
    }

    fn check(&self, window: (Duration, Duration)) -> CheckReport {
        CheckReport {
            discovery: Some(self.judge(window)),
            ..Default::default()
        }
    }

    fn background_counters(&self) -> ClientCounters {
        self.background.counters()
    }

    async fn stop(&self) {
        let bound = if self.options.crash_instances > 0 {
            DRAIN_BOUND + self.options.ttl * 3 / 2
        } else {
            DRAIN_BOUND
        };
        let deadline = tokio::time::Instant::now() + bound;
        while tokio::time::Instant::now() < deadline {
            let c = self.judge((Duration::ZERO, Duration::MAX));
            let crashes_seen = c.crash_listed_us.len() == c.crashes;
            if c.unpropagated == 0 && crashes_seen {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.background.stop().await;
    }
}

struct Instance {
    session: CrashableSession,
    client: usize,
    /// Registrations so far: the next one's name.
    generation: u64,
    registered: Option<Registration>,
    crashes: bool,
    clock: RunClock,
    changes: Changes,
}

impl Instance {
    fn log(&self, name: String, kind: ChangeKind, sent: Duration) {
        let ack = self.clock.now();
        locked(&self.changes).push(Change {
            name,
            kind,
            sent,
            ack,
        });
    }

    /// The session, reopened first if this instance crashed.
    async fn session(&mut self) -> Result<&mut Box<dyn Session>, DriverError> {
        self.session.reopen().await?;
        self.session.get()
    }

    async fn register(&mut self) -> Result<Duration, DriverError> {
        let name = format!("i{:05}-g{:06}", self.client, self.generation);
        let data = format!("127.0.0.1:{}", 20_000 + self.client).into_bytes();
        let clock = self.clock;
        let session = self.session().await?;
        let sent = clock.now();
        let registration = session.register(SERVICE, &name, &data).await?;
        self.generation += 1;
        self.log(name, ChangeKind::Register, sent);
        self.registered = Some(registration);
        Ok(self.clock.now() - sent)
    }

    async fn remove(&mut self, registration: Registration) -> Result<Duration, DriverError> {
        let sent = self.clock.now();
        if self.crashes {
            self.session.crash();
            self.log(registration.instance, ChangeKind::Crash, sent);
            return Ok(Duration::ZERO);
        }
        let name = registration.instance.clone();
        let session = self.session().await?;
        if let Err(e) = session.deregister(registration.clone()).await {
            // Still registered as far as this instance knows: retry next time.
            self.registered = Some(registration);
            return Err(e);
        }
        self.log(name, ChangeKind::Deregister, sent);
        Ok(self.clock.now() - sent)
    }
}

#[async_trait]
impl Actor for Instance {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        let latency = match self.registered.take() {
            None => self.register().await?,
            Some(registration) => self.remove(registration).await?,
        };
        Ok(OpResult {
            latency: Some(latency),
        })
    }

    async fn finish(&mut self) {
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

    async fn run(options: DiscoveryOptions, instances: usize, ops: usize) -> DiscoveryWorkload {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::new());
        let workload =
            Arc::new(DiscoveryWorkload::new(options.clone(), RunClock::start()).unwrap());
        workload.setup(&coordinator).await.unwrap();
        let opts = SessionOptions { ttl: options.ttl };
        let mut tasks = Vec::new();
        for c in 0..instances {
            let mut actor = workload.actor(c, coordinator.open_session(c, &opts).await.unwrap());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ops {
                    actor.run_op().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                actor
            }));
        }
        let mut actors = Vec::new();
        for t in tasks {
            actors.push(t.await.unwrap());
        }
        // As the runner does: the watchers catch up (and crashes expire) before the
        // instances close.
        workload.stop().await;
        for a in actors.iter_mut() {
            a.finish().await;
        }
        Arc::try_unwrap(workload).ok().expect("actors are done")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn null_target_changes_reach_every_watcher() {
        let options = DiscoveryOptions {
            watchers: 5,
            sessions: 2,
            crash_instances: 0,
            ttl: Duration::from_secs(2),
        };
        let c = run(options, 4, 6)
            .await
            .judge((Duration::ZERO, Duration::MAX));
        assert_eq!(c.changes, 24);
        assert_eq!(c.registration_us.len(), 12);
        assert_eq!(c.unpropagated, 0);
        assert_eq!(c.propagation_us.len() as u64 + c.superseded, 24);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crashed_instance_stays_listed_for_about_the_ttl() {
        let ttl = Duration::from_millis(150);
        let options = DiscoveryOptions {
            watchers: 2,
            sessions: 1,
            crash_instances: 1,
            ttl,
        };
        let c = run(options, 2, 4)
            .await
            .judge((Duration::ZERO, Duration::MAX));
        assert_eq!(c.crashes, 2);
        assert_eq!(
            c.crash_listed_us.len(),
            2,
            "the watchers saw every crash go"
        );
        let s = c.summary();
        assert!(
            s.crash_listed_ttl_ratio.unwrap() >= 0.9,
            "listed {:?} ms after the crash, TTL {ttl:?}",
            s.crash_listed_max_ms
        );
    }
}
