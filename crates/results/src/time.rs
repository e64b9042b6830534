//! Timestamps as records write them, and the default results directory named after one.

use std::path::PathBuf;
use std::time::SystemTime;

/// `results/<UTC time>-<target>-<workload>`, e.g. `results/20261130T063000Z-etcd-lock`.
pub fn default_out_dir(target: &str, workload: &str) -> PathBuf {
    PathBuf::from("results").join(format!(
        "{}-{target}-{workload}",
        compact_utc(SystemTime::now())
    ))
}

/// Now, as RFC 3339 in UTC to the millisecond: every record's timestamps.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// `20261130T063000Z`: sortable and free of characters shells and file systems dislike.
pub fn compact_utc(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time)
        .to_string()
        .replace(['-', ':'], "")
}
