//! A FUSE passthrough filesystem that costs what a chosen disk costs to sync.
//!
//! etcd and ZooKeeper sync their logs with `fsync`/`fdatasync` and cannot be told to wait
//! longer, so to emulate a slow disk (`--disk hdd|ssd|nvme`) their data directories are
//! mounted through this filesystem: every operation goes straight to a backing directory,
//! and every file or directory sync additionally waits the profile's delay (or, for
//! `nofsync`, is acknowledged without syncing). The built-in engines add the same delay in
//! their own `Disk` instead (engines/node/src/disk.rs); both take it from
//! [`crate::provision::DiskKind::sync_delay`].
//!
//! The server runs in this process (a thread per mount, plus one flusher thread), so it
//! lives exactly as long as the cluster that uses it: [`SyncFsMount`] unmounts on drop.
//! If coordbench is SIGKILLed the kernel keeps a dead mount behind; the next mount call
//! detaches such mounts of dead coordbench processes ([`clean_stale_mounts`]).

mod flusher;
mod passthrough;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fuser::{BackgroundSession, MountOption};

use crate::provision::process::process_alive;

/// What a sync on the mount does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncPolicy {
    /// Whether the backing file is really synced (false: `nofsync`, a sync is a no-op).
    pub fsync: bool,
    /// Added after every sync; syncs are served one at a time, as by one device.
    pub delay: Duration,
}

/// Why a mount failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncFsError {
    #[error("cannot prepare {path}: {source}")]
    Prepare { path: PathBuf, source: io::Error },
    #[error("cannot mount the sync-delay filesystem at {path} (FUSE needs /dev/fuse and root): {source}")]
    Mount { path: PathBuf, source: io::Error },
}

/// Names the filesystem in /proc/self/mountinfo: type `fuse` (mount(2) sets no subtype)
/// with source `coordbench-<pid>`, so a stale mount can be told from a live run's.
const SOURCE: &str = "coordbench";

/// A mounted sync-delay filesystem; dropping it unmounts it.
pub struct SyncFsMount {
    mountpoint: PathBuf,
    session: Option<BackgroundSession>,
}

impl std::fmt::Debug for SyncFsMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncFsMount")
            .field("mountpoint", &self.mountpoint)
            .finish()
    }
}

impl SyncFsMount {
    /// Mounts `backing` (an existing directory) at `mountpoint` (created if missing, must be
    /// empty) with `policy`.
    pub fn mount(
        backing: &Path,
        mountpoint: &Path,
        policy: SyncPolicy,
    ) -> Result<SyncFsMount, SyncFsError> {
        clean_stale_mounts();
        let prepare = |path: &Path, e| SyncFsError::Prepare {
            path: path.to_path_buf(),
            source: e,
        };
        std::fs::create_dir_all(mountpoint).map_err(|e| prepare(mountpoint, e))?;
        let backing = backing.canonicalize().map_err(|e| prepare(backing, e))?;
        let flusher = flusher::Flusher::start(policy).map_err(|e| prepare(mountpoint, e))?;
        let fs = passthrough::Passthrough::new(backing, flusher);
        let options = [
            MountOption::FSName(format!("{SOURCE}-{}", std::process::id())),
            MountOption::RW,
            MountOption::NoAtime,
        ];
        let session =
            fuser::spawn_mount2(fs, mountpoint, &options).map_err(|e| SyncFsError::Mount {
                path: mountpoint.to_path_buf(),
                source: e,
            })?;
        Ok(SyncFsMount {
            mountpoint: mountpoint.to_path_buf(),
            session: Some(session),
        })
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }
}

impl Drop for SyncFsMount {
    fn drop(&mut self) {
        // Dropping the session detaches the mount (umount2 MNT_DETACH); its thread then
        // reads ENODEV and ends, dropping the filesystem and stopping its flusher.
        drop(self.session.take());
    }
}

/// Detaches sync-delay mounts whose coordbench process is gone (it was killed before it
/// could unmount). Mounts of live processes, other runs included, are left alone.
pub fn clean_stale_mounts() {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    for mountpoint in stale_mountpoints(&text) {
        use std::os::unix::ffi::OsStrExt;
        if let Ok(c) = std::ffi::CString::new(mountpoint.as_os_str().as_bytes()) {
            // SAFETY: plain syscall on a valid NUL-terminated path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Mount points in mountinfo `text` of our filesystem whose owner pid no longer exists.
fn stale_mountpoints(text: &str) -> Vec<PathBuf> {
    let mut stale = Vec::new();
    for line in text.lines() {
        // "<id> <parent> <maj:min> <root> <mountpoint> <options> [optional...] - <fstype> <source> <super options>"
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut r = right.split(' ');
        let (Some(ty), Some(source)) = (r.next(), r.next()) else {
            continue;
        };
        let Some(pid) = source
            .strip_prefix(SOURCE)
            .and_then(|s| s.strip_prefix('-'))
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if !(ty == "fuse" || ty.starts_with("fuse.")) || process_alive(pid) {
            continue;
        }
        if let Some(mp) = left.split(' ').nth(4) {
            stale.push(PathBuf::from(unescape_mountinfo(mp)));
        }
    }
    stale
}

/// mountinfo escapes space, tab, newline and backslash as \ooo octal.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_mounts_of_dead_coordbench_processes_are_stale() {
        let me = std::process::id();
        let text = format!(
            "36 35 0:40 / /dev/shm rw - tmpfs tmpfs rw\n\
             90 35 0:50 / /tmp/a\\040b rw,nosuid - fuse coordbench-999999999 rw\n\
             91 35 0:51 / /tmp/live rw - fuse coordbench-{me} rw\n\
             92 35 0:52 / /tmp/other rw - ext4 coordbench-999999999 rw\n"
        );
        assert_eq!(stale_mountpoints(&text), vec![PathBuf::from("/tmp/a b")]);
    }
}
