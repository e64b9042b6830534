//! The Zab member's write-ahead log: the Zab core's durable state (proposals keyed by
//! non-contiguous zxids, truncations, its hard state, snapshots) on a [`Disk`].
//!
//! It shares the record framing (`record`), the snapshot files (`snapfile`, named by zxid
//! with term 0), the [`WalOptions`] and [`WalError`] of the Raft [`crate::Wal`], and follows
//! the same rules: one write and one sync per batch (group commit); segments
//! `<seq:016x>.zwal` that each start with the current snapshot marker and hard state; a
//! torn tail in the last segment is cut, damage elsewhere is corruption. What differs is the
//! log's shape: a `TruncateAfter` record drops stored proposals after a zxid (Zab's TRUNC),
//! and a `Proposals` record replaces stored proposals from its first zxid on.

use std::sync::Arc;

use coordbench_zab::{HardState, PersistedState, Proposal, Snapshot, Zxid};
use serde::{Deserialize, Serialize};

use crate::disk::{Disk, DiskFile};
use crate::record;
use crate::snapfile;
use crate::wal::{WalError, WalOptions};

/// One durable fact of the Zab log (decoding side).
#[derive(Debug, Deserialize)]
enum ZabRecord {
    Proposals(Vec<Proposal>),
    TruncateAfter(Zxid),
    HardState(HardState),
    Snapshot { zxid: Zxid, install: bool },
}

/// The borrowed twin of [`ZabRecord`] (same variants, same order: same encoding).
#[derive(Debug, Serialize)]
enum ZabRecordRef<'a> {
    Proposals(&'a [Proposal]),
    TruncateAfter(Zxid),
    HardState(&'a HardState),
    Snapshot { zxid: Zxid, install: bool },
}

fn io_err(file: &str) -> impl FnOnce(std::io::Error) -> WalError + '_ {
    move |source| WalError::Io {
        file: file.to_string(),
        source,
    }
}

fn enc(buf: &mut Vec<u8>, r: &ZabRecordRef<'_>) -> Result<(), WalError> {
    record::encode(buf, r).map_err(|e| WalError::Encode(e.to_string()))
}

fn segment_name(seq: u64) -> String {
    format!("{seq:016x}.zwal")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    u64::from_str_radix(name.strip_suffix(".zwal")?, 16).ok()
}

fn to_file(s: &Snapshot) -> coordbench_raft::Snapshot {
    coordbench_raft::Snapshot {
        index: s.zxid.0,
        term: 0,
        data: s.data.clone(),
    }
}

#[derive(Debug)]
struct Segment {
    seq: u64,
    name: String,
    /// Highest zxid written into it (ZERO: none).
    max_zxid: Zxid,
}

/// The log rebuilt from records during recovery.
#[derive(Default)]
struct Replay {
    entries: Vec<Proposal>,
    hard_state: HardState,
    marker: Option<Zxid>,
}

impl Replay {
    fn apply(&mut self, r: ZabRecord) -> Option<Zxid> {
        match r {
            ZabRecord::Proposals(ps) => {
                let first = ps.first()?.zxid;
                self.entries.retain(|p| p.zxid < first);
                let last = ps.last().map(|p| p.zxid);
                self.entries.extend(ps);
                last
            }
            ZabRecord::TruncateAfter(z) => {
                self.entries.retain(|p| p.zxid <= z);
                None
            }
            ZabRecord::HardState(hs) => {
                self.hard_state = hs;
                None
            }
            ZabRecord::Snapshot { zxid, install } => {
                self.marker = Some(zxid);
                if install {
                    self.entries.clear();
                } else {
                    self.entries.retain(|p| p.zxid > zxid);
                }
                None
            }
        }
    }
}

/// The Zab WAL. Blocking; the runtime calls it on a blocking thread.
pub struct ZabWal {
    disk: Arc<dyn Disk>,
    opts: WalOptions,
    segments: Vec<Segment>,
    file: Box<dyn DiskFile>,
    file_len: u64,
    dirty: bool,
    hard_state: HardState,
    snapshot: Option<Zxid>,
    broken: bool,
}

impl ZabWal {
    /// Opens the log on `disk` (creating it if empty) and returns what was durable.
    pub fn open(disk: Arc<dyn Disk>, opts: WalOptions) -> Result<(Self, PersistedState), WalError> {
        let mut segs: Vec<(u64, String)> = Vec::new();
        let mut snaps: Vec<(u64, String)> = Vec::new();
        for name in disk.list().map_err(io_err("<dir>"))? {
            if name.ends_with(".tmp") {
                disk.remove(&name).map_err(io_err(&name))?;
            } else if let Some(seq) = parse_segment_name(&name) {
                segs.push((seq, name));
            } else if let Some((z, _)) = snapfile::parse_name(&name) {
                snaps.push((z, name));
            }
        }
        segs.sort();
        snaps.sort();
        if segs.is_empty() {
            let name = segment_name(1);
            let file = disk.create(&name).map_err(io_err(&name))?;
            let seg = Segment {
                seq: 1,
                name,
                max_zxid: Zxid::ZERO,
            };
            let wal = Self::with_file(disk, opts, file, 0, vec![seg]);
            return Ok((wal, PersistedState::default()));
        }
        let mut replay = Replay::default();
        let mut segments = Vec::with_capacity(segs.len());
        let mut tail_len = 0u64;
        let count = segs.len();
        for (k, (seq, name)) in segs.into_iter().enumerate() {
            let bytes = disk.read(&name).map_err(io_err(&name))?;
            let scan = record::scan::<ZabRecord>(&bytes);
            let mut max_zxid = Zxid::ZERO;
            for r in scan.records {
                if let Some(last) = replay.apply(r) {
                    max_zxid = max_zxid.max(last);
                }
            }
            if let Some(why) = scan.torn {
                if k + 1 < count {
                    return Err(WalError::Corrupt(format!(
                        "segment {name} damaged at byte {} ({why}) but later segments exist",
                        scan.valid_len
                    )));
                }
                tracing::warn!(segment = %name, at = scan.valid_len, why, "cutting torn WAL tail");
                disk.truncate(&name, scan.valid_len as u64)
                    .map_err(io_err(&name))?;
            }
            tail_len = scan.valid_len as u64;
            segments.push(Segment {
                seq,
                name,
                max_zxid,
            });
        }
        // The snapshot is the one the durable marker names: a newer file whose marker did
        // not become durable is ignored (the log before it is still complete).
        let snapshot = match replay.marker {
            None => None,
            Some(z) => {
                let (_, name) = snaps.iter().find(|(i, _)| *i == z.0).ok_or_else(|| {
                    WalError::Corrupt(format!("log refers to a missing snapshot at {z}"))
                })?;
                let bytes = disk.read(name).map_err(io_err(name))?;
                let s = snapfile::decode(&bytes)
                    .map_err(|why| WalError::Corrupt(format!("snapshot {name}: {why}")))?;
                Some(Snapshot {
                    zxid: Zxid(s.index),
                    data: s.data,
                })
            }
        };
        let mut hard_state = replay.hard_state;
        // The commit point never refers past the durable history.
        let last = replay
            .entries
            .last()
            .map(|p| p.zxid)
            .or(replay.marker)
            .unwrap_or(Zxid::ZERO);
        hard_state.commit = hard_state.commit.min(last);
        let current = segments
            .last()
            .map(|s| s.name.clone())
            .ok_or_else(|| WalError::Corrupt("no segment".to_string()))?;
        let file = disk.open_append(&current).map_err(io_err(&current))?;
        let mut wal = Self::with_file(disk, opts, file, tail_len, segments);
        wal.hard_state = hard_state.clone();
        wal.snapshot = replay.marker;
        let state = PersistedState {
            hard_state,
            snapshot,
            entries: replay.entries,
        };
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
            broken: false,
        }
    }

    /// Writes a truncation, proposals and the hard state, in that order, as one write.
    /// Not durable until [`ZabWal::sync`].
    pub fn append(
        &mut self,
        truncate_after: Option<Zxid>,
        entries: &[Proposal],
        hard_state: Option<&HardState>,
    ) -> Result<(), WalError> {
        if self.broken {
            return Err(WalError::Broken);
        }
        if truncate_after.is_none() && entries.is_empty() && hard_state.is_none() {
            return Ok(());
        }
        self.maybe_roll()?;
        let mut buf = Vec::new();
        if let Some(z) = truncate_after {
            enc(&mut buf, &ZabRecordRef::TruncateAfter(z))?;
        }
        let mut start = 0;
        let mut size = 0;
        for (k, p) in entries.iter().enumerate() {
            size += p.data.len() + 16;
            if size >= self.opts.record_bytes {
                enc(&mut buf, &ZabRecordRef::Proposals(&entries[start..=k]))?;
                start = k + 1;
                size = 0;
            }
        }
        if start < entries.len() {
            enc(&mut buf, &ZabRecordRef::Proposals(&entries[start..]))?;
        }
        // After the history it refers to (a torn batch loses the hard state first).
        if let Some(hs) = hard_state {
            enc(&mut buf, &ZabRecordRef::HardState(hs))?;
        }
        self.write(&buf)?;
        if let (Some(last), Some(seg)) = (entries.last(), self.segments.last_mut()) {
            seg.max_zxid = seg.max_zxid.max(last.zxid);
        }
        if let Some(hs) = hard_state {
            self.hard_state = hs.clone();
        }
        Ok(())
    }

    /// Makes everything written so far durable.
    pub fn sync(&mut self) -> Result<(), WalError> {
        if self.broken {
            return Err(WalError::Broken);
        }
        if !self.dirty {
            return Ok(());
        }
        if let Err(e) = self.file.sync() {
            self.broken = true;
            let name = self.current_name().to_string();
            return Err(io_err(&name)(e));
        }
        self.dirty = false;
        Ok(())
    }

    /// Stores `snap` durably; `install`: it replaces the whole history (SNAP from a
    /// leader), otherwise it covers a prefix (compaction). Removes what it made obsolete.
    pub fn save_snapshot(&mut self, snap: &Snapshot, install: bool) -> Result<(), WalError> {
        if self.broken {
            return Err(WalError::Broken);
        }
        if !install && self.snapshot.is_some_and(|z| z >= snap.zxid) {
            return Ok(());
        }
        let file = snapfile::write(self.disk.as_ref(), &to_file(snap))
            .map_err(io_err(&snapfile::name(snap.zxid.0, 0)))?;
        let mut buf = Vec::new();
        enc(
            &mut buf,
            &ZabRecordRef::Snapshot {
                zxid: snap.zxid,
                install,
            },
        )?;
        self.write(&buf)?;
        self.sync()?;
        self.snapshot = Some(snap.zxid);
        let current = self.segments.len().saturating_sub(1);
        let obsolete = self.segments[..current]
            .iter()
            .take_while(|s| install || s.max_zxid <= snap.zxid)
            .count();
        for seg in self.segments.drain(..obsolete) {
            self.disk.remove(&seg.name).map_err(io_err(&seg.name))?;
        }
        for name in self.disk.list().map_err(io_err("<dir>"))? {
            if let Some((z, _)) = snapfile::parse_name(&name) {
                if z < snap.zxid.0 || (z == snap.zxid.0 && name != file) {
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
            let name = self.current_name().to_string();
            return Err(io_err(&name)(e));
        }
        self.file_len += bytes.len() as u64;
        self.dirty = true;
        Ok(())
    }

    /// Starts a new segment once the current one is full; its head repeats the snapshot
    /// marker and hard state so it replays on its own.
    fn maybe_roll(&mut self) -> Result<(), WalError> {
        if self.file_len < self.opts.segment_bytes {
            return Ok(());
        }
        self.sync()?;
        let seq = self.segments.last().map_or(1, |s| s.seq + 1);
        let name = segment_name(seq);
        self.file = self.disk.create(&name).map_err(io_err(&name))?;
        self.file_len = 0;
        self.segments.push(Segment {
            seq,
            name,
            max_zxid: Zxid::ZERO,
        });
        let mut head = Vec::new();
        if let Some(zxid) = self.snapshot {
            enc(
                &mut head,
                &ZabRecordRef::Snapshot {
                    zxid,
                    install: false,
                },
            )?;
        }
        let hs = self.hard_state.clone();
        enc(&mut head, &ZabRecordRef::HardState(&hs))?;
        self.write(&head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::MemDisk;

    fn p(epoch: u32, c: u32) -> Proposal {
        Proposal {
            zxid: Zxid::new(epoch, c),
            data: vec![c as u8; 10],
        }
    }

    #[test]
    fn replays_appends_truncations_snapshots_and_rolls() -> Result<(), WalError> {
        let disk: Arc<dyn Disk> = Arc::new(MemDisk::new());
        let opts = WalOptions {
            segment_bytes: 200,
            record_bytes: 64,
        };
        let (mut wal, st) = ZabWal::open(disk.clone(), opts)?;
        assert_eq!(st, PersistedState::default());
        let hs = HardState {
            accepted_epoch: 1,
            current_epoch: 1,
            commit: Zxid::new(1, 2),
            round: 3,
        };
        wal.append(None, &[p(1, 1), p(1, 2), p(1, 3), p(1, 4)], Some(&hs))?;
        wal.append(Some(Zxid::new(1, 2)), &[p(2, 1)], None)?;
        for c in 2..20 {
            wal.append(None, &[p(2, c)], None)?;
        }
        wal.sync()?;
        let snap = Snapshot {
            zxid: Zxid::new(2, 10),
            data: b"state".to_vec(),
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
