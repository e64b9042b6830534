//! Where the write-ahead log and snapshots live: the [`Disk`] trait and its two backends.
//!
//! [`FileDisk`] stores real files in one directory and makes them durable according to its
//! [`DiskKind`]; [`MemDisk`] keeps files in memory and, on a simulated crash, loses every
//! byte that no sync covered (optionally keeping a torn prefix of it), so tests can check
//! that the WAL never loses what it acknowledged.
//!
//! # Sync latencies of the emulated kinds
//!
//! `hdd`, `ssd` and `nvme` are **emulation**: real files, a real `fdatasync`, and then a fixed
//! sleep per sync. Put the data directory on tmpfs (where `fdatasync` is free) and the sleep
//! is the whole latency. The defaults are typical per-flush latencies of a small sequential
//! write, not measurements of this machine:
//!
//! - `hdd` = 8 ms: a 7200 rpm disk turns once every 60 s / 7200 = 8.3 ms, and a flush of an
//!   appended log block waits for about one revolution; etcd's hardware guide
//!   (etcd.io/docs/current/op-guide/hardware) takes "a 7200 RPM disk" as the 50 sequential
//!   IOPS minimum, i.e. under 10 ms per write+fdatasync (also Red Hat's OpenShift etcd
//!   practices: "50 IOPS of 8KB sequentially, including fdatasync, in under 10ms").
//! - `ssd` = 0.75 ms: a SATA SSD without power-loss protection flushes its cache in roughly
//!   0.5–1 ms; the same guides recommend 500 sequential IOPS (2 ms) "e.g. a typical local SSD".
//! - `nvme` = 75 µs: NVMe drives complete a flush in roughly 50–100 µs (enterprise drives
//!   with power-loss protection acknowledge a flush from their protected cache).
//!
//! Linux rounds short sleeps up by the thread's timer slack (50 µs by default); the emulated
//! kinds set the syncing thread's slack to 1 ns so a 75 µs sleep lasts about 75 µs.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;

/// How a [`FileDisk`] makes writes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskKind {
    /// Real files, `fdatasync` on every sync: whatever the data directory's device costs.
    Disk,
    /// Real files in a tmpfs directory (checked at open): the sync is a real call but free.
    Tmpfs,
    /// Real files, no sync at all: measures everything but durability.
    NoFsync,
    /// Emulated 7200 rpm disk: sync + 8 ms.
    Hdd,
    /// Emulated SATA SSD: sync + 0.75 ms.
    Ssd,
    /// Emulated NVMe drive: sync + 75 µs.
    Nvme,
    /// Sync + a custom delay.
    Emulated(Duration),
}

impl DiskKind {
    pub const HDD_SYNC: Duration = Duration::from_millis(8);
    pub const SSD_SYNC: Duration = Duration::from_micros(750);
    pub const NVME_SYNC: Duration = Duration::from_micros(75);

    /// The delay added to every sync.
    pub fn sync_delay(self) -> Duration {
        match self {
            DiskKind::Hdd => Self::HDD_SYNC,
            DiskKind::Ssd => Self::SSD_SYNC,
            DiskKind::Nvme => Self::NVME_SYNC,
            DiskKind::Emulated(d) => d,
            DiskKind::Disk | DiskKind::Tmpfs | DiskKind::NoFsync => Duration::ZERO,
        }
    }

    /// Whether a sync calls `fdatasync`.
    pub fn fsyncs(self) -> bool {
        self != DiskKind::NoFsync
    }
}

impl fmt::Display for DiskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskKind::Disk => f.write_str("disk"),
            DiskKind::Tmpfs => f.write_str("tmpfs"),
            DiskKind::NoFsync => f.write_str("nofsync"),
            DiskKind::Hdd => f.write_str("hdd"),
            DiskKind::Ssd => f.write_str("ssd"),
            DiskKind::Nvme => f.write_str("nvme"),
            DiskKind::Emulated(d) => write!(f, "emulated:{}us", d.as_micros()),
        }
    }
}

/// An unknown disk kind name.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("unknown disk kind {0:?} (expected disk, tmpfs, nofsync, hdd, ssd, nvme or emulated:<micros>us)")]
pub struct ParseDiskKindError(String);

impl FromStr for DiskKind {
    type Err = ParseDiskKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "disk" => DiskKind::Disk,
            "tmpfs" => DiskKind::Tmpfs,
            "nofsync" => DiskKind::NoFsync,
            "hdd" => DiskKind::Hdd,
            "ssd" => DiskKind::Ssd,
            "nvme" => DiskKind::Nvme,
            other => {
                let micros = other
                    .strip_prefix("emulated:")
                    .map(|r| r.strip_suffix("us").unwrap_or(r))
                    .and_then(|r| r.parse::<u64>().ok())
                    .ok_or_else(|| ParseDiskKindError(s.to_string()))?;
                DiskKind::Emulated(Duration::from_micros(micros))
            }
        })
    }
}

/// A flat directory of named files, as the WAL needs it. Names are plain file names (no
/// separators). "Durable" means: survives a crash of the process or of the machine.
pub trait Disk: Send + Sync + fmt::Debug + 'static {
    /// Names of the files present.
    fn list(&self) -> io::Result<Vec<String>>;
    /// The whole content of a file.
    fn read(&self, name: &str) -> io::Result<Vec<u8>>;
    /// A file's length in bytes, without reading it.
    fn size(&self, name: &str) -> io::Result<u64>;
    /// The whole file mapped read-only, if this disk can map files (`Ok(None)` otherwise):
    /// its pages stay in the page cache and count towards a process's memory only while
    /// read. Only for files never modified in place once written ([`Disk::write_atomic`]).
    fn map(&self, _name: &str) -> io::Result<Option<Bytes>> {
        Ok(None)
    }
    /// Creates a new empty file (its existence is durable on return) open for appending.
    fn create(&self, name: &str) -> io::Result<Box<dyn DiskFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, name: &str) -> io::Result<Box<dyn DiskFile>>;
    /// Cuts a file to `len` bytes, durably.
    fn truncate(&self, name: &str, len: u64) -> io::Result<()>;
    /// Replaces (or creates) a whole file atomically and durably: after a crash it holds
    /// either the old content or `parts`, one after the other (so a caller framing a large
    /// payload need not copy it behind its header).
    fn write_atomic(&self, name: &str, parts: &[&[u8]]) -> io::Result<()>;
    /// Removes a file, durably.
    fn remove(&self, name: &str) -> io::Result<()>;
}

/// A file being appended to.
pub trait DiskFile: Send {
    /// Appends `data`; not durable until [`DiskFile::sync`] returns.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&mut self) -> io::Result<()>;
}

// ---- real files ------------------------------------------------------------------------

/// Real files in one directory.
#[derive(Debug, Clone)]
pub struct FileDisk {
    dir: PathBuf,
    kind: DiskKind,
}

impl FileDisk {
    /// Opens (creating it if needed) `dir`. A `Tmpfs` kind refuses a directory that is not
    /// on tmpfs, so results labelled tmpfs are not silently measured on a real device.
    pub fn open(dir: &Path, kind: DiskKind) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        if kind == DiskKind::Tmpfs && !is_tmpfs(dir)? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("disk kind tmpfs but {} is not on tmpfs", dir.display()),
            ));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            kind,
        })
    }

    pub fn kind(&self) -> DiskKind {
        self.kind
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &str) -> io::Result<PathBuf> {
        if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad file name {name:?}"),
            ));
        }
        Ok(self.dir.join(name))
    }

    fn sync_dir(&self) -> io::Result<()> {
        if self.kind.fsyncs() {
            File::open(&self.dir)?.sync_all()?;
        }
        Ok(())
    }

    fn file(&self, file: File) -> Box<dyn DiskFile> {
        Box::new(RealFile {
            file,
            kind: self.kind,
        })
    }
}

/// True if `dir` is on a tmpfs file system.
pub fn is_tmpfs(dir: &Path) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        const TMPFS_MAGIC: libc::c_long = 0x0102_1994;
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        #[allow(clippy::unnecessary_cast)]
        Ok(st.f_type as libc::c_long == TMPFS_MAGIC)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        Ok(false)
    }
}

impl Disk for FileDisk {
    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        fs::read(self.path(name)?)
    }

    fn size(&self, name: &str) -> io::Result<u64> {
        Ok(fs::metadata(self.path(name)?)?.len())
    }

    fn map(&self, name: &str) -> io::Result<Option<Bytes>> {
        let file = File::open(self.path(name)?)?;
        // SAFETY: the mapping is read-only and `map` is only used for files written whole
        // through `write_atomic` (a temporary file renamed into place) and never modified
        // afterwards; removing the file (unlink) leaves a live mapping valid.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(Some(Bytes::from_owner(map)))
    }

    fn create(&self, name: &str) -> io::Result<Box<dyn DiskFile>> {
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(self.path(name)?)?;
        // The new directory entry must survive a crash too.
        self.sync_dir()?;
        Ok(self.file(file))
    }

    fn open_append(&self, name: &str) -> io::Result<Box<dyn DiskFile>> {
        let file = OpenOptions::new().append(true).open(self.path(name)?)?;
        Ok(self.file(file))
    }

    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(self.path(name)?)?;
        file.set_len(len)?;
        if self.kind.fsyncs() {
            file.sync_all()?;
        }
        Ok(())
    }

    fn write_atomic(&self, name: &str, parts: &[&[u8]]) -> io::Result<()> {
        let path = self.path(name)?;
        let tmp = self.path(&format!("{name}.tmp"))?;
        {
            let mut f = File::create(&tmp)?;
            for part in parts {
                f.write_all(part)?;
            }
            if self.kind.fsyncs() {
                f.sync_all()?;
            }
        }
        fs::rename(&tmp, &path)?;
        self.sync_dir()
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match fs::remove_file(self.path(name)?) {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

struct RealFile {
    file: File,
    kind: DiskKind,
}

impl DiskFile for RealFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)
    }

    fn sync(&mut self) -> io::Result<()> {
        if self.kind.fsyncs() {
            self.file.sync_data()?;
        }
        let delay = self.kind.sync_delay();
        if !delay.is_zero() {
            precise_timer_slack();
            std::thread::sleep(delay);
        }
        Ok(())
    }
}

/// Lowers this thread's timer slack so short emulated delays are not rounded up by 50 µs.
fn precise_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

// ---- in memory, with crashes -------------------------------------------------------------

#[derive(Debug, Default, Clone)]
struct MemFile {
    /// Everything written, synced or not.
    data: Vec<u8>,
    /// Length of the prefix a sync covered.
    synced: usize,
}

#[derive(Debug, Default)]
struct MemState {
    files: BTreeMap<String, MemFile>,
    syncs: u64,
    /// How long each sync takes (a stalling disk, in tests).
    sync_delay: Duration,
    /// Files handed out before the last crash must stop working (the process died).
    generation: u64,
}

/// An in-memory [`Disk`] for deterministic tests. Clones share the same files.
#[derive(Debug, Default, Clone)]
pub struct MemDisk {
    state: Arc<Mutex<MemState>>,
}

impl MemDisk {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        // A panicking test thread must not hide the disk from the rest of the test.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Simulates a power failure: every file keeps its synced prefix plus the first
    /// `keep(unsynced_len)` bytes of what was written after it (a torn write; the kept
    /// bytes are garbled when `garble` is set). Open files stop working.
    pub fn crash(&self, mut keep: impl FnMut(usize) -> usize, garble: bool) {
        let mut st = self.lock();
        st.generation += 1;
        for f in st.files.values_mut() {
            let unsynced = f.data.len() - f.synced;
            let kept = keep(unsynced).min(unsynced);
            f.data.truncate(f.synced + kept);
            if garble && kept > 0 {
                if let Some(b) = f.data.last_mut() {
                    *b ^= 0x5a;
                }
            }
            f.synced = f.data.len();
        }
    }

    /// Makes every later sync take `delay` before it completes (zero: instant again).
    pub fn set_sync_delay(&self, delay: Duration) {
        self.lock().sync_delay = delay;
    }

    /// Number of syncs so far.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// Total bytes stored.
    pub fn bytes(&self) -> usize {
        self.lock().files.values().map(|f| f.data.len()).sum()
    }

    fn handle(&self, name: &str, generation: u64) -> Box<dyn DiskFile> {
        Box::new(MemHandle {
            disk: self.clone(),
            name: name.to_string(),
            generation,
        })
    }
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no file {name}"))
}

impl Disk for MemDisk {
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.lock().files.keys().cloned().collect())
    }

    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        self.lock()
            .files
            .get(name)
            .map(|f| f.data.clone())
            .ok_or_else(|| not_found(name))
    }

    fn size(&self, name: &str) -> io::Result<u64> {
        self.lock()
            .files
            .get(name)
            .map(|f| f.data.len() as u64)
            .ok_or_else(|| not_found(name))
    }

    fn create(&self, name: &str) -> io::Result<Box<dyn DiskFile>> {
        let mut st = self.lock();
        if st.files.contains_key(name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{name} exists"),
            ));
        }
        st.files.insert(name.to_string(), MemFile::default());
        let generation = st.generation;
        drop(st);
        Ok(self.handle(name, generation))
    }

    fn open_append(&self, name: &str) -> io::Result<Box<dyn DiskFile>> {
        let st = self.lock();
        if !st.files.contains_key(name) {
            return Err(not_found(name));
        }
        let generation = st.generation;
        drop(st);
        Ok(self.handle(name, generation))
    }

    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        let mut st = self.lock();
        let f = st.files.get_mut(name).ok_or_else(|| not_found(name))?;
        let len = usize::try_from(len).unwrap_or(usize::MAX).min(f.data.len());
        f.data.truncate(len);
        f.synced = f.synced.min(len);
        Ok(())
    }

    fn write_atomic(&self, name: &str, parts: &[&[u8]]) -> io::Result<()> {
        let data = parts.concat();
        let mut st = self.lock();
        st.syncs += 1;
        let synced = data.len();
        st.files.insert(name.to_string(), MemFile { data, synced });
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.lock().files.remove(name);
        Ok(())
    }
}

struct MemHandle {
    disk: MemDisk,
    name: String,
    generation: u64,
}

impl MemHandle {
    fn with<R>(&self, f: impl FnOnce(&mut MemState) -> io::Result<R>) -> io::Result<R> {
        let mut st = self.disk.lock();
        if st.generation != self.generation {
            return Err(io::Error::other("disk crashed"));
        }
        f(&mut st)
    }
}

impl DiskFile for MemHandle {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let name = self.name.clone();
        self.with(|st| {
            let f = st.files.get_mut(&name).ok_or_else(|| not_found(&name))?;
            f.data.extend_from_slice(data);
            Ok(())
        })
    }

    fn sync(&mut self) -> io::Result<()> {
        let delay = self.disk.lock().sync_delay;
        if !delay.is_zero() {
            // Outside the lock: the stall is this file's alone.
            std::thread::sleep(delay);
        }
        let name = self.name.clone();
        self.with(|st| {
            st.syncs += 1;
            let f = st.files.get_mut(&name).ok_or_else(|| not_found(&name))?;
            f.synced = f.data.len();
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print() {
        for k in [
            DiskKind::Disk,
            DiskKind::Tmpfs,
            DiskKind::NoFsync,
            DiskKind::Hdd,
            DiskKind::Ssd,
            DiskKind::Nvme,
            DiskKind::Emulated(Duration::from_micros(250)),
        ] {
            assert_eq!(k.to_string().parse::<DiskKind>(), Ok(k));
        }
        assert!("floppy".parse::<DiskKind>().is_err());
        assert_eq!(DiskKind::Hdd.sync_delay(), Duration::from_millis(8));
        assert!(!DiskKind::NoFsync.fsyncs());
    }

    #[test]
    fn mem_disk_loses_unsynced_bytes_on_crash() -> io::Result<()> {
        let d = MemDisk::new();
        let mut f = d.create("a")?;
        f.append(b"hello")?;
        f.sync()?;
        f.append(b" world")?;
        d.crash(|_| 0, false);
        assert_eq!(d.read("a")?, b"hello");
        assert!(f.append(b"x").is_err(), "handles die with the crash");
        let mut f = d.open_append("a")?;
        f.append(b"!!")?;
        d.crash(|n| n / 2, false);
        assert_eq!(d.read("a")?, b"hello!");
        Ok(())
    }

    #[test]
    fn file_disk_round_trip() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = FileDisk::open(dir.path(), DiskKind::NoFsync)?;
        let mut f = d.create("seg")?;
        f.append(b"abc")?;
        f.sync()?;
        drop(f);
        let mut f = d.open_append("seg")?;
        f.append(b"def")?;
        drop(f);
        assert_eq!(d.read("seg")?, b"abcdef");
        d.truncate("seg", 2)?;
        assert_eq!(d.read("seg")?, b"ab");
        d.write_atomic("snap", &[b"x"])?;
        assert_eq!(d.list()?, vec!["seg".to_string(), "snap".to_string()]);
        d.remove("seg")?;
        d.remove("seg")?;
        assert_eq!(d.list()?, vec!["snap".to_string()]);
        assert!(d.create("../x").is_err());
        Ok(())
    }

    #[test]
    fn tmpfs_kind_checks_the_file_system() -> io::Result<()> {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() && is_tmpfs(shm)? {
            let dir = tempfile::tempdir_in(shm)?;
            FileDisk::open(dir.path(), DiskKind::Tmpfs)?;
        }
        let dir = tempfile::tempdir()?;
        if !is_tmpfs(dir.path())? {
            assert!(FileDisk::open(dir.path(), DiskKind::Tmpfs).is_err());
        }
        Ok(())
    }
}
