//! Snapshot files: one per snapshot, named after its index and term, holding
//! `["CBSN"][index u64][term u64][len u64][crc32 u32][state machine bytes]` (little endian;
//! the checksum covers index, term and data). Written atomically through the [`Disk`].
//! Both cores' snapshots are stored this way (a Zab snapshot's index is its zxid, its
//! term 0).

use bytes::Bytes;

use crate::disk::Disk;
use crate::wal::Snapshot;

const MAGIC: &[u8; 4] = b"CBSN";
const HEADER: usize = 4 + 8 + 8 + 8 + 4;

/// The file name of the snapshot at (`index`, `term`); names sort by index.
pub(crate) fn name(index: u64, term: u64) -> String {
    format!("snap-{index:016x}-{term:016x}.snap")
}

/// The (index, term) a snapshot file name stands for.
pub(crate) fn parse_name(name: &str) -> Option<(u64, u64)> {
    let core = name.strip_prefix("snap-")?.strip_suffix(".snap")?;
    let (i, t) = core.split_once('-')?;
    Some((
        u64::from_str_radix(i, 16).ok()?,
        u64::from_str_radix(t, 16).ok()?,
    ))
}

fn checksum(index: u64, term: u64, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&index.to_le_bytes());
    h.update(&term.to_le_bytes());
    h.update(data);
    h.finalize()
}

/// Writes the snapshot durably; returns the file name.
pub(crate) fn write(disk: &dyn Disk, snap: &Snapshot) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(HEADER);
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&snap.index.to_le_bytes());
    buf.extend_from_slice(&snap.term.to_le_bytes());
    buf.extend_from_slice(&(snap.data.len() as u64).to_le_bytes());
    buf.extend_from_slice(&checksum(snap.index, snap.term, &snap.data).to_le_bytes());
    let name = name(snap.index, snap.term);
    disk.write_atomic(&name, &[&buf, &snap.data])?;
    Ok(name)
}

/// The data of the snapshot file at (`index`, `term`) mapped from disk, if the disk maps
/// files and the file's header names that snapshot with `len` bytes of data. The data's
/// checksum is not verified here: that would read (and so bring into memory) every page;
/// use it only for a file this member has just written and synced.
pub(crate) fn map(
    disk: &dyn Disk,
    index: u64,
    term: u64,
    len: usize,
) -> std::io::Result<Option<Bytes>> {
    let Some(file) = disk.map(&name(index, term))? else {
        return Ok(None);
    };
    let header_ok = file.len() == HEADER + len
        && file[..4] == MAGIC[..]
        && file[4..12] == index.to_le_bytes()
        && file[12..20] == term.to_le_bytes()
        && file[20..28] == (len as u64).to_le_bytes();
    Ok(header_ok.then(|| file.slice(HEADER..)))
}

/// Decodes a snapshot file, or says why it is unusable.
pub(crate) fn decode(bytes: &[u8]) -> Result<Snapshot, &'static str> {
    if bytes.len() < HEADER || &bytes[..4] != MAGIC {
        return Err("not a snapshot file");
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let (index, term, len) = (u64_at(4), u64_at(12), u64_at(20));
    let mut c = [0u8; 4];
    c.copy_from_slice(&bytes[28..32]);
    let crc = u32::from_le_bytes(c);
    let data = &bytes[HEADER..];
    if data.len() as u64 != len {
        return Err("length mismatch");
    }
    if checksum(index, term, data) != crc {
        return Err("checksum mismatch");
    }
    Ok(Snapshot {
        index,
        term,
        data: Bytes::copy_from_slice(data),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::MemDisk;

    #[test]
    fn round_trip_and_corruption() -> std::io::Result<()> {
        let d = MemDisk::new();
        let s = Snapshot {
            index: 42,
            term: 7,
            data: Bytes::from_static(b"state"),
        };
        let n = write(&d, &s)?;
        assert_eq!(parse_name(&n), Some((42, 7)));
        let mut bytes = d.read(&n)?;
        assert_eq!(decode(&bytes), Ok(s));
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(decode(&bytes), Err("checksum mismatch"));
        assert_eq!(parse_name("0001.wal"), None);
        Ok(())
    }

    #[test]
    fn maps_a_written_file_and_only_that_snapshot() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = crate::disk::FileDisk::open(dir.path(), crate::disk::DiskKind::NoFsync)?;
        let s = Snapshot {
            index: 42,
            term: 7,
            data: Bytes::from(vec![9u8; 10_000]),
        };
        write(&d, &s)?;
        let mapped = map(&d, 42, 7, s.data.len())?.expect("a file disk maps files");
        assert_eq!(mapped, s.data);
        assert_ne!(mapped.as_ptr(), s.data.as_ptr(), "read from the file");
        assert_eq!(map(&d, 42, 7, 9_999)?, None, "length differs");
        assert!(map(&d, 43, 7, s.data.len()).is_err(), "no such file");
        let mem = MemDisk::new();
        write(&mem, &s)?;
        assert_eq!(
            map(&mem, 42, 7, s.data.len())?,
            None,
            "memory disks do not map"
        );
        Ok(())
    }
}
