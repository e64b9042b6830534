//! Adding the shards' measurements: intervals aligned by wall-clock second and added
//! histogram by histogram, counters summed, the generators' usage combined.

use std::collections::BTreeMap;
use std::time::Duration;

use coordbench_drivers::ClientCounters;

use coordbench_bench::generator::GeneratorUsage;
use coordbench_bench::runner::IntervalStats;

use super::shards::ShardRun;

/// The shards' intervals on one time line.
pub struct Combined {
    pub intervals: BTreeMap<u64, IntervalStats>,
    pub total: IntervalStats,
    /// From the earliest shard's window start to the latest shard's window end.
    pub window: Duration,
    /// Wall-clock start of the earliest shard's window, µs since the Unix epoch.
    pub origin_us: u64,
    /// Latest minus earliest window start.
    pub start_skew: Duration,
}

/// Each shard's interval `i` is whole second `i + shift` of the merged run, where `shift`
/// is its window start's distance from the earliest one, rounded to whole seconds (0 for
/// shards that started together).
pub fn intervals(shards: &[ShardRun], per_shard: Vec<BTreeMap<u64, IntervalStats>>) -> Combined {
    let starts: Vec<u64> = shards.iter().map(window_start_us).collect();
    let origin_us = starts.iter().copied().min().unwrap_or(0);
    let latest_us = starts.iter().copied().max().unwrap_or(0);
    let mut intervals: BTreeMap<u64, IntervalStats> = BTreeMap::new();
    let mut window = Duration::ZERO;
    for ((shard, own), start) in shards.iter().zip(per_shard).zip(&starts) {
        let shift = ((start - origin_us) as f64 / 1e6).round() as u64;
        for (second, stats) in own {
            intervals.entry(second + shift).or_default().merge(&stats);
        }
        let end = Duration::from_secs(shift) + Duration::from_secs_f64(shard.results().window_s);
        window = window.max(end);
    }
    let mut total = IntervalStats::new();
    for stats in intervals.values() {
        total.merge(stats);
    }
    Combined {
        intervals,
        total,
        window,
        origin_us,
        start_skew: Duration::from_micros(latest_us - origin_us),
    }
}

/// The wall-clock start of a shard's window (its run clock's origin if it did not say).
pub fn window_start_us(shard: &ShardRun) -> u64 {
    let record = shard.shard();
    record
        .measure_start_unix_us
        .unwrap_or(record.clock_origin_unix_us)
}

/// Requests, notifications, keep-alives and replaced sessions of all shards.
pub fn counters(shards: &[ShardRun]) -> ClientCounters {
    shards
        .iter()
        .map(|s| {
            let r = s.results();
            ClientCounters {
                requests: r.requests,
                notifications: r.notifications,
                keepalives: r.keepalives,
                session_reestablishments: r.session_reestablishments,
            }
        })
        .fold(ClientCounters::default(), |sum, c| sum + c)
}

/// Open loop: the shards' dropped starts added (`None` in closed loop).
pub fn schedule_dropped(shards: &[ShardRun]) -> Option<u64> {
    shards
        .iter()
        .map(|s| s.results().schedule_dropped)
        .sum::<Option<u64>>()
}

/// The generators together: CPU and waits summed over the shards' processes, cores
/// added, the largest RSS, saturated when any shard was, real-time when every shard was.
pub fn generators(shards: &[ShardRun], ops: u64, window: Duration) -> Option<GeneratorUsage> {
    let all: Vec<&GeneratorUsage> = shards
        .iter()
        .map(|s| s.generator.as_ref())
        .collect::<Option<_>>()?;
    let cpu_s: f64 = all.iter().map(|g| g.cpu_s).sum();
    let cores: usize = all.iter().map(|g| g.cores).sum();
    let capacity = window.as_secs_f64() * cores as f64;
    Some(GeneratorUsage {
        cpu_s,
        cpu_us_per_op: (ops > 0).then(|| cpu_s * 1e6 / ops as f64),
        cpu_util: if capacity > 0.0 {
            cpu_s / capacity
        } else {
            0.0
        },
        timer_spin_s: all.iter().map(|g| g.timer_spin_s).sum(),
        runqueue_wait_s: all.iter().map(|g| g.runqueue_wait_s).sum(),
        cores,
        peak_rss_mb: all.iter().map(|g| g.peak_rss_mb).fold(0.0, f64::max),
        generator_saturated: all.iter().any(|g| g.generator_saturated),
        saturated_s: all.iter().map(|g| g.saturated_s).fold(0.0, f64::max),
        realtime: all.iter().all(|g| g.realtime),
    })
}
