//! Recording on the hot path: each client owns a [`ClientRecorder`] that buffers its
//! completions (a few words each) and hands them to the shared [`Aggregator`], which holds
//! one set of HdrHistograms per 1 s interval, when the next interval begins or the buffer
//! holds [`HAND_OFF_EVERY`] of them. No lock is taken per operation, and a client holds no
//! histogram of its own: three 188 KB histograms per client, touched by every reset and
//! read whole by every merge, made 10,000 sessions cost gigabytes and a core.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use coordbench_workloads::histogram::latency_histogram;
use coordbench_workloads::OpClass;
use hdrhistogram::Histogram;

use super::op_classes::ClassSplit;

/// Everything measured in one interval (by one client, or merged over all).
#[derive(Debug, Clone)]
pub struct IntervalStats {
    /// Operations that completed successfully.
    pub ops: u64,
    /// Latency from the intended start (open loop) or the call (closed loop), µs.
    /// Timed-out operations are included at the timeout.
    pub latency: Histogram<u64>,
    /// Time from the actual send to completion, µs.
    pub service: Histogram<u64>,
    /// Open loop: time from the intended start to the actual send, µs: the generator's
    /// own delay plus the wait for a client the server kept busy. Empty in closed loop.
    pub schedule_lag: Histogram<u64>,
    pub errors: BTreeMap<&'static str, u64>,
    /// kv-mixed: the same operations by kind (reads, writes); `None` when no operation of
    /// the interval had a kind.
    pub classes: Option<Box<ClassSplit>>,
    /// Successful operations per [`SUCCESS_TICK`] of the interval, by completion time
    /// (empty until the first): how long the workload's clients went without a success
    /// around a fault (fault::workload_gap).
    pub ok_ticks: Vec<u32>,
}

/// One completed operation as a client buffers it until the hand-off.
#[derive(Debug, Clone, Copy)]
struct Completion {
    /// A success (with its [`SUCCESS_TICK`] in the interval) or an error's kind.
    outcome: Outcome,
    /// µs; `None` for a fast failure, which stays out of the latency histogram.
    latency_us: Option<u64>,
    /// µs; successes only.
    service_us: Option<u64>,
    /// µs; open loop only.
    lag_us: Option<u64>,
    class: Option<OpClass>,
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Ok { tick: usize },
    Error(&'static str),
}

/// A client hands its buffer to the aggregator at least this often (and at every interval
/// boundary): one lock per this many operations, and a bounded buffer per client.
pub const HAND_OFF_EVERY: usize = 256;

/// The resolution of [`IntervalStats::ok_ticks`].
pub const SUCCESS_TICK: Duration = Duration::from_millis(10);

impl IntervalStats {
    pub fn new() -> Self {
        IntervalStats {
            ops: 0,
            latency: latency_histogram(),
            service: latency_histogram(),
            schedule_lag: latency_histogram(),
            errors: BTreeMap::new(),
            classes: None,
            ok_ticks: Vec::new(),
        }
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn merge(&mut self, other: &IntervalStats) {
        self.ops += other.ops;
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        let _ = self.service.add(&other.service);
        let _ = self.schedule_lag.add(&other.schedule_lag);
        for (kind, n) in &other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
        if let Some(theirs) = &other.classes {
            self.classes.get_or_insert_default().merge(theirs);
        }
        if self.ok_ticks.len() < other.ok_ticks.len() {
            self.ok_ticks.resize(other.ok_ticks.len(), 0);
        }
        for (mine, theirs) in self.ok_ticks.iter_mut().zip(&other.ok_ticks) {
            *mine += theirs;
        }
    }

    /// Adds one completion; `ticks` is the interval's number of [`SUCCESS_TICK`]s.
    fn record(&mut self, completion: &Completion, ticks: usize) {
        let Completion {
            outcome,
            latency_us,
            service_us,
            lag_us,
            class,
        } = *completion;
        let class = class.map(|c| self.classes.get_or_insert_default().of_mut(c));
        match outcome {
            Outcome::Ok { tick } => {
                self.ops += 1;
                if self.ok_ticks.len() <= tick {
                    self.ok_ticks.resize(ticks.max(tick + 1), 0);
                }
                self.ok_ticks[tick] += 1;
                if let Some(class) = class {
                    class.ops += 1;
                    class.latency.saturating_record(latency_us.unwrap_or(1));
                }
            }
            Outcome::Error(kind) => {
                *self.errors.entry(kind).or_default() += 1;
                if let Some(class) = class {
                    class.errors += 1;
                    if let Some(latency) = latency_us {
                        class.latency.saturating_record(latency);
                    }
                }
            }
        }
        if let Some(latency) = latency_us {
            self.latency.saturating_record(latency);
        }
        if let Some(service) = service_us {
            self.service.saturating_record(service);
        }
        if let Some(lag) = lag_us {
            self.schedule_lag.saturating_record(lag);
        }
    }
}

impl Default for IntervalStats {
    fn default() -> Self {
        Self::new()
    }
}

/// Collects every client's intervals; read by the console while the run goes on and by the
/// result writers at the end.
pub struct Aggregator {
    interval: Duration,
    measure_start: Instant,
    intervals: Mutex<BTreeMap<u64, IntervalStats>>,
    /// Live totals for the status line (counted per operation, not per interval).
    ops: AtomicU64,
    errors: AtomicU64,
    /// Open loop: operations whose intended start fell in the window and that were sent
    /// before it ended (handed in by each client at its end).
    starts: AtomicU64,
}

impl Aggregator {
    pub fn new(measure_start: Instant, interval: Duration) -> Arc<Self> {
        Arc::new(Aggregator {
            interval,
            measure_start,
            intervals: Mutex::new(BTreeMap::new()),
            ops: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            starts: AtomicU64::new(0),
        })
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    fn table(&self) -> MutexGuard<'_, BTreeMap<u64, IntervalStats>> {
        // Merging cannot leave the table half-updated in a way that matters; keep going.
        self.intervals.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a client's buffered completions of interval `index`.
    fn absorb(&self, index: u64, buffered: &[Completion]) {
        let ticks = self.interval.as_nanos().div_ceil(SUCCESS_TICK.as_nanos()) as usize;
        let mut table = self.table();
        let stats = table.entry(index).or_default();
        for completion in buffered {
            stats.record(completion, ticks);
        }
    }

    /// (operations, errors) recorded so far.
    pub fn live_totals(&self) -> (u64, u64) {
        (
            self.ops.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        )
    }

    /// The 99th percentile over the intervals handed in so far, µs.
    pub fn p99_so_far(&self) -> Option<u64> {
        let mut all = latency_histogram();
        for stats in self.table().values() {
            let _ = all.add(&stats.latency);
        }
        (!all.is_empty()).then(|| all.value_at_quantile(0.99))
    }

    /// Open-loop starts in the window so far (see [`ClientRecorder::started`]).
    pub fn starts(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    /// All intervals, by index from the start of measurement.
    pub fn intervals(&self) -> BTreeMap<u64, IntervalStats> {
        self.table().clone()
    }
}

/// A start intended this close to the end of the window may still be on its way when the
/// window ends; it is not counted as dropped.
pub const SCHEDULE_GRACE: Duration = Duration::from_millis(1);

/// One client's recorder. Completions outside [measure_start, measure_end) are dropped:
/// warm-up and drain do not count.
pub struct ClientRecorder {
    sink: Arc<Aggregator>,
    measure_end: Instant,
    current_index: u64,
    /// Completions of interval `current_index` not yet handed off.
    buffered: Vec<Completion>,
    starts: u64,
}

impl ClientRecorder {
    pub fn new(sink: Arc<Aggregator>, measure_end: Instant) -> Self {
        ClientRecorder {
            sink,
            measure_end,
            current_index: 0,
            buffered: Vec::new(),
            starts: 0,
        }
    }

    /// Open loop: an operation intended at `intended` was sent at `sent`. Counted if it
    /// was intended in the window more than [`SCHEDULE_GRACE`] before its end and sent
    /// before the end: the slots left over are the schedule the generator dropped.
    pub fn started(&mut self, intended: Instant, sent: Instant) {
        if intended >= self.sink.measure_start
            && intended + SCHEDULE_GRACE < self.measure_end
            && sent < self.measure_end
        {
            self.starts += 1;
        }
    }

    /// Makes `current_index` the interval a completion belongs to; its offset into that
    /// interval in ns, or `None` outside the window.
    fn select(&mut self, completed: Instant) -> Option<u128> {
        if completed < self.sink.measure_start || completed >= self.measure_end {
            return None;
        }
        let since = (completed - self.sink.measure_start).as_nanos();
        let interval = self.sink.interval.as_nanos().max(1);
        let index = (since / interval) as u64;
        if index != self.current_index {
            self.flush();
            self.current_index = index;
        }
        Some(since % interval)
    }

    fn buffer(&mut self, completion: Completion) {
        self.buffered.push(completion);
        if self.buffered.len() >= HAND_OFF_EVERY {
            self.flush();
        }
    }

    /// A successful operation; `lag` is its schedule lag (open loop only), `class` its
    /// kind where the workload mixes kinds.
    pub fn record_ok(
        &mut self,
        completed: Instant,
        latency: Duration,
        service: Duration,
        lag: Option<Duration>,
        class: Option<OpClass>,
    ) {
        if let Some(into) = self.select(completed) {
            let tick = (into / SUCCESS_TICK.as_nanos()) as usize;
            self.buffer(Completion {
                outcome: Outcome::Ok { tick },
                latency_us: Some(micros(latency)),
                service_us: Some(micros(service)),
                lag_us: lag.map(micros),
                class,
            });
            self.sink.ops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A failed operation. Timeouts also enter the latency histogram at `latency` (the
    /// timeout), so a stalled server shows in the percentiles; fast failures do not, so they
    /// cannot flatter them.
    pub fn record_error(
        &mut self,
        completed: Instant,
        kind: &'static str,
        latency: Option<Duration>,
        lag: Option<Duration>,
        class: Option<OpClass>,
    ) {
        if self.select(completed).is_some() {
            self.buffer(Completion {
                outcome: Outcome::Error(kind),
                latency_us: latency.map(micros),
                service_us: None,
                lag_us: lag.map(micros),
                class,
            });
            self.sink.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Hands the buffered completions (and the starts counted so far) to the aggregator.
    pub fn flush(&mut self) {
        self.sink
            .starts
            .fetch_add(std::mem::take(&mut self.starts), Ordering::Relaxed);
        if !self.buffered.is_empty() {
            self.sink.absorb(self.current_index, &self.buffered);
            self.buffered.clear();
        }
    }
}

impl Drop for ClientRecorder {
    fn drop(&mut self) {
        self.flush();
    }
}

fn micros(d: Duration) -> u64 {
    // Sub-microsecond operations (the null target) are recorded as 1 µs, the lowest bucket.
    (d.as_micros() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_land_in_their_interval_and_outside_the_window_are_dropped() {
        let start = Instant::now() + Duration::from_secs(1);
        let agg = Aggregator::new(start, Duration::from_secs(1));
        let mut r = ClientRecorder::new(agg.clone(), start + Duration::from_secs(3));
        let ms = Duration::from_millis;
        r.record_ok(start - ms(10), ms(1), ms(1), None, None); // warm-up
        r.record_ok(start + ms(10), ms(2), ms(1), Some(ms(1)), None);
        r.record_ok(start + ms(1500), ms(3), ms(1), None, None);
        r.record_error(start + ms(1600), "timeout", Some(ms(5000)), None, None);
        r.record_error(start + ms(2100), "unreachable", None, Some(ms(3)), None);
        r.record_ok(start + ms(3000), ms(1), ms(1), None, None); // drain
        r.started(start - ms(1), start + ms(1)); // intended in warm-up
        r.started(start + ms(1), start + ms(2));
        r.started(start + ms(2990), start + ms(3001)); // sent after the window
        r.started(start + Duration::from_micros(2_999_500), start + ms(2999)); // within grace
        drop(r);
        let iv = agg.intervals();
        assert_eq!(iv.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(iv[&0].ops, 1);
        assert_eq!(iv[&1].ops, 1);
        assert_eq!(iv[&1].errors["timeout"], 1);
        assert_eq!(
            iv[&1].latency.len(),
            2,
            "the timeout is in the latency histogram"
        );
        assert_eq!(iv[&2].errors["unreachable"], 1);
        assert_eq!(iv[&2].latency.len(), 0, "fast failures are not");
        assert_eq!(iv[&0].schedule_lag.max(), 1000);
        assert_eq!(iv[&2].schedule_lag.len(), 1, "a failure's lag counts too");
        assert_eq!(agg.live_totals(), (2, 2));
        assert_eq!(agg.starts(), 1);
        assert!(
            iv.values().all(|s| s.classes.is_none()),
            "no kinds recorded"
        );
    }

    #[test]
    fn a_full_buffer_is_handed_off_before_the_interval_ends() {
        let start = Instant::now();
        let agg = Aggregator::new(start, Duration::from_secs(1));
        let mut r = ClientRecorder::new(agg.clone(), start + Duration::from_secs(10));
        let at = start + Duration::from_millis(5);
        for _ in 0..HAND_OFF_EVERY + 1 {
            r.record_ok(
                at,
                Duration::from_millis(1),
                Duration::from_millis(1),
                None,
                None,
            );
        }
        let before_drop = agg.intervals();
        assert_eq!(before_drop[&0].ops, HAND_OFF_EVERY as u64);
        assert_eq!(before_drop[&0].ok_ticks[0], HAND_OFF_EVERY as u32);
        assert_eq!(
            before_drop[&0].ok_ticks.len(),
            100,
            "one tick per 10 ms of 1 s"
        );
        drop(r);
        assert_eq!(agg.intervals()[&0].ops, HAND_OFF_EVERY as u64 + 1);
    }

    #[test]
    fn kinds_are_recorded_apart_and_in_the_combined_figures() {
        let start = Instant::now();
        let agg = Aggregator::new(start, Duration::from_secs(1));
        let ms = Duration::from_millis;
        for _ in 0..2 {
            let mut r = ClientRecorder::new(agg.clone(), start + Duration::from_secs(10));
            r.record_ok(start + ms(1), ms(1), ms(1), None, Some(OpClass::Read));
            r.record_ok(start + ms(2), ms(1), ms(1), None, Some(OpClass::Read));
            r.record_ok(start + ms(3), ms(9), ms(9), None, Some(OpClass::Write));
            let timeout = Some(ms(5000));
            r.record_error(
                start + ms(4),
                "timeout",
                timeout,
                None,
                Some(OpClass::Write),
            );
        }
        let iv = agg.intervals();
        let split = iv[&0].classes.as_ref().expect("kinds recorded");
        assert_eq!((iv[&0].ops, iv[&0].errors_total()), (6, 2));
        assert_eq!((split.read.ops, split.read.errors), (4, 0));
        assert_eq!((split.write.ops, split.write.errors), (2, 2));
        assert_eq!(split.read.latency.len() + split.write.latency.len(), 8);
        assert_eq!(iv[&0].latency.len(), 8);
        assert!(split.write.latency.max() >= 5_000_000);
    }

    #[test]
    fn intervals_from_many_clients_merge() {
        let start = Instant::now();
        let agg = Aggregator::new(start, Duration::from_secs(1));
        for _ in 0..4 {
            let mut r = ClientRecorder::new(agg.clone(), start + Duration::from_secs(10));
            for _ in 0..10 {
                r.record_ok(
                    start + Duration::from_millis(5),
                    Duration::from_micros(100),
                    Duration::from_micros(100),
                    None,
                    None,
                );
            }
        }
        let iv = agg.intervals();
        assert_eq!(iv[&0].ops, 40);
        assert_eq!(iv[&0].latency.len(), 40);
    }
}
