//! The checks across shards: every shard's lock sections or election leaderships
//! (sections.jsonl) on one clock (each shard's run clock moved by its origin's wall-clock
//! distance from the earliest), ordered by fencing token and judged within the clocks'
//! uncertainty; election observers' notifications (observed.jsonl) timed on the same clock.

use std::path::Path;
use std::time::Duration;

use coordbench_workloads::checker::check_sections_by_token;
use coordbench_workloads::election::{observer_latencies, ElectionCheck};
use coordbench_workloads::section_log::{self, OBSERVED_FILE, SECTIONS_FILE};
use coordbench_workloads::{CheckReport, LockCheck, Section};

use coordbench_results::kinds::WorkloadKind;

use super::shards::ShardRun;
use super::MergeError;

/// Every shard's records of `file`, read by `read` and moved onto the common clock.
struct OneClock<'a> {
    shards: &'a [ShardRun],
    /// The earliest run-clock origin, µs since the epoch: zero on the common clock.
    zero: u64,
}

impl<'a> OneClock<'a> {
    fn new(shards: &'a [ShardRun]) -> Self {
        let zero = shards
            .iter()
            .map(|s| s.shard().clock_origin_unix_us)
            .min()
            .unwrap_or(0);
        OneClock { shards, zero }
    }

    /// A wall-clock time (µs since the epoch) on the common clock.
    fn at(&self, wall_us: u64) -> Duration {
        Duration::from_micros(wall_us.saturating_sub(self.zero))
    }

    fn read_all<T>(
        &self,
        file: &str,
        read: impl Fn(&Path, Duration) -> std::io::Result<Vec<T>>,
    ) -> Result<Vec<T>, MergeError> {
        let mut all = Vec::new();
        for s in self.shards {
            let path = s.dir.join(file);
            let shift = Duration::from_micros(s.shard().clock_origin_unix_us - self.zero);
            let mut own = read(&path, shift)
                .map_err(|e| MergeError::Unreadable(format!("{}: {e}", path.display())))?;
            all.append(&mut own);
        }
        Ok(all)
    }

    fn sections(&self) -> Result<Vec<Section>, MergeError> {
        self.read_all(SECTIONS_FILE, section_log::read)
    }
}

/// What the merged run's checker reports for `workload` (nothing for the kv workloads);
/// `observers` is election's (`--watchers`), `window_us` the merged window in wall-clock µs.
pub fn of_workload(
    workload: WorkloadKind,
    observers: usize,
    shards: &[ShardRun],
    window_us: (u64, u64),
    uncertainty: Duration,
) -> Result<CheckReport, MergeError> {
    Ok(match workload {
        WorkloadKind::Lock => CheckReport {
            lock: Some(lock(shards, window_us, uncertainty)?),
            ..Default::default()
        },
        WorkloadKind::Election => CheckReport {
            election: Some(election(shards, window_us, uncertainty, observers)?),
            ..Default::default()
        },
        _ => CheckReport::default(),
    })
}

/// lock: the sections of all shards; `window_us` is the merged window in wall-clock µs.
pub fn lock(
    shards: &[ShardRun],
    window_us: (u64, u64),
    uncertainty: Duration,
) -> Result<LockCheck, MergeError> {
    let clock = OneClock::new(shards);
    let window = (clock.at(window_us.0), clock.at(window_us.1));
    Ok(check_sections_by_token(
        &clock.sections()?,
        window,
        uncertainty,
    ))
}

/// election: every shard's leaderships (an overlap is a split brain) and what every
/// shard's observers saw.
pub fn election(
    shards: &[ShardRun],
    window_us: (u64, u64),
    uncertainty: Duration,
    observers: usize,
) -> Result<ElectionCheck, MergeError> {
    let clock = OneClock::new(shards);
    let window = (clock.at(window_us.0), clock.at(window_us.1));
    let intervals = clock.sections()?;
    let observed = clock.read_all(OBSERVED_FILE, section_log::read_observed)?;
    Ok(ElectionCheck {
        intervals: check_sections_by_token(&intervals, window, uncertainty),
        observers: observers as u64,
        observer_us: observer_latencies(&intervals, &observed, window),
    })
}
