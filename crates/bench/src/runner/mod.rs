//! The load generator: opens one session per client (a bounded number at a time:
//! [`opening`]), runs the clients closed- or open-loop
//! through warm-up and the measured window, and collects what they recorded.
//!
//! Each client is a tokio task that asks the [`Pacer`] for its next intended start, runs one
//! operation under the operation timeout, and records into its own [`ClientRecorder`]. The run
//! ends at the end of the window, when the operation budget is spent, or when `stop` is
//! cancelled (Ctrl-C); in-flight operations are then cancelled (actors repair themselves in
//! `finish`) and the workload's own background sessions (watchers, observers) are stopped
//! after catching up (`Workload::stop`), so a run always ends within a bounded time.

pub mod op_classes;
pub mod op_timeout;
pub mod opening;
pub mod pacer;
pub mod recorder;
pub mod timer;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordbench_drivers::{ClientCounters, Coordinator, Session, SessionOptions};
use coordbench_workloads::{Actor, CheckReport, RunClock, Workload, WorkloadError};
use futures::future::{join_all, Either};
use tokio_util::sync::CancellationToken;

use crate::shard::{wait_for_start, Part, StartError, StartRule, Started};

pub use op_timeout::OpTimeout;
pub use opening::{OpenFailure, Opening};

/// The error kind of an operation that hit the operation timeout (`errors_by_kind`).
pub const TIMEOUT: &str = "timeout";
pub use pacer::{LoadMode, Pacer};
pub use recorder::{Aggregator, ClientRecorder, IntervalStats};
pub use timer::PreciseTimer;

/// How much load, for how long.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    pub clients: usize,
    pub mode: LoadMode,
    pub warmup: Duration,
    pub duration: Duration,
    /// Bound on operations started in the measured window.
    pub max_ops: Option<u64>,
    pub op_timeout: Duration,
    /// Length of one results interval (timeseries row, HdrHistogram log entry).
    pub interval: Duration,
    /// Session TTL handed to every client.
    pub ttl: Duration,
    /// At most this many client sessions are opened at once before warm-up
    /// (`--session-opens`; [`opening::DEFAULT_AT_ONCE`] by default).
    pub session_opens: usize,
    /// The share of the clients, start slots and operation budget this process runs
    /// (`--shard`; [`Part::WHOLE`] otherwise).
    pub part: Part,
    /// When warm-up begins once every client has its session.
    pub start: StartRule,
}

/// Why the measured window ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The window ran its full duration.
    Completed,
    /// The operation budget was spent first.
    OpsReached,
    /// `stop` was cancelled (Ctrl-C or SIGTERM).
    Interrupted,
}

/// Everything a run measured.
pub struct RunOutcome {
    pub end_reason: EndReason,
    /// The measured window's length (shorter than planned if interrupted or bounded).
    pub window: Duration,
    pub intervals: BTreeMap<u64, IntervalStats>,
    pub total: IntervalStats,
    pub check: CheckReport,
    /// Summed over all clients, from each client's first measured operation to the end
    /// of its loop, and over the workload's background sessions during the window:
    /// requests and notifications attributable to the measured window.
    pub counters: ClientCounters,
    /// Open loop: intended starts in the window (up to `recorder::SCHEDULE_GRACE` before its
    /// end) never sent before it ended: the generator fell behind its schedule. `None` in
    /// closed loop.
    pub schedule_dropped: Option<u64>,
    /// When the measured window began.
    pub measure_start: Instant,
    /// How long the clients waited, with their sessions open, for the start rule.
    pub start_wait: Duration,
    /// How opening the clients' sessions went.
    pub opening: Opening,
}

/// Failures that prevent measuring at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Session(#[from] OpenFailure),
    #[error("interrupted before measuring began")]
    InterruptedDuringSetup,
    #[error("cannot start the open-loop timer (timerfd): {0}")]
    Timer(std::io::Error),
    #[error(transparent)]
    Start(#[from] StartError),
}

/// A callback the runner calls about once per interval with the time since measuring began
/// (negative during warm-up is reported as zero) and the live aggregator.
pub type Progress<'a> = &'a mut (dyn FnMut(Duration, &Aggregator) + Send);

/// Runs `workload` against `coordinator` according to `plan`.
pub async fn run(
    plan: &LoadPlan,
    coordinator: Arc<dyn Coordinator>,
    workload: Arc<dyn Workload>,
    clock: RunClock,
    stop: CancellationToken,
    progress: Progress<'_>,
) -> Result<RunOutcome, RunError> {
    let (actors, opening, started) = prepare(plan, &coordinator, workload.as_ref(), &stop).await?;
    let window = Window::start(plan)?;
    let tasks = window.spawn_clients(plan, actors, coordinator.books_intended_start());
    let mut ended = window
        .supervise(plan, tasks, workload.as_ref(), &stop, progress)
        .await;
    wind_down(plan, workload.as_ref(), &mut ended.actors, started.held).await;

    let measure_start = window.pacer.measure_start();
    let window_end = ended
        .interrupted_at
        .unwrap_or(ended.loops_ended)
        .min(window.pacer.measure_end());
    let (intervals, total) = window.recorded();
    let check = workload.check((clock.at(measure_start), clock.at(window_end)));
    Ok(RunOutcome {
        end_reason: ended.end_reason(&window.pacer),
        window: window_end.saturating_duration_since(measure_start),
        intervals,
        total,
        check,
        counters: ended
            .measured
            .into_iter()
            .fold(ended.background, |sum, c| sum + c),
        schedule_dropped: window.schedule_dropped(window_end),
        measure_start,
        start_wait: started.waited,
        opening,
    })
}

/// Sets the workload up, opens every client's session and waits for the start rule; any
/// of them ends early if `stop` is cancelled.
async fn prepare(
    plan: &LoadPlan,
    coordinator: &Arc<dyn Coordinator>,
    workload: &dyn Workload,
    stop: &CancellationToken,
) -> Result<(Vec<Box<dyn Actor>>, Opening, Started), RunError> {
    tokio::select! {
        r = workload.setup(coordinator) => r?,
        _ = stop.cancelled() => return Err(RunError::InterruptedDuringSetup),
    }
    let (actors, opening) = tokio::select! {
        r = open_actors(plan, coordinator.as_ref(), workload) => r?,
        _ = stop.cancelled() => return Err(RunError::InterruptedDuringSetup),
    };
    let started = tokio::select! {
        r = wait_for_start(&plan.start, coordinator, plan.ttl) => r?,
        _ = stop.cancelled() => return Err(RunError::InterruptedDuringSetup),
    };
    Ok((actors, opening, started))
}

async fn open_actors(
    plan: &LoadPlan,
    coordinator: &dyn Coordinator,
    workload: &dyn Workload,
) -> Result<(Vec<Box<dyn Actor>>, Opening), RunError> {
    let options = SessionOptions { ttl: plan.ttl };
    // Clients keep their number in the whole run, so a shard's clients do what the same
    // clients of one process would.
    let clients: Vec<usize> = (0..plan.clients).filter(|&c| plan.part.owns(c)).collect();
    let (sessions, opening) =
        opening::open_sessions(coordinator, &clients, &options, plan.session_opens).await?;
    let actors = clients
        .into_iter()
        .zip(sessions)
        .map(|(client, session)| workload.actor(client, session))
        .collect();
    Ok((actors, opening))
}

/// Warm-up and the measured window, from the moment the clients are ready: the schedule
/// they share, what they record into, and the signal that ends their loops.
struct Window {
    /// When warm-up began.
    t0: Instant,
    pacer: Arc<Pacer>,
    aggregator: Arc<Aggregator>,
    /// Open loop only.
    timer: Option<Arc<PreciseTimer>>,
    done: CancellationToken,
}

/// How the clients' loops ended, as [`Window::supervise`] saw it.
struct Ended {
    /// The clients whose loops returned, and what each did in the window.
    actors: Vec<Box<dyn Actor>>,
    measured: Vec<ClientCounters>,
    loops_ended: Instant,
    interrupted_at: Option<Instant>,
    /// The workload's own sessions' counters during the window.
    background: ClientCounters,
}

impl Ended {
    fn end_reason(&self, pacer: &Pacer) -> EndReason {
        match self.interrupted_at {
            Some(_) => EndReason::Interrupted,
            None if self.loops_ended < pacer.measure_end() => EndReason::OpsReached,
            None => EndReason::Completed,
        }
    }
}

impl Window {
    /// Starts warm-up now.
    fn start(plan: &LoadPlan) -> Result<Window, RunError> {
        let t0 = Instant::now();
        let pacer = Arc::new(
            Pacer::new(plan.mode, t0, plan.warmup, plan.duration, plan.max_ops).for_part(plan.part),
        );
        // Closed loop never waits for a start time, so it needs no timer.
        let timer = match plan.mode {
            LoadMode::Open { .. } => {
                Some(Arc::new(PreciseTimer::start().map_err(RunError::Timer)?))
            }
            LoadMode::Closed => None,
        };
        Ok(Window {
            t0,
            aggregator: Aggregator::new(pacer.measure_start(), plan.interval),
            pacer,
            timer,
            done: CancellationToken::new(),
        })
    }

    /// One task per actor, each running [`client_loop`].
    fn spawn_clients(
        &self,
        plan: &LoadPlan,
        actors: Vec<Box<dyn Actor>>,
        book_intended: bool,
    ) -> Vec<tokio::task::JoinHandle<(Box<dyn Actor>, ClientCounters)>> {
        actors
            .into_iter()
            .map(|actor| {
                let recorder =
                    ClientRecorder::new(self.aggregator.clone(), self.pacer.measure_end());
                tokio::spawn(client_loop(
                    actor,
                    recorder,
                    Schedule {
                        pacer: self.pacer.clone(),
                        timer: self.timer.clone(),
                        book_intended,
                    },
                    self.done.clone(),
                    plan.op_timeout,
                ))
            })
            .collect()
    }

    /// Waits for the clients' loops, reporting progress and ending the window on time or
    /// on interrupt.
    async fn supervise(
        &self,
        plan: &LoadPlan,
        tasks: Vec<tokio::task::JoinHandle<(Box<dyn Actor>, ClientCounters)>>,
        workload: &dyn Workload,
        stop: &CancellationToken,
        progress: Progress<'_>,
    ) -> Ended {
        let (pacer, done) = (&self.pacer, &self.done);
        let mut all_clients = Box::pin(join_all(tasks));
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::from_std(self.t0) + plan.interval,
            plan.interval,
        );
        let mut interrupted_at = None;
        // The workload's own sessions count from the start of the window, like the clients'.
        let mut background_at_start = None;
        let finished = loop {
            tokio::select! {
                joined = &mut all_clients => break joined,
                _ = tokio::time::sleep_until(pacer.measure_start().into()), if background_at_start.is_none() => {
                    background_at_start = Some(workload.background_counters());
                }
                _ = tokio::time::sleep_until(pacer.measure_end().into()), if !done.is_cancelled() => done.cancel(),
                _ = stop.cancelled(), if interrupted_at.is_none() => {
                    interrupted_at = Some(Instant::now());
                    done.cancel();
                }
                _ = ticker.tick() => {
                    progress(Instant::now().saturating_duration_since(pacer.measure_start()), &self.aggregator);
                }
            }
        };
        let loops_ended = Instant::now();
        let (actors, measured) = finished.into_iter().filter_map(Result::ok).unzip();
        Ended {
            actors,
            measured,
            loops_ended,
            interrupted_at,
            background: workload.background_counters() - background_at_start.unwrap_or_default(),
        }
    }

    /// What the clients recorded: every interval, and their sum.
    fn recorded(&self) -> (BTreeMap<u64, IntervalStats>, IntervalStats) {
        let intervals = self.aggregator.intervals();
        let mut total = IntervalStats::new();
        for stats in intervals.values() {
            total.merge(stats);
        }
        (intervals, total)
    }

    /// Open loop: the intended starts in the window ending at `window_end` (up to
    /// `recorder::SCHEDULE_GRACE` before it) that were never sent.
    fn schedule_dropped(&self, window_end: Instant) -> Option<u64> {
        self.timer.as_ref().map(|_| {
            let due = window_end
                .checked_sub(recorder::SCHEDULE_GRACE)
                .unwrap_or(window_end);
            self.pacer
                .slots_in_window(due)
                .saturating_sub(self.aggregator.starts())
        })
    }
}

/// Releases what the clients hold and closes their sessions, bounded so a dead server
/// cannot keep the run from writing its results.
async fn wind_down(
    plan: &LoadPlan,
    workload: &dyn Workload,
    actors: &mut [Box<dyn Actor>],
    rendezvous: Option<Box<dyn Session>>,
) {
    let finish_bound = plan.op_timeout.min(Duration::from_secs(5));
    // Background sessions first: they catch up on what the clients did (bounded by the
    // workload; this bounds a stuck close) before the clients' sessions close.
    let _ = tokio::time::timeout(plan.ttl * 2 + Duration::from_secs(10), workload.stop()).await;
    join_all(
        actors
            .iter_mut()
            .map(|a| tokio::time::timeout(finish_bound, a.finish())),
    )
    .await;
    if let Some(mut rendezvous) = rendezvous {
        // Best effort, bounded: the registration's lease or session expires anyway.
        let _ = tokio::time::timeout(finish_bound, rendezvous.close()).await;
    }
}

/// After a failed operation a client pauses briefly, so a dead server is not hammered by a
/// hot loop of instant failures (which would also swamp the error counts).
const ERROR_BACKOFF: Duration = Duration::from_millis(10);

/// Where a client takes its start times from, and what it waits on for them.
struct Schedule {
    pacer: Arc<Pacer>,
    /// Open loop only.
    timer: Option<Arc<PreciseTimer>>,
    /// Operations run with their intended start in scope (the coordinator reads it).
    book_intended: bool,
}

impl Schedule {
    /// Waits until `intended` (`now` is a recent reading of the clock); false if the run
    /// ended first.
    async fn wait(&self, intended: Instant, now: Instant, done: &CancellationToken) -> bool {
        let Some(timer) = &self.timer else {
            return !done.is_cancelled();
        };
        if intended <= now {
            return !done.is_cancelled();
        }
        tokio::select! {
            biased;
            _ = timer.sleep_until(intended) => true,
            _ = done.cancelled() => false,
        }
    }
}

async fn client_loop(
    mut actor: Box<dyn Actor>,
    mut recorder: ClientRecorder,
    schedule: Schedule,
    done: CancellationToken,
    op_timeout: Duration,
) -> (Box<dyn Actor>, ClientCounters) {
    let pacer = &schedule.pacer;
    // A token of its own: the run's token keeps one waiter list for all its clones, and 64
    // clients registering with it around every operation contended for its lock.
    let done = done.child_token();
    // Registered once, polled around every operation.
    let cancelled = done.clone().cancelled_owned();
    let mut cancelled = std::pin::pin!(cancelled);
    let mut timeout = OpTimeout::new(op_timeout);
    // Counters when this client's first measured operation began.
    let mut at_measure_start = None;
    // The clock is read as little as possible: at a million operations a second, reading
    // it was a quarter of the generator's CPU.
    let mut now = Instant::now();
    while let Some(intended) = pacer.next(now) {
        if !schedule.wait(intended, now, &done).await {
            break;
        }
        let started = Instant::now();
        if at_measure_start.is_none() && started >= pacer.measure_start() {
            at_measure_start = Some(actor.counters());
        }
        let result = {
            // Only a target that reads it pays for the task-local around every poll.
            let op = if schedule.book_intended {
                Either::Left(coordbench_drivers::schedule::at_intended_start(
                    intended,
                    actor.run_op(),
                ))
            } else {
                Either::Right(actor.run_op())
            };
            let mut op = std::pin::pin!(op);
            // An operation that completes at once (the null target) needs neither a timeout
            // timer nor a registration with the token; the rest are bounded by both.
            match futures::poll!(op.as_mut()) {
                std::task::Poll::Ready(r) => Ok(r),
                std::task::Poll::Pending => tokio::select! {
                    biased;
                    r = timeout.run(started, op) => r,
                    _ = &mut cancelled => break,
                },
            }
        };
        let class = actor.op_class();
        let completed = Instant::now();
        now = completed;
        // Open loop: the wait between the intended and the actual start is the server's
        // fault too (it kept this client busy), so it is part of the latency.
        let queued = started.saturating_duration_since(intended);
        let lag = schedule.timer.is_some().then(|| {
            recorder.started(intended, started);
            queued
        });
        match result {
            Ok(Ok(op)) => {
                let service = op.latency.unwrap_or(completed - started);
                recorder.record_ok(completed, queued + service, service, lag, class);
            }
            Ok(Err(error)) => {
                recorder.record_error(completed, error.kind(), None, lag, class);
                tokio::time::sleep(ERROR_BACKOFF).await;
                now = Instant::now();
            }
            Err(op_timeout::Elapsed) => {
                recorder.record_error(completed, TIMEOUT, Some(queued + op_timeout), lag, class)
            }
        }
    }
    recorder.flush();
    let now = actor.counters();
    (actor, now - at_measure_start.unwrap_or(now))
}
