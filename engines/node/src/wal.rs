//! The write-ahead log: what a node made durable, and how to get it back after a restart.
//!
//! Layout on the [`Disk`]: segments `<seq:016x>.wal` of framed records (see `record`) and
//! snapshot files `snap-<index>-<term>.snap` (see `snapfile`).
//!
//! - **Group commit.** [`Wal::append`] writes a whole batch (every entry of a Ready plus its
//!   hard state) with one write call; [`Wal::sync`] then makes all of it durable with one
//!   sync. Only what a returned sync covered may be acknowledged.
//! - **Truncation.** An `Entries` record replaces every stored entry from its first index on,
//!   so a new leader's overwrite of an uncommitted suffix is just another append.
//! - **Snapshots.** [`Wal::save_snapshot`] writes the snapshot file durably, then a marker
//!   record, syncs, and removes the segments (a prefix of them) and older snapshot files it
//!   made obsolete. Every segment starts with the hard state and snapshot marker current at
//!   its creation, so the remaining segments replay on their own.
//! - **Recovery.** [`Wal::open`] replays the segments in order. A damaged record in the last
//!   segment is a write torn by a crash: the segment is cut there (nothing after it was
//!   synced, so nothing after it was acknowledged). Damage in an earlier segment, which was
//!   fully synced before the next one began, is reported as corruption.

use std::io;
use std::sync::Arc;

use coordbench_raft::{Entry, EntryKind, HardState, PersistedState, Snapshot};

use crate::disk::{Disk, DiskFile};
use crate::record::{self, Record, RecordRef};
use crate::snapfile;

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

fn io_err(file: &str) -> impl FnOnce(io::Error) -> WalError + '_ {
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
    /// Highest entry index written into it (0: none).
    max_index: u64,
}

fn segment_name(seq: u64) -> String {
    format!("{seq:016x}.wal")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    u64::from_str_radix(name.strip_suffix(".wal")?, 16).ok()
}

fn entry_size(e: &Entry) -> usize {
    match &e.kind {
        EntryKind::Normal(d) => d.len() + 24,
        EntryKind::Noop => 24,
    }
}

pub struct Wal {
    disk: Arc<dyn Disk>,
    opts: WalOptions,
    /// Oldest first; the last one is being appended to.
    segments: Vec<Segment>,
    file: Box<dyn DiskFile>,
    file_len: u64,
    /// Written since the last sync.
    dirty: bool,
    /// Last hard state written (repeated at the head of every new segment).
    hard_state: HardState,
    /// Latest snapshot whose marker is durable, as (index, term).
    snapshot: Option<(u64, u64)>,
    buf: Vec<u8>,
    stats: WalStats,
    broken: bool,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("segments", &self.segments)
            .field("file_len", &self.file_len)
            .field("snapshot", &self.snapshot)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The log being rebuilt from records during recovery.
#[derive(Default)]
struct Replay {
    entries: Vec<Entry>,
    hard_state: HardState,
    marker: Option<(u64, u64)>,
}

impl Replay {
    fn apply(&mut self, r: Record) -> Result<Option<u64>, WalError> {
        match r {
            Record::Entries(ents) => {
                let Some(first) = ents.first().map(|e| e.index) else {
                    return Ok(None);
                };
                if ents
                    .iter()
                    .enumerate()
                    .any(|(k, e)| e.index != first + k as u64)
                {
                    return Err(WalError::Corrupt(format!(
                        "entries record from {first} is not contiguous"
                    )));
                }
                let last = first + ents.len() as u64 - 1;
                match self.entries.first().map(|e| e.index) {
                    Some(start) if first >= start && first <= start + self.entries.len() as u64 => {
                        self.entries.truncate((first - start) as usize);
                        self.entries.extend(ents);
                    }
                    // Empty log, an overwrite reaching before it, or a gap (earlier entries
                    // lived in segments removed after a snapshot): start over from here.
                    _ => self.entries = ents,
                }
                Ok(Some(last))
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
                    self.entries.retain(|e| e.index > index);
                }
                Ok(None)
            }
        }
    }
}

impl Wal {
    /// Opens the WAL on `disk` (creating it if empty) and returns what was durable.
    pub fn open(disk: Arc<dyn Disk>, opts: WalOptions) -> Result<(Self, PersistedState), WalError> {
        let names = disk.list().map_err(io_err("<dir>"))?;
        let mut segs: Vec<(u64, String)> = Vec::new();
        let mut snaps: Vec<(u64, u64, String)> = Vec::new();
        for name in names {
            if name.ends_with(".tmp") {
                // An atomic write that did not reach its rename.
                disk.remove(&name).map_err(io_err(&name))?;
            } else if let Some(seq) = parse_segment_name(&name) {
                segs.push((seq, name));
            } else if let Some((i, t)) = snapfile::parse_name(&name) {
                snaps.push((i, t, name));
            }
        }
        segs.sort();
        snaps.sort();

        // The newest readable snapshot file.
        let mut snapshot: Option<Snapshot> = None;
        for (_, _, name) in snaps.iter().rev() {
            let bytes = disk.read(name).map_err(io_err(name))?;
            match snapfile::decode(&bytes) {
                Ok(s) => {
                    snapshot = Some(s);
                    break;
                }
                Err(why) => tracing::warn!(file = %name, why, "skipping unreadable snapshot"),
            }
        }

        if segs.is_empty() {
            if snapshot.is_some() {
                return Err(WalError::Corrupt(
                    "snapshot files but no log segment".to_string(),
                ));
            }
            let name = segment_name(1);
            let file = disk.create(&name).map_err(io_err(&name))?;
            let wal = Self::with_file(disk, opts, file, 0, Vec::new());
            let wal = Self {
                segments: vec![Segment {
                    seq: 1,
                    name,
                    max_index: 0,
                }],
                ..wal
            };
            return Ok((wal, PersistedState::default()));
        }

        let mut replay = Replay::default();
        let mut segments = Vec::with_capacity(segs.len());
        let mut tail_len = 0u64;
        let count = segs.len();
        for (k, (seq, name)) in segs.into_iter().enumerate() {
            let bytes = disk.read(&name).map_err(io_err(&name))?;
            let scan = record::scan::<Record>(&bytes);
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

        let state = finish(replay, snapshot)?;
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
            hard_state: HardState::default(),
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

    /// Writes `entries` (replacing stored entries from `entries[0].index` on) and then
    /// `hard_state`, as one write. Not durable until [`Wal::sync`].
    pub fn append(
        &mut self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), WalError> {
        if self.broken {
            return Err(WalError::Broken);
        }
        if entries.is_empty() && hard_state.is_none() {
            return Ok(());
        }
        self.maybe_roll()?;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let encoded = encode_batch(&mut buf, entries, hard_state, self.opts.record_bytes);
        let result = encoded.and_then(|()| self.write(&buf));
        self.buf = buf;
        result?;
        if let Some(last) = entries.last() {
            if let Some(seg) = self.segments.last_mut() {
                seg.max_index = seg.max_index.max(last.index);
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
        if !install && self.snapshot.is_some_and(|(i, _)| i >= snap.index) {
            return Ok(());
        }
        let file = snapfile::write(self.disk.as_ref(), snap)
            .map_err(io_err(&snapfile::name(snap.index, snap.term)))?;
        self.buf.clear();
        let marker = RecordRef::Snapshot {
            index: snap.index,
            term: snap.term,
            install,
        };
        record::encode(&mut self.buf, &marker).map_err(|e| WalError::Encode(e.to_string()))?;
        let buf = std::mem::take(&mut self.buf);
        let written = self.write(&buf);
        self.buf = buf;
        written?;
        self.sync()?;
        self.snapshot = Some((snap.index, snap.term));
        self.stats.snapshots += 1;

        // Only a prefix of segments may go: a later segment replays on top of earlier ones.
        let current = self.segments.len().saturating_sub(1);
        let obsolete = self.segments[..current]
            .iter()
            .take_while(|s| install || s.max_index <= snap.index)
            .count();
        for seg in self.segments.drain(..obsolete) {
            self.disk.remove(&seg.name).map_err(io_err(&seg.name))?;
            self.stats.segments_removed += 1;
        }
        for name in self.disk.list().map_err(io_err("<dir>"))? {
            if let Some((i, _)) = snapfile::parse_name(&name) {
                if i < snap.index || (i == snap.index && name != file) {
                    self.disk.remove(&name).map_err(io_err(&name))?;
                }
            }
        }
        Ok(())
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
        let name = segment_name(seq);
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
            let r = RecordRef::Snapshot {
                index,
                term,
                install: false,
            };
            record::encode(&mut head, &r).map_err(|e| WalError::Encode(e.to_string()))?;
        }
        let hs = self.hard_state.clone();
        record::encode(&mut head, &RecordRef::HardState(&hs))
            .map_err(|e| WalError::Encode(e.to_string()))?;
        self.write(&head)
    }
}

fn encode_batch(
    buf: &mut Vec<u8>,
    entries: &[Entry],
    hard_state: Option<&HardState>,
    record_bytes: usize,
) -> Result<(), WalError> {
    let enc = |buf: &mut Vec<u8>, r: &RecordRef<'_>| {
        record::encode(buf, r).map_err(|e| WalError::Encode(e.to_string()))
    };
    let mut start = 0;
    let mut size = 0;
    for (k, e) in entries.iter().enumerate() {
        size += entry_size(e);
        if size >= record_bytes {
            enc(buf, &RecordRef::Entries(&entries[start..=k]))?;
            start = k + 1;
            size = 0;
        }
    }
    if start < entries.len() {
        enc(buf, &RecordRef::Entries(&entries[start..]))?;
    }
    // After the entries: a torn batch may keep entries without their hard state (handled in
    // `finish`), but never a commit index ahead of the entries it covers.
    if let Some(hs) = hard_state {
        enc(buf, &RecordRef::HardState(hs))?;
    }
    Ok(())
}

/// Turns the replayed records and the newest snapshot file into the state to restart from.
fn finish(replay: Replay, snapshot: Option<Snapshot>) -> Result<PersistedState, WalError> {
    let Replay {
        mut entries,
        mut hard_state,
        marker,
    } = replay;
    let (snap_index, snap_term) = snapshot.as_ref().map_or((0, 0), |s| (s.index, s.term));
    let marker_index = marker.map_or(0, |m| m.0);
    if marker_index > snap_index {
        return Err(WalError::Corrupt(format!(
            "log refers to a snapshot at {marker_index} but the newest snapshot file is at {snap_index}"
        )));
    }
    if snap_index > marker_index {
        // The snapshot file became durable but a crash came before its marker did. Raft's
        // rule for installing a snapshot: keep the entries after it only if the log agrees
        // with it at its index.
        let agrees = entries
            .iter()
            .any(|e| e.index == snap_index && e.term == snap_term);
        if !agrees {
            entries.clear();
        }
    }
    entries.retain(|e| e.index > snap_index);
    if let Some(first) = entries.first() {
        if first.index != snap_index + 1 {
            return Err(WalError::Corrupt(format!(
                "log starts at {} but the snapshot ends at {snap_index}",
                first.index
            )));
        }
    }
    // Entries (or a snapshot) of a newer term can outlive the hard state written after them
    // in the same batch. No vote in that term was sent (votes go out only after a sync), so
    // adopting the term without a vote is safe.
    let newest = entries.last().map_or(snap_term, |e| e.term).max(snap_term);
    if newest > hard_state.term {
        hard_state.term = newest;
        hard_state.vote = None;
    }
    Ok(PersistedState {
        hard_state,
        snapshot,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::MemDisk;

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
        let (mut wal, st) = Wal::open(Arc::new(disk.clone()), small())?;
        assert_eq!(st, PersistedState::default());
        wal.append(&ents(1, 50, 1), Some(&hs(1, 10)))?;
        wal.sync()?;
        wal.append(&ents(51, 60, 2), Some(&hs(2, 55)))?;
        wal.sync()?;
        assert!(wal.segment_count() > 1, "small segments roll over");
        assert_eq!(wal.stats().syncs, 2, "one sync per batch");
        drop(wal);
        let (_, st) = Wal::open(Arc::new(disk), small())?;
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
        let (mut wal, _) = Wal::open(Arc::new(disk.clone()), WalOptions::default())?;
        wal.append(&ents(1, 5, 1), Some(&hs(1, 3)))?;
        wal.sync()?;
        wal.append(&ents(6, 9, 1), Some(&hs(1, 5)))?;
        // Power fails in the middle of the unsynced write, leaving half of it (garbled).
        disk.crash(|n| n / 2, true);
        let (mut wal, st) = Wal::open(Arc::new(disk.clone()), WalOptions::default())?;
        assert_eq!(st.entries, ents(1, 5, 1));
        assert_eq!(st.hard_state, hs(1, 3));
        // The torn bytes were cut, so new records are readable after a restart.
        wal.append(&ents(6, 7, 2), Some(&hs(2, 6)))?;
        wal.sync()?;
        drop(wal);
        let (_, st) = Wal::open(Arc::new(disk), WalOptions::default())?;
        let mut want = ents(1, 5, 1);
        want.extend(ents(6, 7, 2));
        assert_eq!(st.entries, want);
        assert_eq!(st.hard_state, hs(2, 6));
        Ok(())
    }

    #[test]
    fn recovers_after_truncation() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = Wal::open(Arc::new(disk.clone()), small())?;
        wal.append(&ents(1, 10, 1), Some(&hs(1, 4)))?;
        wal.sync()?;
        // A new leader overwrites the uncommitted suffix from 6 on.
        wal.append(&ents(6, 8, 2), Some(&hs(2, 5)))?;
        wal.sync()?;
        drop(wal);
        let (_, st) = Wal::open(Arc::new(disk), small())?;
        let mut want = ents(1, 5, 1);
        want.extend(ents(6, 8, 2));
        assert_eq!(st.entries, want);
        Ok(())
    }

    #[test]
    fn recovers_after_snapshot_and_compaction() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = Wal::open(Arc::new(disk.clone()), small())?;
        for k in 0..20 {
            wal.append(&ents(k * 10 + 1, k * 10 + 10, 1), Some(&hs(1, k * 10)))?;
            wal.sync()?;
        }
        let before = wal.segment_count();
        let snap = Snapshot {
            index: 150,
            term: 1,
            data: b"sm@150".to_vec(),
        };
        wal.save_snapshot(&snap, false)?;
        assert!(wal.segment_count() < before, "old segments removed");
        assert!(wal.stats().segments_removed > 0);
        wal.append(&ents(201, 205, 1), Some(&hs(1, 200)))?;
        wal.sync()?;
        drop(wal);
        let (mut wal, st) = Wal::open(Arc::new(disk.clone()), small())?;
        assert_eq!(st.snapshot, Some(snap));
        assert_eq!(st.entries, ents(151, 205, 1));
        assert_eq!(st.hard_state, hs(1, 200));

        // A snapshot received from a leader replaces the whole log.
        let snap2 = Snapshot {
            index: 300,
            term: 3,
            data: b"sm@300".to_vec(),
        };
        wal.save_snapshot(&snap2, true)?;
        wal.append(&[], Some(&hs(3, 300)))?;
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
        let (_, st) = Wal::open(Arc::new(disk), small())?;
        assert_eq!(st.snapshot, Some(snap2));
        assert!(st.entries.is_empty());
        assert_eq!(st.hard_state, hs(3, 300));
        Ok(())
    }

    #[test]
    fn snapshot_file_without_marker_follows_raft_install_rule() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = Wal::open(Arc::new(disk.clone()), WalOptions::default())?;
        wal.append(&ents(1, 10, 1), Some(&hs(1, 10)))?;
        wal.sync()?;
        drop(wal);
        // Crash after the snapshot file was written, before its marker: a matching log is
        // kept after the snapshot, a conflicting one is dropped.
        let s = Snapshot {
            index: 6,
            term: 1,
            data: vec![],
        };
        snapfile::write(&disk, &s).map_err(io_err("snap"))?;
        let (_, st) = Wal::open(Arc::new(disk.clone()), WalOptions::default())?;
        assert_eq!(st.entries, ents(7, 10, 1));
        let s = Snapshot {
            index: 8,
            term: 2,
            data: vec![],
        };
        snapfile::write(&disk, &s).map_err(io_err("snap"))?;
        let (_, st) = Wal::open(Arc::new(disk), WalOptions::default())?;
        assert!(st.entries.is_empty());
        assert_eq!(st.hard_state.term, 2, "term follows the snapshot");
        assert_eq!(st.snapshot.map(|s| s.index), Some(8));
        Ok(())
    }

    #[test]
    fn damage_before_the_last_segment_is_corruption() -> R {
        let disk = MemDisk::new();
        let (mut wal, _) = Wal::open(Arc::new(disk.clone()), small())?;
        for k in 0..5 {
            wal.append(&ents(k * 10 + 1, k * 10 + 10, 1), None)?;
            wal.sync()?;
        }
        drop(wal);
        let first = segment_name(1);
        let mut bytes = disk.read(&first).map_err(io_err("read"))?;
        bytes[20] ^= 0xff;
        disk.write_atomic(&first, &bytes).map_err(io_err("write"))?;
        assert!(matches!(
            Wal::open(Arc::new(disk), small()),
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
            let (mut wal, _) = Wal::open(Arc::new(disk.clone()), opts)?;
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
                            size += entry_size(e);
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
                        wal.append(&batch, Some(&new_hs))?;
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
                                    data: at.to_le_bytes().to_vec(),
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
                                data: vec![7],
                            };
                            wal.save_snapshot(&s, true)?;
                            model.entries.clear();
                            model.snap = Some((s.index, s.term));
                            let new_hs = HardState {
                                term,
                                vote: None,
                                commit: s.index,
                            };
                            wal.append(&[], Some(&new_hs))?;
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
                        let (w, st) = Wal::open(Arc::new(disk.clone()), opts)?;
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
}
