//! Where members keep their data, and how much syncing it costs.
//!
//! Coordination services fsync their log on every commit, so the storage under the data
//! directories often dominates write latency. `--disk` makes that choice explicit, and
//! [`probe_sync_latency`] measures what one sync costs on the chosen storage so results can
//! be read against it.
//!
//! The emulated kinds (`hdd`, `ssd`, `nvme`) keep data on tmpfs and add a fixed delay to
//! every sync: the built-in engines in their own `Disk`, etcd and ZooKeeper through the
//! sync-delay filesystem ([`crate::syncfs`]) mounted over each member's directory
//! ([`member_dir`]). The default delays are the engines' (engines/node/src/disk.rs, where
//! their sources are cited), so one table serves every target.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use std::time::Duration;

use coordbench_node::disk::DiskKind as EngineDisk;
use serde::{Deserialize, Serialize};

use super::{Cluster, ClusterSpec, ProvisionError};
use crate::syncfs::{SyncFsMount, SyncPolicy};

/// The storage behind member data directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DiskKind {
    /// A fresh directory under /dev/shm (RAM): fsync is a no-op; removed when the cluster stops.
    Tmpfs,
    /// `<work_dir>/data` on the local filesystem, synced as the server normally does.
    Disk,
    /// Like `disk`, but syncs are skipped: the server's own switch where it has one, else
    /// the sync-delay filesystem acknowledging syncs without syncing.
    Nofsync,
    /// Emulated 7200 rpm disk: tmpfs + 8 ms per sync (--sync-delay sets another).
    Hdd,
    /// Emulated SATA SSD: tmpfs + 0.75 ms per sync (--sync-delay sets another).
    Ssd,
    /// Emulated NVMe drive: tmpfs + 75 µs per sync (--sync-delay sets another).
    Nvme,
}

impl DiskKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DiskKind::Tmpfs => "tmpfs",
            DiskKind::Disk => "disk",
            DiskKind::Nofsync => "nofsync",
            DiskKind::Hdd => "hdd",
            DiskKind::Ssd => "ssd",
            DiskKind::Nvme => "nvme",
        }
    }

    /// True for the kinds that add a delay to every sync.
    pub fn is_emulated(self) -> bool {
        matches!(self, DiskKind::Hdd | DiskKind::Ssd | DiskKind::Nvme)
    }

    /// What a built-in engine member runs on for this kind, `delay` per sync when emulated.
    pub fn engine_kind(self, delay: Duration) -> EngineDisk {
        match self {
            DiskKind::Tmpfs => EngineDisk::Tmpfs,
            DiskKind::Disk => EngineDisk::Disk,
            DiskKind::Nofsync => EngineDisk::NoFsync,
            DiskKind::Hdd | DiskKind::Ssd | DiskKind::Nvme => EngineDisk::Emulated(delay),
        }
    }

    /// The profile's default delay per sync (zero for the real kinds): the engines' table.
    pub fn sync_delay(self) -> Duration {
        match self {
            DiskKind::Hdd => EngineDisk::HDD_SYNC,
            DiskKind::Ssd => EngineDisk::SSD_SYNC,
            DiskKind::Nvme => EngineDisk::NVME_SYNC,
            DiskKind::Tmpfs | DiskKind::Disk | DiskKind::Nofsync => Duration::ZERO,
        }
    }
}

impl ClusterSpec {
    /// The delay each sync gets: `--sync-delay` if given, else the profile's.
    pub fn sync_delay(&self) -> Duration {
        self.sync_delay.unwrap_or(self.disk.sync_delay())
    }

    /// `--disk` for a built-in engine member (`emulated:<µs>us` for an overridden delay).
    pub fn engine_disk_arg(&self) -> String {
        match self.sync_delay {
            Some(d) if self.disk.is_emulated() && d != self.disk.sync_delay() => {
                format!("emulated:{}us", d.as_micros())
            }
            _ => self.disk.as_str().to_string(),
        }
    }

    /// How an external server's member directory must be mounted: emulated kinds get the
    /// delay, and nofsync gets no-op syncs when the server cannot skip them itself.
    pub fn sync_policy(&self, server_skips_sync: bool) -> Option<SyncPolicy> {
        match self.disk {
            k if k.is_emulated() => Some(SyncPolicy {
                fsync: true,
                delay: self.sync_delay(),
            }),
            DiskKind::Nofsync if !server_skips_sync => Some(SyncPolicy {
                fsync: false,
                delay: Duration::ZERO,
            }),
            _ => None,
        }
    }

    /// The `fsync` setting recorded in run.json: on (a no-op on tmpfs), `nofsync` for
    /// nofsync as the server runs it, [`Self::emulated_fsync_label`] for the emulated kinds.
    pub fn fsync_label(&self, nofsync: &str) -> String {
        match self.disk {
            DiskKind::Disk => "on".to_string(),
            DiskKind::Tmpfs => "on (no-op on tmpfs)".into(),
            DiskKind::Nofsync => nofsync.into(),
            DiskKind::Hdd | DiskKind::Ssd | DiskKind::Nvme => self.emulated_fsync_label(),
        }
    }

    /// The `fsync` setting recorded in run.json for a kind the server does not handle itself.
    pub fn emulated_fsync_label(&self) -> String {
        format!(
            "on, tmpfs + {} us per sync (emulated {})",
            self.sync_delay().as_micros(),
            self.disk
        )
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
            "hdd" => Ok(DiskKind::Hdd),
            "ssd" => Ok(DiskKind::Ssd),
            "nvme" => Ok(DiskKind::Nvme),
            other => Err(format!(
                "unknown disk kind '{other}' (expected tmpfs, disk, nofsync, hdd, ssd or nvme)"
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

/// Creates the data root for `spec`: a fresh directory under /dev/shm for tmpfs and the
/// emulated kinds, else `<work_dir>/data` (created if missing). Member directories inside
/// it are made by [`member_dir`].
pub fn create_data_root(spec: &ClusterSpec, target: &str) -> Result<DataRoot, ProvisionError> {
    match spec.disk {
        DiskKind::Tmpfs | DiskKind::Hdd | DiskKind::Ssd | DiskKind::Nvme => {
            let shm = Path::new(SHM);
            if !is_tmpfs(shm) {
                return Err(ProvisionError::Unsupported(format!(
                    "{SHM} is not a tmpfs mount on this machine, so --disk {} is unavailable; use --disk disk",
                    spec.disk
                )));
            }
            remove_stale_roots(shm);
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

/// Removes tmpfs data roots (`coordbench-<target>-<pid>-...`) of coordbench processes that
/// no longer exist: a SIGKILLed run cannot remove its own. Their sync-delay mounts are
/// detached first, so removal never walks into a dead mount.
fn remove_stale_roots(shm: &Path) {
    crate::syncfs::clean_stale_mounts();
    let Ok(entries) = fs::read_dir(shm) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let mut parts = name.to_str().unwrap_or("").split('-');
        let (Some("coordbench"), Some(_target), Some(pid)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if pid
            .parse::<i32>()
            .is_ok_and(|pid| !super::process::process_alive(pid))
        {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Makes a fresh, empty directory `<root>/<name>` for one member and returns it. With a
/// `policy` it is the mount point of a sync-delay filesystem over `<root>/.<name>.backing`,
/// owned from then on by `cluster` (unmounted when it stops). Mode 0700, as etcd wants.
pub fn member_dir(
    cluster: &mut Cluster,
    root: &Path,
    name: &str,
    policy: Option<SyncPolicy>,
) -> Result<PathBuf, ProvisionError> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = root.join(name);
    let backing = root.join(format!(".{name}.backing"));
    // An old directory would bring back an old cluster's state.
    for old in [&dir, &backing] {
        if old.exists() {
            fs::remove_dir_all(old)
                .map_err(|e| ProvisionError::io(format!("removing stale {}", old.display()), e))?;
        }
    }
    let create = |d: &Path| {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .map_err(|e| ProvisionError::io(format!("creating {}", d.display()), e))
    };
    create(&dir)?;
    if let Some(policy) = policy {
        create(&backing)?;
        let mount = SyncFsMount::mount(&backing, &dir, policy).map_err(|e| {
            ProvisionError::Unsupported(format!(
                "--disk {}: {e}",
                cluster.info().disk.map_or("?", |d| d.as_str())
            ))
        })?;
        cluster.add_mount(mount);
    }
    Ok(dir)
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
    /// How a sync was made: `fdatasync` (what etcd and ZooKeeper do, through the sync-delay
    /// filesystem when one is mounted) or `engine` (the built-in engines' own Disk, which
    /// adds the emulated delay or skips the sync as the member does).
    pub via: &'static str,
}

/// A sensible sample count for [`probe_sync_latency`]: enough for a p99 estimate, a fraction
/// of a second on an SSD.
pub const DEFAULT_SYNC_SAMPLES: usize = 50;

/// A 4 KiB block, about one WAL append.
const PROBE_BLOCK: [u8; 4096] = [0xA5; 4096];

/// Appends 4 KiB and `fdatasync`s, `samples` times, in a scratch file in `dir` (removed
/// afterwards), timing each write+sync — roughly what a WAL append costs there.
pub fn probe_sync_latency(dir: &Path, samples: usize) -> io::Result<SyncProbe> {
    let path = dir.join(format!(".coordbench-sync-probe-{}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)?;
        time_syncs(samples, "fdatasync", || {
            f.write_all(&PROBE_BLOCK)?;
            f.sync_data()
        })
    })();
    let _ = fs::remove_file(&path);
    result
}

/// The same probe through a built-in engine's own Disk of kind `kind` (the kind its members
/// were started with), in a scratch directory inside `dir`: the engines add an emulated
/// delay, or skip the sync, inside their process, where a plain fdatasync cannot see it.
pub fn probe_engine_sync_latency(
    dir: &Path,
    kind: EngineDisk,
    samples: usize,
) -> io::Result<SyncProbe> {
    use coordbench_node::disk::{Disk, FileDisk};
    let scratch = dir.join(format!(".coordbench-sync-probe-{}", std::process::id()));
    let result = (|| {
        let disk = FileDisk::open(&scratch, kind)?;
        let mut f = disk.create("probe")?;
        time_syncs(samples, "engine", || {
            f.append(&PROBE_BLOCK)?;
            f.sync()
        })
    })();
    let _ = fs::remove_dir_all(&scratch);
    result
}

/// Times `samples` calls of `write_and_sync` (µs, rounded up so a real sync never reads 0).
/// A sorted vector is fine here: a probe is tens of samples, not a run's operations.
fn time_syncs(
    samples: usize,
    via: &'static str,
    mut write_and_sync: impl FnMut() -> io::Result<()>,
) -> io::Result<SyncProbe> {
    let samples = samples.max(1);
    let mut us = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        write_and_sync()?;
        us.push(t.elapsed().as_nanos().div_ceil(1000).max(1) as u64);
    }
    us.sort_unstable();
    let pick = |q: f64| us[((q * samples as f64).ceil() as usize).clamp(1, samples) - 1];
    Ok(SyncProbe {
        samples,
        p50_us: pick(0.50),
        p99_us: pick(0.99),
        max_us: us[samples - 1],
        via,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_probe_sees_the_engines_emulated_delay_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let delay = Duration::from_millis(5);
        let kind = DiskKind::Hdd.engine_kind(delay);
        let p = probe_engine_sync_latency(dir.path(), kind, 5).unwrap();
        assert_eq!((p.samples, p.via), (5, "engine"));
        assert!(p.p50_us >= 5_000, "{p:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn engine_kinds_follow_the_disk_kind() {
        let d = Duration::from_micros(750);
        assert_eq!(DiskKind::Ssd.engine_kind(d), EngineDisk::Emulated(d));
        assert_eq!(DiskKind::Nofsync.engine_kind(d), EngineDisk::NoFsync);
        assert_eq!(DiskKind::Disk.engine_kind(d), EngineDisk::Disk);
    }
}
