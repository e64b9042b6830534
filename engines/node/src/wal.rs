//! The write-ahead log: what a node made durable, and how to get it back after a restart.
//! One implementation serves both cores: [`Wal`] is generic over a [`LogFormat`] (the core's
//! entry, hard state and snapshot types and its recovery rule); `RaftWal` and `ZabWal` are
//! its two instances.
//!
//! Layout on the [`Disk`]: segments `<seq:016x>.<ext>` (`wal` for Raft, `zwal` for Zab) of
//! framed records (see `record`) and snapshot files `snap-<index>-<term>.snap` (see
//! `snapfile`).
//!
//! - **Group commit.** [`Wal::append`] writes a whole batch (a truncation, every entry of a
//!   Ready, its hard state) with one write call; [`Wal::sync`] then makes all of it durable
//!   with one sync. Only what a returned sync covered may be acknowledged.
//! - **Truncation.** An `Entries` record replaces every stored entry from its first one on
//!   (so a new Raft leader's overwrite of an uncommitted suffix is just another append); a
//!   `TruncateAfter` record drops every stored entry after a position (Zab's TRUNC).
//! - **Snapshots.** [`Wal::save_snapshot`] writes the snapshot file durably, then a marker
//!   record, syncs, and removes the segments (a prefix of them) and older snapshot files it
//!   made obsolete. The two halves can run apart: the runtime writes a local snapshot's
//!   file on a thread of its own (`write_snapshot_file`) and only then has the WAL record
//!   it (`Wal::record_snapshot`), in order with the log's other writes. Every segment starts with the hard state and snapshot marker current at
//!   its creation, so the remaining segments replay on their own.
//! - **Recovery.** [`Wal::open`] replays the segments in order. A damaged record in the last
//!   segment is a write torn by a crash: the segment is cut there (nothing after it was
//!   synced, so nothing after it was acknowledged). Damage in an earlier segment, which was
//!   fully synced before the next one began, is reported as corruption. The replayed log,
//!   hard state and snapshot marker then go through the core's rule
//!   ([`LogFormat::recover`]) to become the state the core restarts from.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::disk::{Disk, DiskFile};
use crate::record::{self, Record, RecordRef};
use crate::snapfile;

/// What a WAL stores for one core, and the core's rules for it. Positions (`index`) are
/// the core's log positions: Raft indexes, Zab zxids; both only grow along a log.
pub trait LogFormat: Send + 'static {
    type Entry: Serialize + DeserializeOwned + Send + 'static;
    type HardState: Serialize + DeserializeOwned + Clone + Default + Send + 'static;

    /// The extension of segment file names.
    const SEGMENT_EXT: &'static str;

    /// The entry's log position.
    fn index(e: &Self::Entry) -> u64;
    /// The term (epoch) the entry was proposed in.
    fn term(e: &Self::Entry) -> u64;
    /// The client command it carries, if any (a Raft no-op carries none).
    fn command(e: &Self::Entry) -> Option<&[u8]>;
    /// About how many bytes it takes in a record (to split batches into records).
    fn encoded_size(e: &Self::Entry) -> usize;

    /// A hard-state change that must be synced before anything promising it is sent
    /// (everything but the commit point, which may be written lazily).
    fn must_sync(new: &Self::HardState, last: &Self::HardState) -> bool;

    /// Replays an `Entries` record (non-empty `batch`) onto the log being rebuilt. The
    /// default: the batch replaces every stored entry from its first position on. The log
    /// is in position order, so that is a suffix, found by binary search: visiting every
    /// entry for every record made a replay quadratic (zab: 95,000 entries in 2.2 s).
    fn replay_entries(log: &mut Vec<Self::Entry>, batch: Vec<Self::Entry>) -> Result<(), WalError> {
        if let Some(first) = batch.first().map(Self::index) {
            let kept = log.partition_point(|e| Self::index(e) < first);
            log.truncate(kept);
            log.extend(batch);
        }
        Ok(())
    }

    /// Turns the replayed records and the snapshot files into the state to restart from.
    fn recover(
        replay: Replay<Self>,
        snapshots: &SnapshotFiles<'_>,
    ) -> Result<Recovered<Self>, WalError>;
}

/// A state-machine snapshot as the WAL stores it: covering every entry up to `index`
/// (Raft: whose term is `term`; Zab: the zxid, term 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub index: u64,
    pub term: u64,
    /// Shared with the core's copy (Raft) rather than cloned: it is the whole state machine.
    pub data: Bytes,
}

/// What was durable: what the core restarts from.
pub struct Recovered<F: LogFormat + ?Sized> {
    pub hard_state: F::HardState,
    /// The latest snapshot; the state machine is restored from it.
    pub snapshot: Option<Snapshot>,
    /// The entries after it.
    pub entries: Vec<F::Entry>,
}

impl<F: LogFormat + ?Sized> Default for Recovered<F> {
    fn default() -> Self {
        Self {
            hard_state: F::HardState::default(),
            snapshot: None,
            entries: Vec::new(),
        }
    }
}

/// Tuning of the WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalOptions {
    /// A new segment is started once the current one reaches this size (etcd: 64 MB).
    pub segment_bytes: u64,
    /// Entries are split into records of about this size, so one huge batch does not
    /// become one huge record.
    pub record_bytes: usize,
}

impl Default for WalOptions {
    fn default() -> Self {
        Self {
            segment_bytes: 64 << 20,
            record_bytes: 1 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("WAL I/O on {file}: {source}")]
    Io {
        file: String,
        #[source]
        source: io::Error,
    },
    #[error("WAL corrupt: {0}")]
    Corrupt(String),
    #[error("WAL record: {0}")]
    Encode(String),
    /// An earlier write or sync failed: what is on disk after it is unknown, so the WAL
    /// refuses to go on (the node must restart and recover).
    #[error("WAL unusable after an earlier failed write")]
    Broken,
}

pub(crate) fn io_err(file: &str) -> impl FnOnce(io::Error) -> WalError + '_ {
    move |source| WalError::Io {
        file: file.to_string(),
        source,
    }
}

/// Counters since open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Batches written by `append`.
    pub appends: u64,
    pub entries: u64,
    pub bytes: u64,
    pub syncs: u64,
    pub snapshots: u64,
    pub segments_removed: u64,
}

#[derive(Debug)]
struct Segment {
    seq: u64,
    name: String,
    /// Highest entry position written into it (0: none).
    max_index: u64,
}

/// The log rebuilt from records during recovery, handed to [`LogFormat::recover`].
pub struct Replay<F: LogFormat + ?Sized> {
    pub entries: Vec<F::Entry>,
    pub hard_state: F::HardState,
    /// The last durable snapshot marker, as (index, term).
    pub marker: Option<(u64, u64)>,
}

impl<F: LogFormat + ?Sized> Replay<F> {
    fn new() -> Self {
        Self {
            entries: Vec::new(),
            hard_state: F::HardState::default(),
            marker: None,
        }
    }

    /// Applies one record; returns the last position an `Entries` record wrote.
    fn apply(&mut self, r: Record<F::Entry, F::HardState>) -> Result<Option<u64>, WalError> {
        match r {
            Record::Entries(ents) => {
                let last = ents.last().map(F::index);
                if last.is_some() {
                    F::replay_entries(&mut self.entries, ents)?;
                }
                Ok(last)
            }
            Record::TruncateAfter(index) => {
                self.entries.retain(|e| F::index(e) <= index);
                Ok(None)
            }
            Record::HardState(hs) => {
                self.hard_state = hs;
                Ok(None)
            }
            Record::Snapshot {
                index,
                term,
                install,
            } => {
                self.marker = Some((index, term));
                if install {
                    self.entries.clear();
                } else {
                    self.entries.retain(|e| F::index(e) > index);
                }
                Ok(None)
            }
        }
    }
}

/// The snapshot files found at open, oldest first, for [`LogFormat::recover`].
pub struct SnapshotFiles<'a> {
    disk: &'a dyn Disk,
    /// (index, term, file name), sorted.
    files: Vec<(u64, u64, String)>,
}

impl SnapshotFiles<'_> {
    /// The newest snapshot file that reads back intact (unreadable ones are skipped).
    pub fn newest(&self) -> Result<Option<Snapshot>, WalError> {
        for (_, _, name) in self.files.iter().rev() {
            let bytes = self.disk.read(name).map_err(io_err(name))?;
            match snapfile::decode(&bytes) {
                Ok(s) => return Ok(Some(s)),
                Err(why) => tracing::warn!(file = %name, why, "skipping unreadable snapshot"),
            }
        }
        Ok(None)
    }

    /// The snapshot at `index`, which a durable marker names: missing or damaged, the WAL
    /// is corrupt.
    pub fn at(&self, index: u64) -> Result<Snapshot, WalError> {
        let (_, _, name) = self
            .files
            .iter()
            .find(|(i, _, _)| *i == index)
            .ok_or_else(|| {
                WalError::Corrupt(format!("log refers to a missing snapshot at {index}"))
            })?;
        let bytes = self.disk.read(name).map_err(io_err(name))?;
        snapfile::decode(&bytes).map_err(|why| WalError::Corrupt(format!("snapshot {name}: {why}")))
    }
}

/// The write-ahead log of one member. Blocking; the runtime calls it on a blocking thread.
pub struct Wal<F: LogFormat> {
    disk: Arc<dyn Disk>,
    opts: WalOptions,
    /// Oldest first; the last one is being appended to.
    segments: Vec<Segment>,
    file: Box<dyn DiskFile>,
    file_len: u64,
    /// Written since the last sync.
    dirty: bool,
    /// Last hard state written (repeated at the head of every new segment).
    hard_state: F::HardState,
    /// Latest snapshot whose marker is durable, as (index, term).
    snapshot: Option<(u64, u64)>,
    buf: Vec<u8>,
    stats: WalStats,
    broken: bool,
}

impl<F: LogFormat> std::fmt::Debug for Wal<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("segments", &self.segments)
            .field("file_len", &self.file_len)
            .field("snapshot", &self.snapshot)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A record as written by the WAL of format `F`.
type Ref<'a, F> = RecordRef<'a, <F as LogFormat>::Entry, <F as LogFormat>::HardState>;

fn enc<E: Serialize, H: Serialize>(
    buf: &mut Vec<u8>,
    r: &RecordRef<'_, E, H>,
) -> Result<(), WalError> {
    record::encode(buf, r).map_err(|e| WalError::Encode(e.to_string()))
}

impl<F: LogFormat> Wal<F> {
    fn segment_name(seq: u64) -> String {
        format!("{seq:016x}.{}", F::SEGMENT_EXT)
    }

    pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
        let stem = name.strip_suffix(F::SEGMENT_EXT)?.strip_suffix('.')?;
        u64::from_str_radix(stem, 16).ok()
    }

    /// Opens the WAL on `disk` (creating it if empty) and returns what was durable.
    pub fn open(disk: Arc<dyn Disk>, opts: WalOptions) -> Result<(Self, Recovered<F>), WalError> {
        let names = disk.list().map_err(io_err("<dir>"))?;
        let mut segs: Vec<(u64, String)> = Vec::new();
        let mut snaps: Vec<(u64, u64, String)> = Vec::new();
        for name in names {
            if name.ends_with(".tmp") {
                // An atomic write that did not reach its rename.
                disk.remove(&name).map_err(io_err(&name))?;
            } else if let Some(seq) = Self::parse_segment_name(&name) {
                segs.push((seq, name));
            } else if let Some((i, t)) = snapfile::parse_name(&name) {
                snaps.push((i, t, name));
            }
        }
        segs.sort();
        snaps.sort();
        let snapshots = SnapshotFiles {
            disk: disk.as_ref(),
            files: snaps,
        };

        if segs.is_empty() {
            if snapshots.newest()?.is_some() {
                return Err(WalError::Corrupt(
                    "snapshot files but no log segment".to_string(),
                ));
            }
            let name = Self::segment_name(1);
            let file = disk.create(&name).map_err(io_err(&name))?;
            let segment = Segment {
                seq: 1,
                name,
                max_index: 0,
            };
            let wal = Self::with_file(disk, opts, file, 0, vec![segment]);
            return Ok((wal, Recovered::default()));
        }

        let mut replay = Replay::<F>::new();
        let mut segments = Vec::with_capacity(segs.len());
        let mut tail_len = 0u64;
        let count = segs.len();
        for (k, (seq, name)) in segs.into_iter().enumerate() {
            let bytes = disk.read(&name).map_err(io_err(&name))?;
            let scan = record::scan::<Record<F::Entry, F::HardState>>(&bytes);
            let mut max_index = 0;
            for r in scan.records {
                if let Some(last) = replay.apply(r)? {
                    max_index = max_index.max(last);
                }
            }
            if let Some(why) = scan.torn {
                if k + 1 < count {
                    return Err(WalError::Corrupt(format!(
                        "segment {name} damaged at byte {} ({why}) but later segments exist",
                        scan.valid_len
                    )));
                }
                tracing::warn!(
                    segment = %name,
                    at = scan.valid_len,
                    dropped = bytes.len() - scan.valid_len,
                    why,
                    "cutting torn WAL tail"
                );
                disk.truncate(&name, scan.valid_len as u64)
                    .map_err(io_err(&name))?;
            }
            tail_len = scan.valid_len as u64;
            segments.push(Segment {
                seq,
                name,
                max_index,
            });
        }

        let state = F::recover(replay, &snapshots)?;
        let current = segments
            .last()
            .map(|s| s.name.clone())
            .ok_or_else(|| WalError::Corrupt("no segment".to_string()))?;
        let file = disk.open_append(&current).map_err(io_err(&current))?;
        let mut wal = Self::with_file(disk, opts, file, tail_len, segments);
        wal.hard_state = state.hard_state.clone();
        wal.snapshot = state.snapshot.as_ref().map(|s| (s.index, s.term));
        Ok((wal, state))
    }

    fn with_file(
        disk: Arc<dyn Disk>,
        opts: WalOptions,
        file: Box<dyn DiskFile>,
        file_len: u64,
        segments: Vec<Segment>,
    ) -> Self {
        Self {
            disk,
            opts,
            segments,
            file,
            file_len,
            dirty: false,
            hard_state: F::HardState::default(),
            snapshot: None,
            buf: Vec::new(),
            stats: WalStats::default(),
            broken: false,
        }
    }

    pub fn stats(&self) -> WalStats {
        self.stats
    }

    /// Number of segment files.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Writes a truncation after `truncate_after`, then `entries` (replacing stored entries
    /// from the first one's position on), then `hard_state`, as one write. Not durable
    /// until [`Wal::sync`].
    pub fn append(
        &mut self,
        truncate_after: Option<u64>,
        entries: &[F::Entry],
        hard_state: Option<&F::HardState>,
    ) -> Result<(), WalError> {
        if self.broken {
            return Err(WalError::Broken);
        }
        if truncate_after.is_none() && entries.is_empty() && hard_state.is_none() {
            return Ok(());
        }
        self.maybe_roll()?;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let encoded = encode_batch::<F>(
            &mut buf,
            truncate_after,
            entries,
            hard_state,
            self.opts.record_bytes,
        );
        let result = encoded.and_then(|()| self.write(&buf));
        self.buf = buf;
        result?;
        if let Some(last) = entries.last() {
            if let Some(seg) = self.segments.last_mut() {
                seg.max_index = seg.max_index.max(F::index(last));
            }
        }
        if let Some(hs) = hard_state {
            self.hard_state = hs.clone();
        }
        self.stats.appends += 1;
        self.stats.entries += entries.len() as u64;
        Ok(())
    }

    /// Makes everything appended so far durable (one sync, whatever the batch size).
    pub fn sync(&mut self) -> Result<(), WalError> {
        if self.broken {
            return Err(WalError::Broken);
        }
        if !self.dirty {
            return Ok(());
        }
        if let Err(e) = self.file.sync() {
            self.broken = true;
            return Err(io_err(self.current_name())(e));
        }
        self.dirty = false;
        self.stats.syncs += 1;
        Ok(())
    }

    /// Stores `snap` durably. `install`: it replaces the whole log (received from a
    /// leader); otherwise it covers a prefix (local compaction). Removes what it made
    /// obsolete. Everything appended before is synced too.
    pub fn save_snapshot(&mut self, snap: &Snapshot, install: bool) -> Result<(), WalError> {
        if self.broken {
            return Err(WalError::Broken);
        }
        if !install && self.is_stale(snap.index) {
            return Ok(());
        }
        let file = write_snapshot_file(self.disk.as_ref(), snap)?;
        self.record_snapshot(snap.index, snap.term, install, &file)
            .map(|_| ())
    }

    /// Whether a local snapshot at `index` would add nothing to the durable one.
    fn is_stale(&self, index: u64) -> bool {
        self.snapshot.is_some_and(|(i, _)| i >= index)
    }

    /// The second half of [`Wal::save_snapshot`], for a snapshot `file` already written
    /// durably (by [`write_snapshot_file`], possibly on another thread): writes its marker,
    /// syncs, and removes the segments and older snapshot files it made obsolete. A local
    /// snapshot no newer than the durable one is not recorded, and its file is removed
    /// unless it is the durable one's; returns whether it was recorded.
    pub(crate) fn record_snapshot(
        &mut self,
        index: u64,
        term: u64,
        install: bool,
        file: &str,
    ) -> Result<bool, WalError> {
        if self.broken {
            return Err(WalError::Broken);
        }
        if !install && self.is_stale(index) {
            if self.snapshot.is_some_and(|(i, _)| i > index) {
                self.disk.remove(file).map_err(io_err(file))?;
            }
            return Ok(false);
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let marker = Ref::<'_, F>::Snapshot {
            index,
            term,
            install,
        };
        let written = enc(&mut buf, &marker).and_then(|()| self.write(&buf));
        self.buf = buf;
        written?;
        self.sync()?;
        self.snapshot = Some((index, term));
        self.stats.snapshots += 1;

        // Only a prefix of segments may go: a later segment replays on top of earlier ones.
        let current = self.segments.len().saturating_sub(1);
        let obsolete = self.segments[..current]
            .iter()
            .take_while(|s| install || s.max_index <= index)
            .count();
        for seg in self.segments.drain(..obsolete) {
            self.disk.remove(&seg.name).map_err(io_err(&seg.name))?;
            self.stats.segments_removed += 1;
        }
        for name in self.disk.list().map_err(io_err("<dir>"))? {
            if let Some((i, _)) = snapfile::parse_name(&name) {
                if i < index || (i == index && name != file) {
                    self.disk.remove(&name).map_err(io_err(&name))?;
                }
            }
        }
        Ok(true)
    }

    /// The disk the log is on, for writing snapshot files off the WAL's thread.
    pub(crate) fn disk(&self) -> Arc<dyn Disk> {
        self.disk.clone()
    }

    /// `snap`'s data as mapped from its file once [`Wal::save_snapshot`] stored it, so the
    /// caller can drop its heap copy; `None` when the disk does not map files or the file
    /// is not (or no longer) that snapshot's.
    pub fn mapped_snapshot(&self, snap: &Snapshot) -> Result<Option<Bytes>, WalError> {
        let name = snapfile::name(snap.index, snap.term);
        snapfile::map(self.disk.as_ref(), snap.index, snap.term, snap.data.len()).or_else(|e| {
            match e.kind() {
                io::ErrorKind::NotFound => Ok(None),
                _ => Err(io_err(&name)(e)),
            }
        })
    }

    fn current_name(&self) -> &str {
        self.segments.last().map_or("<none>", |s| s.name.as_str())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), WalError> {
        if let Err(e) = self.file.append(bytes) {
            self.broken = true;
            return Err(io_err(self.current_name())(e));
        }
        self.file_len += bytes.len() as u64;
        self.stats.bytes += bytes.len() as u64;
        self.dirty = true;
        Ok(())
    }

    /// Starts a new segment once the current one is full. Its head repeats the current
    /// snapshot marker and hard state so it does not depend on the segments before it.
    fn maybe_roll(&mut self) -> Result<(), WalError> {
        if self.file_len < self.opts.segment_bytes {
            return Ok(());
        }
        // The old segment must be complete on disk before a newer one exists.
        self.sync()?;
        let seq = self.segments.last().map_or(1, |s| s.seq + 1);
        let name = Self::segment_name(seq);
        let file = self.disk.create(&name).map_err(io_err(&name))?;
        self.file = file;
        self.file_len = 0;
        self.segments.push(Segment {
            seq,
            name,
            max_index: 0,
        });
        let mut head = Vec::new();
        if let Some((index, term)) = self.snapshot {
            let r = Ref::<'_, F>::Snapshot {
                index,
                term,
                install: false,
            };
            enc(&mut head, &r)?;
        }
        let hs = self.hard_state.clone();
        enc(&mut head, &Ref::<'_, F>::HardState(&hs))?;
        self.write(&head)
    }
}

/// Writes `snap`'s file durably (written aside, synced, then renamed into place: a crash
/// leaves either no file or the whole one); returns its name. It counts for nothing until
/// [`Wal::record_snapshot`] writes its marker.
pub(crate) fn write_snapshot_file(disk: &dyn Disk, snap: &Snapshot) -> Result<String, WalError> {
    snapfile::write(disk, snap).map_err(io_err(&snapfile::name(snap.index, snap.term)))
}

fn encode_batch<F: LogFormat>(
    buf: &mut Vec<u8>,
    truncate_after: Option<u64>,
    entries: &[F::Entry],
    hard_state: Option<&F::HardState>,
    record_bytes: usize,
) -> Result<(), WalError> {
    if let Some(index) = truncate_after {
        enc(buf, &Ref::<'_, F>::TruncateAfter(index))?;
    }
    let mut start = 0;
    let mut size = 0;
    for (k, e) in entries.iter().enumerate() {
        size += F::encoded_size(e);
        if size >= record_bytes {
            enc(buf, &Ref::<'_, F>::Entries(&entries[start..=k]))?;
            start = k + 1;
            size = 0;
        }
    }
    if start < entries.len() {
        enc(buf, &Ref::<'_, F>::Entries(&entries[start..]))?;
    }
    // After the entries: a torn batch may keep entries without their hard state (the
    // core's `recover` handles it), but never a commit point ahead of the entries it covers.
    if let Some(hs) = hard_state {
        enc(buf, &Ref::<'_, F>::HardState(hs))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::MemDisk;
    use crate::raft_node::{RaftFormat, RaftWal};
    use coordbench_raft::{Entry, EntryKind, HardState};

    fn ent(index: u64, term: u64) -> Entry {
        Entry {
            term,
            index,
            kind: EntryKind::Normal(format!("e{index}t{term}").into_bytes()),
        }
    }

    fn ents(lo: u64, hi: u64, term: u64) -> Vec<Entry> {
        (lo..=hi).map(|i| ent(i, term)).collect()
    }

    fn hs(term: u64, commit: u64) -> HardState {
        HardState {
            term,
            vote: Some(1),
            commit,
        }
    }

    fn small() -> WalOptions {
        WalOptions {
            segment_bytes: 200,
            record_bytes: 100,
        }
    }

    type R = Result<(), WalError>;

    #[test]
    fn recovers_after_clean_shutdown() -> R {
        let disk = MemDisk::new();
        let (mut wal, st) = RaftWal::open(Arc::new(disk.clone()), small())?;
        assert_eq!(st.hard_state, HardState::default());
        assert_eq!((st.snapshot, st.entries.len()), (None, 0));
        wal.append(None, &ents(1, 50, 1), Some(&hs(1, 10)))?;
        wal.sync()?;
        wal.append(None, &ents(51, 60, 2), Some(&hs(2, 55)))?;
        wal.sync()?;
        assert!(wal.segment_count() > 1, "small segments roll over");
        assert_eq!(wal.stats().syncs, 2, "one sync per batch");
        drop(wal);
        let (_, st) = RaftWal::open(Arc::new(disk), small())?;
        let mut want = ents(1, 50, 1);
        want.extend(ents(51, 60, 2));
        assert_eq!(st.entries, want);
        assert_eq!(st.hard_state, hs(2, 55));
        assert_eq!(st.snapshot, None);
        Ok(())
    }

    #[test]
    fn recovers_after_torn_tail_and_keeps_appending() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), WalOptions::default())?;
        wal.append(None, &ents(1, 5, 1), Some(&hs(1, 3)))?;
        wal.sync()?;
        wal.append(None, &ents(6, 9, 1), Some(&hs(1, 5)))?;
        // Power fails in the middle of the unsynced write, leaving half of it (garbled).
        disk.crash(|n| n / 2, true);
        let (mut wal, st) = RaftWal::open(Arc::new(disk.clone()), WalOptions::default())?;
        assert_eq!(st.entries, ents(1, 5, 1));
        assert_eq!(st.hard_state, hs(1, 3));
        // The torn bytes were cut, so new records are readable after a restart.
        wal.append(None, &ents(6, 7, 2), Some(&hs(2, 6)))?;
        wal.sync()?;
        drop(wal);
        let (_, st) = RaftWal::open(Arc::new(disk), WalOptions::default())?;
        let mut want = ents(1, 5, 1);
        want.extend(ents(6, 7, 2));
        assert_eq!(st.entries, want);
        assert_eq!(st.hard_state, hs(2, 6));
        Ok(())
    }

    #[test]
    fn recovers_after_truncation() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), small())?;
        wal.append(None, &ents(1, 10, 1), Some(&hs(1, 4)))?;
        wal.sync()?;
        // A new leader overwrites the uncommitted suffix from 6 on.
        wal.append(None, &ents(6, 8, 2), Some(&hs(2, 5)))?;
        wal.sync()?;
        drop(wal);
        let (_, st) = RaftWal::open(Arc::new(disk), small())?;
        let mut want = ents(1, 5, 1);
        want.extend(ents(6, 8, 2));
        assert_eq!(st.entries, want);
        Ok(())
    }

    #[test]
    fn recovers_after_snapshot_and_compaction() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), small())?;
        for k in 0..20 {
            wal.append(
                None,
                &ents(k * 10 + 1, k * 10 + 10, 1),
                Some(&hs(1, k * 10)),
            )?;
            wal.sync()?;
        }
        let before = wal.segment_count();
        let snap = Snapshot {
            index: 150,
            term: 1,
            data: b"sm@150".to_vec().into(),
        };
        wal.save_snapshot(&snap, false)?;
        assert!(wal.segment_count() < before, "old segments removed");
        assert!(wal.stats().segments_removed > 0);
        wal.append(None, &ents(201, 205, 1), Some(&hs(1, 200)))?;
        wal.sync()?;
        drop(wal);
        let (mut wal, st) = RaftWal::open(Arc::new(disk.clone()), small())?;
        assert_eq!(st.snapshot, Some(snap));
        assert_eq!(st.entries, ents(151, 205, 1));
        assert_eq!(st.hard_state, hs(1, 200));

        // A snapshot received from a leader replaces the whole log.
        let snap2 = Snapshot {
            index: 300,
            term: 3,
            data: b"sm@300".to_vec().into(),
        };
        wal.save_snapshot(&snap2, true)?;
        wal.append(None, &[], Some(&hs(3, 300)))?;
        wal.sync()?;
        assert_eq!(wal.segment_count(), 1);
        let snap_files: Vec<String> = disk
            .list()
            .map_err(io_err("list"))?
            .into_iter()
            .filter(|n| n.ends_with(".snap"))
            .collect();
        assert_eq!(snap_files, vec![snapfile::name(300, 3)]);
        drop(wal);
        let (_, st) = RaftWal::open(Arc::new(disk), small())?;
        assert_eq!(st.snapshot, Some(snap2));
        assert!(st.entries.is_empty());
        assert_eq!(st.hard_state, hs(3, 300));
        Ok(())
    }

    #[test]
    fn snapshot_file_without_marker_follows_raft_install_rule() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), WalOptions::default())?;
        wal.append(None, &ents(1, 10, 1), Some(&hs(1, 10)))?;
        wal.sync()?;
        drop(wal);
        // Crash after the snapshot file was written, before its marker: a matching log is
        // kept after the snapshot, a conflicting one is dropped.
        let s = Snapshot {
            index: 6,
            term: 1,
            data: Bytes::new(),
        };
        snapfile::write(&disk, &s).map_err(io_err("snap"))?;
        let (_, st) = RaftWal::open(Arc::new(disk.clone()), WalOptions::default())?;
        assert_eq!(st.entries, ents(7, 10, 1));
        let s = Snapshot {
            index: 8,
            term: 2,
            data: Bytes::new(),
        };
        snapfile::write(&disk, &s).map_err(io_err("snap"))?;
        let (_, st) = RaftWal::open(Arc::new(disk), WalOptions::default())?;
        assert!(st.entries.is_empty());
        assert_eq!(st.hard_state.term, 2, "term follows the snapshot");
        assert_eq!(st.snapshot.map(|s| s.index), Some(8));
        Ok(())
    }

    #[test]
    fn a_snapshot_file_cut_short_is_ignored_at_start_up() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), WalOptions::default())?;
        wal.append(None, &ents(1, 10, 1), Some(&hs(1, 10)))?;
        let at = |index| Snapshot {
            index,
            term: 1,
            data: Bytes::from(vec![7u8; 1_000]),
        };
        wal.save_snapshot(&at(3), false)?;
        drop(wal);
        // A crash while the next snapshot was written: its file written aside but not
        // renamed, or (on a disk that does not sync) renamed but cut short.
        let name = snapfile::write(&disk, &at(6)).map_err(io_err("snap"))?;
        let whole = disk.read(&name).map_err(io_err(&name))?;
        let half = &whole[..whole.len() / 2];
        disk.write_atomic(&format!("{name}.tmp"), &[half])
            .map_err(io_err("tmp"))?;
        disk.write_atomic(&name, &[half]).map_err(io_err(&name))?;
        let (_, st) = RaftWal::open(Arc::new(disk.clone()), WalOptions::default())?;
        assert_eq!(st.snapshot.map(|s| s.index), Some(3));
        assert_eq!(st.entries, ents(4, 10, 1));
        let names = disk.list().map_err(io_err("<dir>"))?;
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
        Ok(())
    }

    #[test]
    fn damage_before_the_last_segment_is_corruption() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), small())?;
        for k in 0..5 {
            wal.append(None, &ents(k * 10 + 1, k * 10 + 10, 1), None)?;
            wal.sync()?;
        }
        drop(wal);
        let first = RaftWal::segment_name(1);
        let mut bytes = disk.read(&first).map_err(io_err("read"))?;
        bytes[20] ^= 0xff;
        disk.write_atomic(&first, &[&bytes])
            .map_err(io_err("write"))?;
        assert!(matches!(
            RaftWal::open(Arc::new(disk), small()),
            Err(WalError::Corrupt(_))
        ));
        Ok(())
    }

    /// A tiny deterministic generator for the crash test.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// What the log should hold, mirrored in memory.
    #[derive(Clone, Debug, PartialEq)]
    struct Model {
        hs: HardState,
        snap: Option<(u64, u64)>,
        entries: Vec<Entry>,
    }

    impl Model {
        fn last(&self) -> (u64, u64) {
            self.entries
                .last()
                .map(|e| (e.index, e.term))
                .or(self.snap)
                .unwrap_or((0, 0))
        }

        /// What recovery reports for this state (term fix-up included).
        fn expected(&self) -> Model {
            let mut m = self.clone();
            let newest = m.last().1.max(m.snap.map_or(0, |s| s.1));
            if newest > m.hs.term {
                m.hs.term = newest;
                m.hs.vote = None;
            }
            m
        }
    }

    /// Random appends, overwrites, syncs and snapshots on a disk that loses (or tears)
    /// unsynced writes at random crashes. After every crash the recovered log must be the
    /// state at the last sync or a later state reached by whole records, never less: no
    /// synced (acknowledgeable) record is lost, and nothing appears that was not written.
    #[test]
    fn crashes_never_lose_synced_records() -> R {
        for seed in 0..40u64 {
            let mut rng = Rng(seed);
            let disk = MemDisk::new();
            let opts = WalOptions {
                segment_bytes: 300 + rng.below(2000),
                record_bytes: 64 + rng.below(400) as usize,
            };
            let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), opts)?;
            let mut model = Model {
                hs: HardState::default(),
                snap: None,
                entries: Vec::new(),
            };
            // States reachable by a crash now: the synced one and each later record boundary.
            let mut candidates = vec![model.clone()];
            let mut synced_entries = 0u64;
            for _step in 0..300 {
                match rng.below(10) {
                    0..=4 => {
                        let (last, last_term) = model.last();
                        let snap_index = model.snap.map_or(0, |s| s.0);
                        // Overwrite from somewhere after the commit point, or append.
                        let lo_min = model.hs.commit.max(snap_index) + 1;
                        let from = if rng.below(4) == 0 && last >= lo_min {
                            lo_min + rng.below(last - lo_min + 1)
                        } else {
                            last + 1
                        };
                        let term = last_term.max(model.hs.term) + rng.below(2);
                        let batch = ents(from, from + rng.below(12), term.max(1));
                        // Record granularity: entry chunks, then the hard state.
                        let mut chunked = Vec::new();
                        let mut size = 0;
                        let mut start = 0;
                        for (k, e) in batch.iter().enumerate() {
                            size += RaftFormat::encoded_size(e);
                            if size >= opts.record_bytes {
                                chunked.push(batch[start..=k].to_vec());
                                start = k + 1;
                                size = 0;
                            }
                        }
                        if start < batch.len() {
                            chunked.push(batch[start..].to_vec());
                        }
                        let new_commit =
                            (model.hs.commit + rng.below(4)).min(from - 1 + batch.len() as u64);
                        let new_hs = HardState {
                            term: term.max(1),
                            vote: Some(1 + rng.below(3)),
                            commit: new_commit.max(model.hs.commit),
                        };
                        wal.append(None, &batch, Some(&new_hs))?;
                        for chunk in chunked {
                            model.entries.retain(|e| e.index < chunk[0].index);
                            model.entries.extend(chunk);
                            candidates.push(model.clone());
                        }
                        model.hs = new_hs;
                        candidates.push(model.clone());
                    }
                    5..=6 => {
                        wal.sync()?;
                        synced_entries = model.last().0;
                        candidates = vec![model.clone()];
                    }
                    7 => {
                        // Local compaction at or below the commit index (synced first, as
                        // the runtime only compacts applied = committed + durable entries).
                        wal.sync()?;
                        let snap_index = model.snap.map_or(0, |s| s.0);
                        let commit = model.hs.commit;
                        if commit > snap_index {
                            let at = snap_index + 1 + rng.below(commit - snap_index);
                            if let Some(e) = model.entries.iter().find(|e| e.index == at) {
                                let s = Snapshot {
                                    index: at,
                                    term: e.term,
                                    data: at.to_le_bytes().to_vec().into(),
                                };
                                wal.save_snapshot(&s, false)?;
                                model.entries.retain(|e| e.index > at);
                                model.snap = Some((at, s.term));
                            }
                        }
                        candidates = vec![model.clone()];
                    }
                    8 => {
                        if rng.below(6) == 0 {
                            // A snapshot from a leader, past our log.
                            wal.sync()?;
                            let (last, last_term) = model.last();
                            let term = last_term.max(model.hs.term) + 1;
                            let s = Snapshot {
                                index: last + 1 + rng.below(5),
                                term,
                                data: vec![7].into(),
                            };
                            wal.save_snapshot(&s, true)?;
                            model.entries.clear();
                            model.snap = Some((s.index, s.term));
                            let new_hs = HardState {
                                term,
                                vote: None,
                                commit: s.index,
                            };
                            wal.append(None, &[], Some(&new_hs))?;
                            model.hs = new_hs;
                            wal.sync()?;
                            candidates = vec![model.clone()];
                        }
                    }
                    _ => {
                        // Crash: unsynced bytes are lost or torn.
                        let tear = rng.below(3);
                        let mut r2 = Rng(rng.next());
                        disk.crash(
                            |n| match tear {
                                0 => 0,
                                1 => r2.below(n as u64 + 1) as usize,
                                _ => n,
                            },
                            rng.below(2) == 0,
                        );
                        let (w, st) = RaftWal::open(Arc::new(disk.clone()), opts)?;
                        wal = w;
                        let got = Model {
                            hs: st.hard_state,
                            snap: st.snapshot.map(|s| (s.index, s.term)),
                            entries: st.entries,
                        };
                        let ok = candidates.iter().any(|c| c.expected() == got);
                        assert!(
                            ok,
                            "seed {seed}: recovered state is not a crash-consistent state \
                             (synced up to {synced_entries}): {got:?}\ncandidates: {candidates:?}"
                        );
                        model = got;
                        candidates = vec![model.clone()];
                    }
                }
            }
        }
        Ok(())
    }

    /// The Zab format: truncations, non-contiguous zxids.
    mod zab {
        use super::*;
        use crate::zab_node::ZabWal;
        use coordbench_zab::{HardState, Proposal, Zxid};

        fn zp(epoch: u32, c: u32) -> Proposal {
            Proposal {
                zxid: Zxid::new(epoch, c),
                data: vec![c as u8; 10],
            }
        }

        #[test]
        fn zab_replays_appends_truncations_snapshots_and_rolls() -> Result<(), WalError> {
            let disk: Arc<dyn Disk> = Arc::new(MemDisk::new());
            let opts = WalOptions {
                segment_bytes: 200,
                record_bytes: 64,
            };
            let (mut wal, st) = ZabWal::open(disk.clone(), opts)?;
            assert_eq!(st.hard_state, HardState::default());
            assert_eq!((st.snapshot, st.entries.len()), (None, 0));
            let hs = HardState {
                accepted_epoch: 1,
                current_epoch: 1,
                commit: Zxid::new(1, 2),
                round: 3,
            };
            wal.append(None, &[zp(1, 1), zp(1, 2), zp(1, 3), zp(1, 4)], Some(&hs))?;
            wal.append(Some(Zxid::new(1, 2).0), &[zp(2, 1)], None)?;
            for c in 2..20 {
                wal.append(None, &[zp(2, c)], None)?;
            }
            wal.sync()?;
            let snap = Snapshot {
                index: Zxid::new(2, 10).0,
                term: 0,
                data: b"state".to_vec().into(),
            };
            wal.save_snapshot(&snap, false)?;
            wal.sync()?;
            drop(wal);
            let (_, st) = ZabWal::open(disk, opts)?;
            assert_eq!(st.snapshot, Some(snap));
            let zxids: Vec<Zxid> = st.entries.iter().map(|p| p.zxid).collect();
            let want: Vec<Zxid> = (11..20).map(|c| Zxid::new(2, c)).collect();
            assert_eq!(zxids, want);
            assert_eq!(st.hard_state, hs);
            Ok(())
        }
    }
}
