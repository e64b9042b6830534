//! The WAL's record framing: `[len: u32 LE][crc32(payload): u32 LE][payload]`, where the
//! payload is a postcard-encoded [`Record`]. Scanning stops at the first record that is cut
//! short, fails its checksum or does not decode: everything before it is intact.
//!
//! A record is generic over the core's entry type `E` and hard state `H` (see
//! [`crate::wal::LogFormat`]); the Raft and the Zab WAL write the same kinds of records.

use serde::{Deserialize, Serialize};

/// Bytes of framing before each payload.
pub(crate) const HEADER: usize = 8;
/// A length above this is garbage (a torn or zeroed header), not a record.
pub(crate) const MAX_RECORD: usize = 256 << 20;

/// One durable fact of the log.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) enum Record<E, H> {
    /// Stores entries, first deleting every stored entry at or after the first one's
    /// position (the core's replay rule, [`crate::wal::LogFormat::replay_entries`]).
    Entries(Vec<E>),
    HardState(H),
    /// The snapshot file for (`index`, `term`) is durable. `install`: it replaced the whole
    /// log (received from the leader); otherwise entries up to `index` are obsolete.
    Snapshot {
        index: u64,
        term: u64,
        install: bool,
    },
    /// Deletes every stored entry after `index` (Zab's TRUNC; Raft truncates by overwriting).
    TruncateAfter(u64),
}

/// The borrowed twin of [`Record`] used for writing (same variants in the same order, so the
/// same encoding) so appending never clones entries.
#[derive(Debug, Serialize)]
pub(crate) enum RecordRef<'a, E, H> {
    Entries(&'a [E]),
    HardState(&'a H),
    Snapshot {
        index: u64,
        term: u64,
        install: bool,
    },
    TruncateAfter(u64),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum EncodeError {
    #[error("record of {0} bytes exceeds the maximum of {MAX_RECORD}")]
    TooLarge(usize),
    #[error("encoding a record: {0}")]
    Postcard(#[from] postcard::Error),
}

/// Appends one framed record to `buf`.
pub(crate) fn encode<R: Serialize + ?Sized>(
    buf: &mut Vec<u8>,
    record: &R,
) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; HEADER]);
    let mut out = std::mem::take(buf);
    out = postcard::to_extend(record, out)?;
    *buf = out;
    let len = buf.len() - start - HEADER;
    if len > MAX_RECORD {
        buf.truncate(start);
        return Err(EncodeError::TooLarge(len));
    }
    let crc = crc32fast::hash(&buf[start + HEADER..]);
    buf[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    buf[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// The records of one segment, in order.
#[derive(Debug)]
pub(crate) struct Scan<R> {
    pub records: Vec<R>,
    /// Length of the intact prefix.
    pub valid_len: usize,
    /// Why scanning stopped before the end, if it did.
    pub torn: Option<&'static str>,
}

/// Decodes records from `bytes` up to the first damaged one.
pub(crate) fn scan<R: serde::de::DeserializeOwned>(bytes: &[u8]) -> Scan<R> {
    let mut s = Scan {
        records: Vec::new(),
        valid_len: 0,
        torn: None,
    };
    let mut pos = 0;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < HEADER {
            s.torn = Some("truncated header");
            break;
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len > MAX_RECORD {
            s.torn = Some("implausible length");
            break;
        }
        let Some(payload) = rest.get(HEADER..HEADER + len) else {
            s.torn = Some("truncated payload");
            break;
        };
        if crc32fast::hash(payload) != crc {
            s.torn = Some("checksum mismatch");
            break;
        }
        match postcard::from_bytes::<R>(payload) {
            Ok(r) => s.records.push(r),
            Err(_) => {
                s.torn = Some("undecodable record");
                break;
            }
        }
        pos += HEADER + len;
        s.valid_len = pos;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_raft::{Entry, EntryKind, HardState};

    type Rec = Record<Entry, HardState>;
    type Ref<'a> = RecordRef<'a, Entry, HardState>;

    fn ent(index: u64) -> Entry {
        Entry {
            term: 1,
            index,
            kind: EntryKind::Normal(vec![index as u8; 3]),
        }
    }

    #[test]
    fn round_trip_and_torn_tail() -> Result<(), EncodeError> {
        let ents = vec![ent(1), ent(2)];
        let hs = HardState {
            term: 2,
            vote: Some(1),
            commit: 1,
        };
        let mut buf = Vec::new();
        encode(&mut buf, &Ref::Entries(&ents))?;
        encode(&mut buf, &Ref::HardState(&hs))?;
        let first_two = buf.len();
        encode(
            &mut buf,
            &Ref::Snapshot {
                index: 2,
                term: 1,
                install: true,
            },
        )?;
        let s: Scan<Rec> = scan(&buf);
        assert_eq!(s.torn, None);
        assert_eq!(s.valid_len, buf.len());
        assert_eq!(
            s.records,
            vec![
                Rec::Entries(ents.clone()),
                Rec::HardState(hs.clone()),
                Rec::Snapshot {
                    index: 2,
                    term: 1,
                    install: true
                }
            ]
        );
        // Every cut inside the last record leaves exactly the first two.
        for cut in first_two + 1..buf.len() {
            let s: Scan<Rec> = scan(&buf[..cut]);
            assert_eq!(s.records.len(), 2, "cut at {cut}");
            assert_eq!(s.valid_len, first_two);
            assert!(s.torn.is_some());
        }
        // A flipped bit is caught by the checksum.
        let mut bad = buf.clone();
        bad[first_two + HEADER] ^= 1;
        assert_eq!(scan::<Rec>(&bad).torn, Some("checksum mismatch"));
        // Zeroed space (preallocated or never written) is not a record.
        let mut zeros = buf.clone();
        zeros.extend_from_slice(&[0u8; 64]);
        assert_eq!(scan::<Rec>(&zeros).records.len(), 3);
        Ok(())
    }
}
