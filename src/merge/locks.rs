//! The lock check across shards: every shard's sections (sections.jsonl) on one clock
//! (each shard's run clock moved by its origin's wall-clock distance from the earliest),
//! ordered by fencing token and judged within the clocks' uncertainty.

use std::time::Duration;

use coordbench_workloads::checker::check_sections_by_token;
use coordbench_workloads::section_log::{self, SECTIONS_FILE};
use coordbench_workloads::LockCheck;

use super::shards::ShardRun;
use super::MergeError;

/// Sections of all shards; `window` is the merged window in wall-clock µs since the epoch.
pub fn check(
    shards: &[ShardRun],
    window_us: (u64, u64),
    uncertainty: Duration,
) -> Result<LockCheck, MergeError> {
    let zero = shards
        .iter()
        .map(|s| s.shard().clock_origin_unix_us)
        .min()
        .unwrap_or(0);
    let mut sections = Vec::new();
    for s in shards {
        let path = s.dir.join(SECTIONS_FILE);
        let shift = Duration::from_micros(s.shard().clock_origin_unix_us - zero);
        let mut own = section_log::read(&path, shift)
            .map_err(|e| MergeError::Unreadable(format!("{}: {e}", path.display())))?;
        sections.append(&mut own);
    }
    let on_clock = |us: u64| Duration::from_micros(us.saturating_sub(zero));
    let window = (on_clock(window_us.0), on_clock(window_us.1));
    Ok(check_sections_by_token(&sections, window, uncertainty))
}
