//! What a shard records in its run.json (`shard`): its part, the run it belongs to, its
//! command line (from which `coordbench merge` rebuilds the whole run's configuration) and
//! the wall-clock anchors of its clocks, from which the merge aligns the shards.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Sharding;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub index: usize,
    pub count: usize,
    pub run_id: String,
    /// How the shard started: `now`, `at` (--start-at) or `rendezvous`.
    pub start: String,
    /// The command line, as given.
    pub args: Vec<String>,
    /// Wall-clock time of the run clock's origin, µs since the Unix epoch: sections.jsonl's
    /// times are offsets from it.
    pub clock_origin_unix_us: u64,
    /// Wall-clock time the measured window began, µs since the Unix epoch.
    pub measure_start_unix_us: Option<u64>,
    /// How long the shard waited for the common start once its clients had sessions, ms.
    pub start_wait_ms: Option<f64>,
}

/// Pairs the monotonic clock with the wall clock once, so instants of this process can be
/// stated as wall-clock times.
#[derive(Debug, Clone, Copy)]
pub struct WallAnchor {
    instant: Instant,
    wall_us: u64,
}

impl WallAnchor {
    pub fn now() -> Self {
        WallAnchor {
            instant: Instant::now(),
            wall_us: unix_us(SystemTime::now()),
        }
    }

    /// `at` as µs since the Unix epoch.
    pub fn wall_us(&self, at: Instant) -> u64 {
        match at.checked_duration_since(self.instant) {
            Some(after) => self.wall_us + after.as_micros() as u64,
            None => self
                .wall_us
                .saturating_sub((self.instant - at).as_micros() as u64),
        }
    }
}

pub fn unix_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_micros() as u64
}

impl ShardRecord {
    /// The record of a shard about to run; `clock_origin` is its run clock's origin.
    pub fn new(sharding: &Sharding, anchor: &WallAnchor, clock_origin: Instant) -> Self {
        ShardRecord {
            index: sharding.part.index,
            count: sharding.part.count,
            run_id: sharding.run_id.clone(),
            start: sharding.start.name().to_string(),
            args: std::env::args().collect(),
            clock_origin_unix_us: anchor.wall_us(clock_origin),
            measure_start_unix_us: None,
            start_wait_ms: None,
        }
    }
}

/// run.json `shards` of a merged run.
#[derive(Debug, Clone, Serialize)]
pub struct MergeRecord {
    pub run_id: String,
    pub count: usize,
    /// Latest minus earliest shard's window start (each by its own wall clock), ms.
    pub start_skew_ms: f64,
    /// lock: how far the shards' clocks may disagree, as the cross-shard check allowed
    /// (`--clock-uncertainty`, else the start skew, at least 1 ms), ms.
    pub clock_uncertainty_ms: Option<f64>,
    pub parts: Vec<MergedShard>,
}

/// One shard, as the merge saw it.
#[derive(Debug, Clone, Serialize)]
pub struct MergedShard {
    pub index: usize,
    pub dir: String,
    pub hostname: Option<String>,
    pub start: String,
    pub measure_start_unix_us: Option<u64>,
    pub start_wait_ms: Option<f64>,
    pub ops: u64,
    pub throughput_ops_s: f64,
    pub complete: bool,
}
