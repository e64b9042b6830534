//! The value log: where the bytes of every put's value live, each stored once.
//!
//! The MVCC history keeps a [`Slot`] (offset and length) per put instead of the value, so
//! the history in memory is an index, not a copy of every value ever written. Values are
//! appended and never rewritten (no compaction of the log), so a prefix `[0, len)` once
//! synced stays valid: a snapshot names the prefix it covers (see `snapshot.rs`).
//!
//! Two backends:
//! - an in-memory arena, for unit tests and seeded simulations (deterministic);
//! - an append-only file `<dir>/values-<generation>.log` read with `pread`, so values sit
//!   in the page cache rather than in the process's resident memory (not mmap: mapped
//!   pages count as resident once touched). A member that installs a snapshot from its
//!   leader writes a new generation, so the older snapshot files on disk keep naming an
//!   intact log until the new snapshot is durable. Generations are random 64-bit numbers,
//!   so an index snapshot that reached another member by mistake names no file there.
//!
//! Reads and appends of the file can fail; apply must not, so the first I/O error is kept
//! ([`ValueLog::failure`]) and the runtime stops the member rather than serve wrong data.

use std::fs::{File, OpenOptions};
use std::io;
use std::num::NonZeroU32;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Largest value stored (etcd's default request limit is 1.5 MiB; this is a hard ceiling).
pub const MAX_VALUE_LEN: usize = 16 << 20;

/// Where one value lives in the log. The length is kept plus one in a `NonZeroU32`, so an
/// `Option` of a put holding a slot needs no extra tag word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Slot {
    pub offset: u64,
    len_plus_one: NonZeroU32,
}

impl Slot {
    /// `len` is at most [`MAX_VALUE_LEN`].
    pub fn new(offset: u64, len: usize) -> Slot {
        let len = u32::try_from(len.min(MAX_VALUE_LEN)).unwrap_or(u32::MAX - 1);
        Slot {
            offset,
            len_plus_one: NonZeroU32::MIN.saturating_add(len),
        }
    }

    pub fn len(&self) -> usize {
        (self.len_plus_one.get() - 1) as usize
    }

    pub fn end(&self) -> u64 {
        self.offset + self.len() as u64
    }
}

#[derive(Debug)]
enum Backend {
    Arena(Vec<u8>),
    File {
        dir: PathBuf,
        generation: u64,
        file: File,
        len: u64,
    },
}

/// The value log's file, to be synced off the member's event loop before an index
/// snapshot naming a prefix of it becomes durable (see [`crate::KvStore::snapshot_unsynced`]).
#[derive(Debug)]
pub struct PendingSync(File);

impl PendingSync {
    /// Makes the value log's bytes durable (every one appended before this returns).
    pub fn sync(self) -> io::Result<()> {
        self.0.sync_data()
    }
}

/// Append-only store of values (see the module doc).
#[derive(Debug)]
pub(crate) struct ValueLog {
    backend: Backend,
    failure: OnceLock<String>,
}

impl Default for ValueLog {
    fn default() -> Self {
        ValueLog {
            backend: Backend::Arena(Vec::new()),
            failure: OnceLock::new(),
        }
    }
}

fn file_name(generation: u64) -> String {
    format!("values-{generation:016x}.log")
}

fn parse_generation(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("values-")?.strip_suffix(".log")?;
    u64::from_str_radix(hex, 16).ok()
}

/// The generations present in `dir`, ascending.
fn generations(dir: &Path) -> io::Result<Vec<u64>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        if let Some(g) = entry?.file_name().to_str().and_then(parse_generation) {
            found.push(g);
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// A random generation not yet used in `dir`.
fn new_generation(dir: &Path) -> io::Result<u64> {
    use std::hash::{BuildHasher, Hasher};
    let taken = generations(dir)?;
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        let g = h.finish();
        if !taken.contains(&g) {
            return Ok(g);
        }
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl ValueLog {
    /// The file-backed log in `dir` (created if missing), appending to its newest
    /// generation. Nothing is truncated here: restoring a snapshot does that.
    pub fn open_dir(dir: &Path) -> io::Result<ValueLog> {
        std::fs::create_dir_all(dir)?;
        match generations(dir)?.last() {
            Some(&generation) => Self::open_generation(dir, generation, false),
            None => Self::open_generation(dir, new_generation(dir)?, true),
        }
    }

    fn open_generation(dir: &Path, generation: u64, truncate: bool) -> io::Result<ValueLog> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(dir.join(file_name(generation)))?;
        sync_dir(dir)?;
        let len = file.metadata()?.len();
        Ok(ValueLog {
            backend: Backend::File {
                dir: dir.to_path_buf(),
                generation,
                file,
                len,
            },
            failure: OnceLock::new(),
        })
    }

    /// An empty log of the same kind: a fresh arena, or a new file generation in the same
    /// directory (for restoring a self-contained snapshot).
    pub fn fresh_like(&self) -> io::Result<ValueLog> {
        match &self.backend {
            Backend::Arena(_) => Ok(ValueLog::default()),
            Backend::File { dir, .. } => Self::open_generation(dir, new_generation(dir)?, true),
        }
    }

    /// This log's file generation, `None` for an arena.
    pub fn generation(&self) -> Option<u64> {
        match &self.backend {
            Backend::Arena(_) => None,
            Backend::File { generation, .. } => Some(*generation),
        }
    }

    /// Bytes appended so far.
    pub fn len(&self) -> u64 {
        match &self.backend {
            Backend::Arena(a) => a.len() as u64,
            Backend::File { len, .. } => *len,
        }
    }

    /// The first I/O error met, if any: the log (and so the store) can no longer be trusted.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    pub fn fail(&self, what: &str, e: io::Error) {
        let _ = self.failure.set(format!("value log: {what}: {e}"));
    }

    /// Stores `value` once; returns where it went. Callers keep values under
    /// [`MAX_VALUE_LEN`] (the store refuses larger puts).
    pub fn append(&mut self, value: &[u8]) -> Slot {
        let slot = Slot::new(self.len(), value.len());
        let result = match &mut self.backend {
            Backend::Arena(a) => {
                a.extend_from_slice(value);
                Ok(())
            }
            Backend::File { file, len, .. } => {
                let r = file.write_all_at(value, *len);
                if r.is_ok() {
                    *len += value.len() as u64;
                }
                r
            }
        };
        if let Err(e) = result {
            self.fail("append", e);
        }
        slot
    }

    /// The value at `slot` (empty after an I/O error, which [`ValueLog::failure`] reports).
    pub fn read(&self, slot: Slot) -> Vec<u8> {
        match &self.backend {
            Backend::Arena(a) => {
                let range = slot.offset as usize..slot.end() as usize;
                a.get(range).map(<[u8]>::to_vec).unwrap_or_default()
            }
            Backend::File { file, .. } => {
                let mut buf = vec![0u8; slot.len()];
                match file.read_exact_at(&mut buf, slot.offset) {
                    Ok(()) => buf,
                    Err(e) => {
                        self.fail("read", e);
                        Vec::new()
                    }
                }
            }
        }
    }

    /// A handle that makes everything appended so far durable from another thread (`None`
    /// for an arena, which has nothing to sync). Appends after it are synced too; the
    /// prefix that matters is the one that existed when it was taken.
    pub fn pending_sync(&self) -> io::Result<Option<PendingSync>> {
        match &self.backend {
            Backend::Arena(_) => Ok(None),
            Backend::File { file, .. } => Ok(Some(PendingSync(file.try_clone()?))),
        }
    }

    /// Switches to file generation `generation` of this log's directory, cut back to `len`
    /// bytes (restoring a snapshot that names that prefix; what follows it is replayed from
    /// the WAL). Fails for an arena or when the file is shorter than `len`.
    pub fn reopen_prefix(&self, generation: u64, len: u64) -> io::Result<ValueLog> {
        let Backend::File { dir, .. } = &self.backend else {
            return Err(io::Error::other(
                "the snapshot names a value log file, but this store keeps values in memory",
            ));
        };
        let path = dir.join(file_name(generation));
        let on_disk = std::fs::metadata(&path)?.len();
        if on_disk < len {
            return Err(io::Error::other(format!(
                "{} holds {on_disk} bytes, the snapshot needs {len}",
                path.display()
            )));
        }
        let mut log = Self::open_generation(dir, generation, false)?;
        if let Backend::File { file, len: l, .. } = &mut log.backend {
            file.set_len(len)?;
            file.sync_data()?;
            *l = len;
        }
        Ok(log)
    }

    /// Removes every file generation of this directory but this log's own (after a
    /// self-contained snapshot replaced the state they held).
    pub fn remove_other_generations(&self) -> io::Result<()> {
        let Backend::File {
            dir, generation, ..
        } = &self.backend
        else {
            return Ok(());
        };
        for g in generations(dir)? {
            if g != *generation {
                std::fs::remove_file(dir.join(file_name(g)))?;
            }
        }
        sync_dir(dir)
    }

    /// Removes this log's file (a restore that failed half-way).
    pub fn discard(self) {
        if let Backend::File {
            dir, generation, ..
        } = &self.backend
        {
            let _ = std::fs::remove_file(dir.join(file_name(*generation)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_and_file_store_each_value_once() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        for mut log in [ValueLog::default(), ValueLog::open_dir(dir.path())?] {
            let a = log.append(b"hello");
            let b = log.append(b"");
            let c = log.append(b"world!");
            assert_eq!((a.offset, b.offset, c.offset, log.len()), (0, 5, 5, 11));
            assert_eq!(log.read(a), b"hello");
            assert_eq!(log.read(b), b"");
            assert_eq!(log.read(c), b"world!");
            if let Some(pending) = log.pending_sync()? {
                pending.sync()?;
            }
            assert_eq!(log.failure(), None);
        }
        Ok(())
    }

    #[test]
    fn a_prefix_survives_reopening_and_generations_are_separate() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut log = ValueLog::open_dir(dir.path())?;
        let a = log.append(b"kept");
        log.pending_sync()?.expect("a file log").sync()?;
        log.append(b"cut off");
        drop(log);
        let reopened = ValueLog::open_dir(dir.path())?;
        let g = reopened.generation().expect("a file log");
        let log = reopened.reopen_prefix(g, 4)?;
        assert_eq!((log.len(), log.read(a)), (4, b"kept".to_vec()));
        assert!(log.reopen_prefix(g, 5).is_err(), "file shorter than asked");
        assert!(log.reopen_prefix(g ^ 1, 0).is_err(), "no such generation");
        let mut next = log.fresh_like()?;
        assert_eq!(next.len(), 0);
        assert_ne!(next.generation(), Some(g));
        next.append(b"new");
        next.remove_other_generations()?;
        assert_eq!(
            generations(dir.path())?,
            next.generation().into_iter().collect::<Vec<_>>()
        );
        assert!(ValueLog::default().reopen_prefix(g, 0).is_err());
        Ok(())
    }

    #[test]
    fn a_slot_knows_its_bounds() {
        assert_eq!(Slot::new(7, 3).len(), 3);
        assert_eq!(Slot::new(7, 3).end(), 10);
        assert_eq!(Slot::new(0, 0).len(), 0);
    }

    #[test]
    fn a_bad_read_is_reported_not_hidden() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let log = ValueLog::open_dir(dir.path())?;
        let past_end = Slot::new(0, 8);
        assert_eq!(log.read(past_end), b"");
        assert!(log.failure().is_some_and(|f| f.contains("read")));
        Ok(())
    }
}
