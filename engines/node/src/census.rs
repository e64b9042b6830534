//! What a member's WAL directory holds when it starts: how many log segments and snapshot
//! files, anything else, and their bytes. Logged with the start-up's `recovered` line, so
//! that files accumulating across restarts show beside the time the start took.
//!
//! Files are told apart by the WAL's own names (`wal`: segments `<seq:016x>.<ext>`,
//! `snapfile`: `snap-<index>-<term>.snap`). Only the [`Disk`]'s files are counted: a
//! subdirectory (the raft member's value log, `values/`) is not.

use crate::disk::Disk;
use crate::snapfile;
use crate::wal::{io_err, LogFormat, Wal, WalError};

/// Counts of the files in a WAL's directory, and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataCensus {
    /// Log segments of this format.
    pub segments: u64,
    /// Snapshot files (any name `snapfile` parses, readable or not).
    pub snapshots: u64,
    /// Every other file: leftover `.tmp` files of an interrupted atomic write, another
    /// format's segments, strangers.
    pub others: u64,
    /// The bytes of all of them.
    pub bytes: u64,
}

/// Counts the files on `disk` as the WAL of format `F` names them. A file that vanishes
/// between the listing and its size is skipped (nothing else should write the directory
/// while a member starts, but a census must not fail a start).
pub fn census<F: LogFormat>(disk: &dyn Disk) -> Result<DataCensus, WalError> {
    let mut c = DataCensus::default();
    for name in disk.list().map_err(io_err("<dir>"))? {
        let bytes = match disk.size(&name) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err(&name)(e)),
        };
        c.bytes += bytes;
        if Wal::<F>::parse_segment_name(&name).is_some() {
            c.segments += 1;
        } else if snapfile::parse_name(&name).is_some() {
            c.snapshots += 1;
        } else {
            c.others += 1;
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::disk::{DiskKind, FileDisk};
    use crate::raft_node::{RaftFormat, RaftWal};
    use crate::wal::{Snapshot, WalOptions};
    use crate::zab_node::ZabFormat;
    use coordbench_raft::{Entry, EntryKind};

    fn entries(lo: u64, hi: u64) -> Vec<Entry> {
        (lo..=hi)
            .map(|index| Entry {
                term: 1,
                index,
                kind: EntryKind::Normal(vec![7; 40]),
            })
            .collect()
    }

    #[test]
    fn counts_segments_snapshots_and_strays_on_a_real_directory(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let disk = Arc::new(FileDisk::open(dir.path(), DiskKind::NoFsync)?);
        assert_eq!(census::<RaftFormat>(disk.as_ref())?, DataCensus::default());

        let opts = WalOptions {
            segment_bytes: 300,
            record_bytes: 100,
        };
        let (mut wal, _) = RaftWal::open(disk.clone(), opts)?;
        for k in 0..10 {
            wal.append(None, &entries(k * 3 + 1, k * 3 + 3), None)?;
        }
        wal.sync()?;
        let snap = Snapshot {
            index: 3,
            term: 1,
            data: vec![1; 500].into(),
        };
        wal.save_snapshot(&snap, false)?;
        drop(wal);
        std::fs::write(dir.path().join("x.tmp"), b"torn")?;
        // A subdirectory (raft's value log) is not the WAL's.
        std::fs::create_dir(dir.path().join("values"))?;
        std::fs::write(dir.path().join("values").join("v1"), [0; 1000])?;

        let c = census::<RaftFormat>(disk.as_ref())?;
        let names = disk.list()?;
        let segments = names.iter().filter(|n| n.ends_with(".wal")).count() as u64;
        assert!(segments > 1, "small segments roll over: {names:?}");
        let mut on_disk = 0;
        for n in &names {
            on_disk += std::fs::metadata(dir.path().join(n))?.len();
        }
        let want = DataCensus {
            segments,
            snapshots: 1,
            others: 1,
            bytes: on_disk,
        };
        assert_eq!(c, want);
        assert!(c.bytes > 500 + 4, "the snapshot's data and the stray count");

        // Zab's segments are named `.zwal`: raft's are strangers to it.
        let z = census::<ZabFormat>(disk.as_ref())?;
        assert_eq!((z.segments, z.snapshots, z.others), (0, 1, segments + 1));
        Ok(())
    }
}
