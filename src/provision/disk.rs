//! Where members keep their data, and how much syncing it costs.
//!
//! Coordination services fsync their log on every commit, so the storage under the data
//! directories often dominates write latency. `--disk` makes that choice explicit, and
//! [`probe_sync_latency`] measures what one sync costs on the chosen storage so results can
//! be read against it.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{ClusterSpec, ProvisionError};

/// The storage behind member data directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DiskKind {
    /// A fresh directory under /dev/shm (RAM): fsync is a no-op; removed when the cluster stops.
    Tmpfs,
    /// `<work_dir>/data` on the local filesystem, synced as the server normally does.
    Disk,
    /// Like `disk`, but the server is told not to sync (where it supports that).
    Nofsync,
}

impl DiskKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DiskKind::Tmpfs => "tmpfs",
            DiskKind::Disk => "disk",
            DiskKind::Nofsync => "nofsync",
        }
    }
}

impl fmt::Display for DiskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DiskKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "tmpfs" => Ok(DiskKind::Tmpfs),
            "disk" => Ok(DiskKind::Disk),
            "nofsync" => Ok(DiskKind::Nofsync),
            other => Err(format!(
                "unknown disk kind '{other}' (expected tmpfs, disk or nofsync)"
            )),
        }
    }
}

/// The directory under which each member gets its own data directory.
#[derive(Debug, Clone)]
pub struct DataRoot {
    pub path: PathBuf,
    /// Deleted when the cluster stops: data directories are scratch (etcd alone
    /// preallocates hundreds of MB of WAL), and results must stay small.
    pub remove_on_stop: bool,
}

/// Where tmpfs data roots are created.
const SHM: &str = "/dev/shm";
/// `statfs` magic number of tmpfs (linux/magic.h).
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Creates the data root for `spec`: a fresh directory under /dev/shm for tmpfs, else
/// `<work_dir>/data` (created if missing). Member directories inside it are the launcher's.
pub fn create_data_root(spec: &ClusterSpec, target: &str) -> Result<DataRoot, ProvisionError> {
    match spec.disk {
        DiskKind::Tmpfs => {
            let shm = Path::new(SHM);
            if !is_tmpfs(shm) {
                return Err(ProvisionError::Unsupported(format!(
                    "{SHM} is not a tmpfs mount on this machine, so --disk tmpfs is unavailable; use --disk disk"
                )));
            }
            // Unique per process and call, so concurrent runs never share a directory.
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let seq = SEQ.fetch_add(1, Ordering::Relaxed);
            let path = shm.join(format!(
                "coordbench-{target}-{}-{seq}-{nanos}",
                std::process::id()
            ));
            fs::create_dir(&path)
                .map_err(|e| ProvisionError::io(format!("creating {}", path.display()), e))?;
            Ok(DataRoot {
                path,
                remove_on_stop: true,
            })
        }
        DiskKind::Disk | DiskKind::Nofsync => {
            let path = spec.work_dir.join("data");
            fs::create_dir_all(&path)
                .map_err(|e| ProvisionError::io(format!("creating {}", path.display()), e))?;
            Ok(DataRoot {
                path,
                remove_on_stop: true,
            })
        }
    }
}

fn is_tmpfs(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == TMPFS_MAGIC
    }
}

/// The cost of one small synchronous write on some storage, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SyncProbe {
    pub samples: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// A sensible sample count for [`probe_sync_latency`]: enough for a p99 estimate, a fraction
/// of a second on an SSD.
pub const DEFAULT_SYNC_SAMPLES: usize = 50;

/// Appends 4 KiB and `fdatasync`s, `samples` times, in a scratch file in `dir` (removed
/// afterwards), timing each write+sync — roughly what a WAL append costs there.
pub fn probe_sync_latency(dir: &Path, samples: usize) -> io::Result<SyncProbe> {
    let samples = samples.max(1);
    let path = dir.join(format!(".coordbench-sync-probe-{}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)?;
        let block = [0xA5u8; 4096];
        let mut us = Vec::with_capacity(samples);
        for _ in 0..samples {
            let t = Instant::now();
            f.write_all(&block)?;
            f.sync_data()?;
            // Round up so a measurable sync never reports 0 µs.
            us.push(t.elapsed().as_nanos().div_ceil(1000).max(1) as u64);
        }
        us.sort_unstable();
        let pick = |q: f64| us[((q * samples as f64).ceil() as usize).clamp(1, samples) - 1];
        Ok(SyncProbe {
            samples,
            p50_us: pick(0.50),
            p99_us: pick(0.99),
            max_us: us[samples - 1],
        })
    })();
    let _ = fs::remove_file(&path);
    result
}
