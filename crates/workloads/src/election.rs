//! The election workload: every client is a candidate in one election; the winner leads for
//! `term`, then resigns, or with `crash_leader` abandons its session (as a crashed process
//! would: the next leader takes over only when the server expires the session) and goes on
//! with a new one. An operation = one won election; its latency = campaign call to win.
//!
//! Every leadership is recorded as an interval on the run's clock: won, believed lost (the
//! leader stops acting as leader just before it resigns, or when it crashes), released
//! (resign acknowledged, or the crash). The mutual-exclusion checker judges the intervals:
//! an overlap is a split brain. `observers` background sessions follow the election with
//! `observe`; their notification latency runs from the new leader's win to the observer
//! learning of it (clamped at zero).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{
    ClientCounters, Coordinator, DriverError, LeaderWatch, Leadership, LockRecipe, Session,
    SessionOptions,
};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::background::Background;
use crate::checker::{check_sections, LockCheck, LockCheckSummary};
use crate::crashable::CrashableSession;
use crate::herd::HerdMonitor;
use crate::histogram::latency_histogram;
use crate::part::Part;
use crate::section_log::{self, OBSERVED_FILE, SECTIONS_FILE};
use crate::{Actor, CheckReport, OpResult, RunClock, Section, Workload, WorkloadError};

/// The one election every candidate campaigns in.
pub const ELECTION: &str = "coordbench-election";

#[derive(Debug, Clone)]
pub struct ElectionOptions {
    pub term: Duration,
    pub crash_leader: bool,
    pub recipe: LockRecipe,
    /// Background sessions that follow the election with `observe`.
    pub observers: usize,
    /// TTL of replacement sessions (and of the observers').
    pub ttl: Duration,
}

/// What an election history shows.
#[derive(Debug, Clone)]
pub struct ElectionCheck {
    /// Leadership intervals judged as lock sections: violations are split brains.
    pub intervals: LockCheck,
    pub observers: u64,
    /// Leader's win to an observer's notification, µs (leaders won inside the window).
    pub observer_us: Histogram<u64>,
}

/// The serializable digest in run.json.
#[derive(Debug, Clone, Serialize)]
pub struct ElectionSummary {
    /// Leaderships recorded, whole run.
    pub terms: u64,
    pub split_brains: u64,
    pub token_regressions: u64,
    pub handover: LockCheckSummary,
    pub observers: u64,
    pub observer_notifications: u64,
    pub observer_p50_us: Option<u64>,
    pub observer_p99_us: Option<u64>,
}

impl ElectionCheck {
    pub fn summary(&self) -> ElectionSummary {
        let h = &self.observer_us;
        let q = |p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
        ElectionSummary {
            terms: self.intervals.sections,
            split_brains: self.intervals.violations,
            token_regressions: self.intervals.token_regressions,
            handover: self.intervals.summary(),
            observers: self.observers,
            observer_notifications: h.len(),
            observer_p50_us: q(0.5),
            observer_p99_us: q(0.99),
        }
    }
}

type Intervals = Arc<Mutex<Vec<Section>>>;
/// (leader token, when an observer learned of it), every observer.
type Observed = Arc<Mutex<Vec<(i64, Duration)>>>;

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct ElectionWorkload {
    options: ElectionOptions,
    clock: RunClock,
    intervals: Intervals,
    observed: Observed,
    herd: Arc<HerdMonitor>,
    coordinator: OnceLock<Arc<dyn Coordinator>>,
    background: Background,
    /// The observers this process runs (all but in a shard of a sharded run).
    part: Part,
    /// Whether `write_history` writes the intervals and what the observers saw.
    keep_history: bool,
}

impl ElectionWorkload {
    pub fn new(options: ElectionOptions, clock: RunClock) -> Self {
        ElectionWorkload {
            options,
            clock,
            intervals: Intervals::default(),
            observed: Observed::default(),
            herd: Arc::default(),
            coordinator: OnceLock::new(),
            background: Background::default(),
            part: Part::WHOLE,
            keep_history: false,
        }
    }

    /// A shard's part of the run: the observers it owns, and at the end its leadership
    /// intervals (sections.jsonl) and observations (observed.jsonl) for a check across
    /// the shards.
    pub fn for_part(mut self, part: Part) -> Self {
        self.part = part;
        self.keep_history = true;
        self
    }

    /// Every leadership interval recorded so far.
    pub fn intervals(&self) -> Vec<Section> {
        locked(&self.intervals).clone()
    }
}

/// Records every leader `watch` reports until stopped.
async fn observe(mut watch: Box<dyn LeaderWatch>, observed: Observed, clock: RunClock) {
    while let Ok(view) = watch.next().await {
        if let Some(view) = view {
            locked(&observed).push((view.token, clock.now()));
        }
    }
}

/// Win-to-notification latencies of the leaders won inside `window`.
pub fn observer_latencies(
    intervals: &[Section],
    observed: &[(i64, Duration)],
    window: (Duration, Duration),
) -> Histogram<u64> {
    let won: HashMap<i64, Duration> = intervals
        .iter()
        .filter(|s| s.enter >= window.0 && s.enter <= window.1)
        .map(|s| (s.token, s.enter))
        .collect();
    let mut h = latency_histogram();
    for (token, at) in observed {
        if let Some(won) = won.get(token) {
            h.saturating_record(at.saturating_sub(*won).as_micros() as u64);
        }
    }
    h
}

#[async_trait]
impl Workload for ElectionWorkload {
    fn name(&self) -> &'static str {
        "election"
    }

    async fn setup(&self, coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        let _ = self.coordinator.set(coordinator.clone());
        let options = SessionOptions {
            ttl: self.options.ttl,
        };
        for o in (0..self.options.observers).filter(|&o| self.part.owns(o)) {
            // Client ids far past the candidates', so drivers spread these like clients.
            let mut session = coordinator
                .open_session(100_000 + o, &options)
                .await
                .map_err(WorkloadError::Setup)?;
            let watch = session
                .observe(ELECTION)
                .await
                .map_err(WorkloadError::Setup)?;
            self.background.keep(session);
            self.background
                .spawn(observe(watch, self.observed.clone(), self.clock));
        }
        Ok(())
    }

    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        self.herd.join(ELECTION, client, session.counter_handle());
        Box::new(Candidate {
            session: CrashableSession::new(
                client,
                session,
                self.options.ttl,
                self.coordinator.get().cloned(),
            ),
            client,
            options: self.options.clone(),
            clock: self.clock,
            intervals: self.intervals.clone(),
            herd: self.herd.clone(),
            held: None,
        })
    }

    fn check(&self, window: (Duration, Duration)) -> CheckReport {
        let intervals = locked(&self.intervals);
        let observed = locked(&self.observed);
        CheckReport {
            election: Some(ElectionCheck {
                intervals: check_sections(&intervals, window),
                observers: self.options.observers as u64,
                observer_us: observer_latencies(&intervals, &observed, window),
            }),
            herd: Some(self.herd.summary(window)),
            ..Default::default()
        }
    }

    fn background_counters(&self) -> ClientCounters {
        self.background.counters()
    }

    async fn stop(&self) {
        self.background.stop().await;
    }

    fn write_history(&self, dir: &std::path::Path) -> std::io::Result<()> {
        if !self.keep_history {
            return Ok(());
        }
        section_log::write(&dir.join(SECTIONS_FILE), &locked(&self.intervals))?;
        section_log::write_observed(&dir.join(OBSERVED_FILE), &locked(&self.observed))
    }
}

/// A leadership the candidate holds and the index of its (still open) interval.
struct Held {
    leadership: Leadership,
    interval: usize,
}

struct Candidate {
    session: CrashableSession,
    client: usize,
    options: ElectionOptions,
    clock: RunClock,
    intervals: Intervals,
    herd: Arc<HerdMonitor>,
    /// Set while leading; left set if the operation was cancelled mid-term.
    held: Option<Held>,
}

impl Candidate {
    fn session(&mut self) -> Result<&mut Box<dyn Session>, DriverError> {
        self.session.get()
    }

    /// A crashed candidate comes back with a new session, whose counters the herd
    /// accounting follows from then on.
    async fn reopen(&mut self) -> Result<(), DriverError> {
        if self.session.reopen().await? {
            self.herd
                .join(ELECTION, self.client, self.session.counter_handle());
        }
        Ok(())
    }

    fn close_interval(&self, interval: usize, exit: Duration, released: Option<Duration>) {
        let mut log = locked(&self.intervals);
        log[interval].exit = exit;
        log[interval].released = released;
    }

    /// Ends the term: resigns, or crashes (abandons the session) with `crash_leader`.
    async fn step_down(&mut self, held: Held) -> Result<(), DriverError> {
        let exit = self.clock.now();
        self.herd.released(ELECTION, self.client, exit);
        if self.options.crash_leader {
            self.close_interval(held.interval, exit, Some(exit));
            self.session.crash();
            return self.reopen().await;
        }
        self.close_interval(held.interval, exit, None);
        self.session()?.resign(held.leadership).await?;
        self.close_interval(held.interval, exit, Some(self.clock.now()));
        Ok(())
    }

    /// A previous operation was cancelled while leading: the term ends now.
    async fn repair(&mut self) -> Result<(), DriverError> {
        if let Some(held) = self.held.take() {
            self.step_down(held).await?;
        }
        self.reopen().await
    }
}

#[async_trait]
impl Actor for Candidate {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        self.repair().await?;
        let value = format!("candidate-{}", self.client).into_bytes();
        let recipe = self.options.recipe;
        let requested = self.clock.now();
        self.herd.waiting(ELECTION, self.client, true);
        let campaign = self.session()?.campaign(ELECTION, &value, recipe).await;
        self.herd.waiting(ELECTION, self.client, false);
        let leadership = campaign?;
        let won = self.clock.now();
        self.herd.granted(ELECTION, self.client);
        let interval = {
            let mut log = locked(&self.intervals);
            log.push(Section {
                lock: ELECTION.to_string(),
                client: self.client,
                token: leadership.token,
                requested,
                enter: won,
                exit: Duration::MAX,
                released: None,
            });
            log.len() - 1
        };
        self.held = Some(Held {
            leadership,
            interval,
        });
        tokio::time::sleep(self.options.term).await;
        if let Some(held) = self.held.take() {
            self.step_down(held).await?;
        }
        Ok(OpResult {
            latency: Some(won - requested),
        })
    }

    async fn finish(&mut self) {
        if let Some(held) = self.held.take() {
            // Resign even after crashes: the run is over, nothing is measured any more.
            let exit = self.clock.now();
            self.close_interval(held.interval, exit, None);
            if let Ok(session) = self.session.get() {
                let _ = session.resign(held.leadership).await;
            }
        }
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

    fn options(crash_leader: bool) -> ElectionOptions {
        ElectionOptions {
            term: Duration::from_millis(2),
            crash_leader,
            recipe: LockRecipe::HerdFree,
            observers: 2,
            ttl: Duration::from_millis(50),
        }
    }

    /// Runs `clients` candidates through `terms` won elections each on the null target.
    async fn run(options: ElectionOptions, clients: usize, terms: usize) -> ElectionWorkload {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::new());
        let workload = Arc::new(ElectionWorkload::new(options.clone(), RunClock::start()));
        workload.setup(&coordinator).await.unwrap();
        let opts = SessionOptions { ttl: options.ttl };
        let mut tasks = Vec::new();
        for c in 0..clients {
            let mut actor = workload.actor(c, coordinator.open_session(c, &opts).await.unwrap());
            tasks.push(tokio::spawn(async move {
                for _ in 0..terms {
                    actor.run_op().await.unwrap();
                }
                actor.finish().await;
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        workload.stop().await;
        Arc::try_unwrap(workload).ok().expect("actors are done")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn null_target_elections_have_no_split_brain_and_observers_follow() {
        let workload = run(options(false), 4, 10).await;
        let report = workload.check((Duration::ZERO, Duration::MAX));
        let e = report.election.unwrap();
        assert_eq!(e.intervals.sections, 40);
        assert_eq!(
            (e.intervals.violations, e.intervals.token_regressions),
            (0, 0)
        );
        assert!(!e.intervals.handover_us.as_ref().unwrap().is_empty());
        assert!(!e.observer_us.is_empty(), "observers saw no leader");
        let herd = report.herd.unwrap();
        assert!(herd.releases > 0);
        // Herd-free on the null target: only the successor is woken.
        assert!(herd.notifications_per_release.unwrap() <= 1.0, "{herd:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crashed_leader_is_succeeded_only_after_its_session_expires() {
        let o = options(true);
        let ttl = o.ttl;
        let workload = run(o, 3, 3).await;
        let e = workload
            .check((Duration::ZERO, Duration::MAX))
            .election
            .unwrap();
        assert_eq!(e.intervals.violations, 0);
        let handovers = e.intervals.handover_us.unwrap();
        assert!(!handovers.is_empty());
        assert!(
            handovers.min() >= ttl.as_micros() as u64 * 9 / 10,
            "a handover after a crash took {} µs, under the {ttl:?} TTL",
            handovers.min()
        );
    }

    #[test]
    fn overlapping_leaderships_are_split_brains() {
        let ms = Duration::from_millis;
        let interval = |client, token, enter, exit| Section {
            lock: ELECTION.into(),
            client,
            token,
            requested: ms(0),
            enter: ms(enter),
            exit: ms(exit),
            released: Some(ms(exit + 1)),
        };
        let intervals = vec![interval(0, 1, 0, 10), interval(1, 2, 5, 20)];
        let check = check_sections(&intervals, (ms(0), ms(100)));
        assert_eq!(check.violations, 1);
        let report = CheckReport {
            election: Some(ElectionCheck {
                intervals: check,
                observers: 0,
                observer_us: latency_histogram(),
            }),
            ..Default::default()
        };
        assert_eq!(report.violations(), 1);
        // Observer latency: from the win of the leader it reports.
        let h = observer_latencies(&intervals, &[(2, ms(7)), (9, ms(1))], (ms(0), ms(100)));
        assert_eq!(h.len(), 1);
        assert!(h.equivalent(h.max(), 2000));
    }
}
