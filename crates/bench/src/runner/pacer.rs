//! When each client starts its next operation: closed loop (as soon as the last returned)
//! or open loop (at intended start times `t0 + i/rate`, shared by all clients, so a stalled
//! server is charged for the operations it delayed: coordinated omission corrected).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::shard::Part;

/// How load is offered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadMode {
    /// Each client issues its next operation when the last returns.
    Closed,
    /// `rate` operations per second in total, at intended start times.
    Open { rate: f64 },
}

/// Hands out intended start times. Shared by all clients of a run.
pub struct Pacer {
    mode: LoadMode,
    /// Start of warm-up: the schedule's origin.
    t0: Instant,
    measure_start: Instant,
    measure_end: Instant,
    /// Bound on operations started inside the measured window.
    max_ops: Option<u64>,
    /// Open loop: next slot index. Closed loop: operations started in the window.
    counter: AtomicU64,
    /// Open loop: slots that fall in warm-up (they do not count against `max_ops`).
    warmup_slots: u64,
    /// The share of the whole run's slots (open loop) and budget this process has.
    part: Part,
}

impl Pacer {
    pub fn new(
        mode: LoadMode,
        t0: Instant,
        warmup: Duration,
        duration: Duration,
        max_ops: Option<u64>,
    ) -> Self {
        let warmup_slots = match mode {
            LoadMode::Open { rate } => (warmup.as_secs_f64() * rate).ceil() as u64,
            LoadMode::Closed => 0,
        };
        Pacer {
            mode,
            t0,
            measure_start: t0 + warmup,
            measure_end: t0 + warmup + duration,
            max_ops,
            counter: AtomicU64::new(0),
            warmup_slots,
            part: Part::WHOLE,
        }
    }

    /// This shard's part of the whole run's schedule: open loop, every `count`-th slot of
    /// the whole run's (`t0 + (k * count + index) / rate`); in both loops the budget's share.
    pub fn for_part(mut self, part: Part) -> Self {
        let whole_warmup = self.warmup_slots;
        self.warmup_slots = part.share_of(whole_warmup);
        self.max_ops = self.max_ops.map(|max| match self.mode {
            LoadMode::Open { .. } => part.share_of(whole_warmup + max) - self.warmup_slots,
            LoadMode::Closed => part.share_of(max),
        });
        self.part = part;
        self
    }

    pub fn measure_start(&self) -> Instant {
        self.measure_start
    }

    pub fn measure_end(&self) -> Instant {
        self.measure_end
    }

    /// Open loop: how many intended starts fall in the measured window up to `end`
    /// (within the operation budget). Zero in closed loop.
    pub fn slots_in_window(&self, end: Instant) -> u64 {
        let LoadMode::Open { rate } = self.mode else {
            return 0;
        };
        let end = end.min(self.measure_end);
        let before_end = self
            .part
            .share_of((end.saturating_duration_since(self.t0).as_secs_f64() * rate).ceil() as u64);
        let in_window = before_end.saturating_sub(self.warmup_slots);
        self.max_ops.map_or(in_window, |max| in_window.min(max))
    }

    /// The intended start of the caller's next operation, or `None` when the run is over
    /// (the window has ended or the operation budget is spent).
    pub fn next(&self, now: Instant) -> Option<Instant> {
        match self.mode {
            LoadMode::Closed => {
                if now >= self.measure_end {
                    return None;
                }
                if let (Some(max), true) = (self.max_ops, now >= self.measure_start) {
                    if self.counter.fetch_add(1, Ordering::Relaxed) >= max {
                        return None;
                    }
                }
                Some(now)
            }
            LoadMode::Open { rate } => {
                let slot = self.counter.fetch_add(1, Ordering::Relaxed);
                if let Some(max) = self.max_ops {
                    if slot >= self.warmup_slots + max {
                        return None;
                    }
                }
                let whole_slot = self.part.global(slot);
                let intended = self.t0 + Duration::from_secs_f64(whole_slot as f64 / rate);
                (intended < self.measure_end).then_some(intended)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_loop_slots_are_evenly_spaced_and_end_with_the_window() {
        let t0 = Instant::now();
        let p = Pacer::new(
            LoadMode::Open { rate: 1000.0 },
            t0,
            Duration::ZERO,
            Duration::from_millis(10),
            None,
        );
        let slots: Vec<_> = std::iter::from_fn(|| p.next(t0)).collect();
        assert_eq!(slots.len(), 10);
        assert_eq!(p.slots_in_window(t0 + Duration::from_secs(1)), 10);
        assert_eq!(p.slots_in_window(t0 + Duration::from_micros(4500)), 5);
        assert_eq!(slots[3] - slots[2], Duration::from_millis(1));
    }

    #[test]
    fn the_operation_budget_excludes_warm_up() {
        let t0 = Instant::now();
        let p = Pacer::new(
            LoadMode::Open { rate: 100.0 },
            t0,
            Duration::from_millis(100),
            Duration::from_secs(10),
            Some(5),
        );
        assert_eq!(std::iter::from_fn(|| p.next(t0)).count(), 10 + 5);
        let c = Pacer::new(
            LoadMode::Closed,
            t0,
            Duration::ZERO,
            Duration::from_secs(10),
            Some(3),
        );
        assert_eq!(
            std::iter::from_fn(|| c.next(Instant::now()))
                .take(10)
                .count(),
            3
        );
    }

    #[test]
    fn the_shards_schedules_together_are_the_whole_runs() {
        let t0 = Instant::now();
        let pacer = |part| {
            Pacer::new(
                LoadMode::Open { rate: 1000.0 },
                t0,
                Duration::from_millis(5),
                Duration::from_millis(10),
                Some(7),
            )
            .for_part(part)
        };
        let mut slots = Vec::new();
        let mut in_window = 0;
        for index in 0..3 {
            let p = pacer(Part { index, count: 3 });
            slots.extend(std::iter::from_fn(|| p.next(t0)));
            in_window += p.slots_in_window(t0 + Duration::from_secs(1));
        }
        slots.sort();
        let single = pacer(Part::WHOLE);
        let expected: Vec<_> = std::iter::from_fn(|| single.next(t0)).collect();
        assert_eq!(slots, expected);
        assert_eq!(expected.len(), 5 + 7);
        assert_eq!(in_window, 7);
    }

    #[test]
    fn closed_loop_stops_at_the_end_of_the_window() {
        let t0 = Instant::now();
        let c = Pacer::new(
            LoadMode::Closed,
            t0,
            Duration::ZERO,
            Duration::from_millis(5),
            None,
        );
        assert!(c.next(t0).is_some());
        assert!(c.next(t0 + Duration::from_millis(5)).is_none());
    }
}
