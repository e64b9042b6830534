//! The workload's own view of each fault, beside the probes'. The probes (probe_writes)
//! open fresh connections and write every few ms: their `first_write_us` and
//! `unavailable_us` say when the service took writes again. The workload's clients hold
//! sessions and connections from before the fault, with requests in flight when it struck:
//! `workload_gap_us` is the longest stretch around t_f in which none of them completed an
//! operation, and `workload_resumed_us` when it ended, both from the successes the
//! recorder counts per 10 ms tick (runner::recorder::SUCCESS_TICK). Where the two differ,
//! the client path (a request the server dropped and left waiting, a connection to a dead
//! member) is the difference. docs/reference.md ("failover.csv columns") defines both.

use std::collections::BTreeMap;
use std::time::Duration;

use super::FaultRecord;
use crate::runner::recorder::SUCCESS_TICK;
use crate::runner::IntervalStats;

/// How far before t_f a gap may begin and still count as the fault's: requests sent just
/// before the fault are the ones it strands.
const BEFORE: Duration = Duration::from_secs(1);
/// How far after t_f the gap is looked for, at most (and never past the next fault).
const AFTER: Duration = Duration::from_secs(30);

/// Fills every record's workload figures from the window's intervals (`interval` long,
/// indexed from the window's start); `offset` is how long after the window's start the
/// injector started, which records' `at_s` count from.
pub fn annotate(
    records: &mut [FaultRecord],
    intervals: &BTreeMap<u64, IntervalStats>,
    interval: Duration,
    offset: Duration,
) {
    let ticks = timeline(intervals, interval);
    let tick_us = SUCCESS_TICK.as_micros() as u64;
    let at_tick = |r: &FaultRecord| {
        let at = offset + Duration::from_secs_f64(r.at_s.max(0.0));
        (at.as_micros() as u64 / tick_us) as usize
    };
    let starts: Vec<usize> = records.iter().map(at_tick).collect();
    for (i, record) in records.iter_mut().enumerate() {
        let t_f = starts[i];
        let end = starts
            .get(i + 1)
            .copied()
            .unwrap_or(usize::MAX)
            .min(t_f + ticks_in(AFTER))
            .min(ticks.len());
        let from = t_f.saturating_sub(ticks_in(BEFORE));
        if let Some((gap_start, gap_end)) = longest_gap(&ticks, from, end, t_f) {
            record.workload_gap_us = Some((gap_end - gap_start) as u64 * tick_us);
            // The tick after the gap holds the first success; its start, from t_f.
            record.workload_resumed_us = Some(gap_end.saturating_sub(t_f) as u64 * tick_us);
        } else if t_f < end {
            record.workload_gap_us = Some(0);
            record.workload_resumed_us = Some(0);
        }
    }
}

fn ticks_in(d: Duration) -> usize {
    (d.as_micros() / SUCCESS_TICK.as_micros()) as usize
}

/// Successes per tick over the whole window, the intervals laid end to end.
fn timeline(intervals: &BTreeMap<u64, IntervalStats>, interval: Duration) -> Vec<u32> {
    let per = interval.as_nanos().div_ceil(SUCCESS_TICK.as_nanos()) as usize;
    let Some(&last) = intervals.keys().next_back() else {
        return Vec::new();
    };
    let mut ticks = vec![0u32; (last as usize + 1) * per];
    for (&index, stats) in intervals {
        let base = index as usize * per;
        for (i, &n) in stats.ok_ticks.iter().take(per).enumerate() {
            ticks[base + i] = n;
        }
    }
    ticks
}

/// The longest run of ticks without a success in `[from, end)` that reaches past `t_f`,
/// as (first empty tick, tick after it); a run still going at `end` is cut there.
fn longest_gap(ticks: &[u32], from: usize, end: usize, t_f: usize) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    let mut run_start = None;
    for (t, &successes) in ticks.iter().enumerate().take(end).skip(from) {
        match (successes == 0, run_start) {
            (true, None) => run_start = Some(t),
            (false, Some(s)) => {
                run_start = None;
                if t > t_f && best.is_none_or(|(a, b)| t - s > b - a) {
                    best = Some((s, t));
                }
            }
            _ => {}
        }
    }
    if let Some(s) = run_start {
        if end > t_f && best.is_none_or(|(a, b)| end - s > b - a) {
            best = Some((s, end));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_stall_reaching_past_the_fault_is_the_gap() {
        // Ticks 0-9 busy, a short stall at 3-4 before t_f = 10, a long one at 12-19.
        let mut ticks = vec![5u32; 30];
        ticks[3] = 0;
        ticks[4] = 0;
        for t in ticks.iter_mut().take(20).skip(12) {
            *t = 0;
        }
        assert_eq!(longest_gap(&ticks, 0, 30, 10), Some((12, 20)));
        // A stall wholly before t_f is not the fault's.
        assert_eq!(longest_gap(&ticks, 0, 10, 10), None);
        // A stall that outlasts the window ends with it.
        let stalled = [5, 5, 0, 0, 0];
        assert_eq!(longest_gap(&stalled, 0, 5, 2), Some((2, 5)));
    }
}
