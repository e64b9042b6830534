//! One key's write history, packed: 24 bytes per revision instead of a full entry.
//!
//! The history is most of the engine's memory under a write load: etcd keeps its history
//! until compaction (off by default), and so do we, so a member holds one entry per
//! revision ever written. A wide [`Entry`] is 56 bytes (revision, value slot, create
//! revision, version, lease); here each write keeps only what changes from one write to
//! the next — its revision `(main, sub)` and its value's place in the value log — and the
//! rest is derived from a short list of [`Mark`]s:
//!
//! - within a *generation* (a key's puts from its creation to its deletion) the create
//!   revision is fixed and the version goes up by one per put, as `Mvcc::put` makes them;
//! - a put's lease usually equals the previous put's.
//!
//! A mark starts at an entry where that derivation breaks (a new generation, a lease that
//! changed, or any put a snapshot brings whose fields do not follow): it states the
//! entry's create revision, version and lease outright. A key written N times with one
//! lease has one mark; a lock key (put, then delete) has one.
//!
//! Entries are kept in chunks of [`CHUNK`] ([`Packs`]): a history grows without doubling
//! its whole buffer, so at most half a chunk per key is slack (with one `Vec` per key,
//! keys written at the same rate all doubled at once, nearly twice the memory at times).
//!
//! Callers see wide [`Entry`] values (`get`, `iter`); serde reads and writes a history
//! as the sequence of its wide entries, so snapshot formats do not depend on the packing.

use serde::de::Error as _;
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smallvec::SmallVec;

use crate::mvcc::{Entry, Revision, Stored};
use crate::values::Slot;

/// A tombstone's `len` (no value length reaches it: values are at most 16 MiB).
const TOMBSTONE: u32 = u32::MAX;

/// Entries per chunk: a power of two, so a chunk's `Vec`, grown by doubling, ends full.
const CHUNK: usize = 256;

/// One write: a put (`len` < [`TOMBSTONE`]) or a tombstone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packed {
    main: i64,
    offset: u64,
    len: u32,
    sub: u32,
}

/// The fields of the put at `start` stated outright; later puts derive theirs from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    start: usize,
    create_revision: i64,
    version: i64,
    lease: i64,
}

/// Packed entries in chunks: every chunk but the last holds exactly [`CHUNK`] entries, so
/// entry `i` is at `(i / CHUNK, i % CHUNK)`. Most keys fit one chunk, kept inline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Packs {
    chunks: SmallVec<[Vec<Packed>; 1]>,
    len: usize,
}

impl Packs {
    fn get(&self, i: usize) -> Option<Packed> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK).copied()
    }

    fn push(&mut self, p: Packed) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(p),
            _ => self.chunks.push(vec![p]),
        }
        self.len += 1;
    }

    fn pop(&mut self) {
        if let Some(chunk) = self.chunks.last_mut() {
            if chunk.pop().is_some() {
                self.len -= 1;
            }
            if chunk.is_empty() {
                self.chunks.pop();
            }
        }
    }

    /// The number of leading entries satisfying `pred` (which holds for a prefix).
    fn partition_point(&self, pred: impl Fn(&Packed) -> bool) -> usize {
        let whole = self.chunks.partition_point(|c| c.last().is_some_and(&pred));
        match self.chunks.get(whole) {
            Some(c) => whole * CHUNK + c.partition_point(&pred),
            None => self.len,
        }
    }

    fn iter(&self) -> impl Iterator<Item = Packed> + '_ {
        self.chunks.iter().flatten().copied()
    }

    /// Drops the `n` oldest entries, re-chunking the rest (compaction: rare).
    fn drop_front(&mut self, n: usize) {
        let kept: Vec<Packed> = self.iter().skip(n).collect();
        *self = Packs::default();
        for p in kept {
            self.push(p);
        }
    }
}

/// A key's writes in revision order (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct History {
    entries: Packs,
    /// Ascending by `start`; every put lies at or after the first mark.
    marks: Vec<Mark>,
}

impl History {
    pub fn len(&self) -> usize {
        self.entries.len
    }

    pub fn is_empty(&self) -> bool {
        self.entries.len == 0
    }

    /// Entries whose revision is at most `at`.
    pub fn count_at_or_below(&self, at: i64) -> usize {
        self.entries.partition_point(|e| e.main <= at)
    }

    /// Entries whose revision is below `main`.
    pub fn count_below(&self, main: i64) -> usize {
        self.entries.partition_point(|e| e.main < main)
    }

    pub fn get(&self, i: usize) -> Option<Entry> {
        Some(self.unpack(i, self.entries.get(i)?))
    }

    /// The wide form of entry `i`, `p`.
    fn unpack(&self, i: usize, p: Packed) -> Entry {
        let rev = Revision {
            main: p.main,
            sub: i64::from(p.sub),
        };
        if p.len == TOMBSTONE {
            return Entry { rev, put: None };
        }
        // Every put lies at or after the first mark (push makes one for the first put of a
        // generation), so a mark is always found.
        let covering = self.marks.partition_point(|m| m.start <= i);
        let mark = covering
            .checked_sub(1)
            .and_then(|m| self.marks.get(m))
            .copied()
            .unwrap_or(Mark {
                start: i,
                create_revision: 0,
                version: 0,
                lease: 0,
            });
        let since = i64::try_from(i - mark.start).unwrap_or(i64::MAX);
        Entry {
            rev,
            put: Some(Stored {
                value: Slot::new(p.offset, p.len as usize),
                create_revision: mark.create_revision,
                version: mark.version.saturating_add(since),
                lease: mark.lease,
            }),
        }
    }

    pub fn last(&self) -> Option<Entry> {
        self.get(self.len().checked_sub(1)?)
    }

    /// Every entry, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = Entry> + '_ {
        (self.entries.iter().enumerate()).map(|(i, p)| self.unpack(i, p))
    }

    /// Appends a write. Its sub-revision must fit 32 bits (a revision holds far fewer writes
    /// than that; decoded snapshots are refused before they get here).
    pub fn push(&mut self, entry: Entry) {
        let sub = u32::try_from(entry.rev.sub).unwrap_or(u32::MAX);
        let Some(put) = entry.put else {
            self.entries.push(Packed {
                main: entry.rev.main,
                offset: 0,
                len: TOMBSTONE,
                sub,
            });
            return;
        };
        let follows = self.last().and_then(|e| e.put).is_some_and(|prev| {
            (
                prev.create_revision,
                prev.version.saturating_add(1),
                prev.lease,
            ) == (put.create_revision, put.version, put.lease)
        });
        if !follows {
            self.marks.push(Mark {
                start: self.len(),
                create_revision: put.create_revision,
                version: put.version,
                lease: put.lease,
            });
        }
        self.entries.push(Packed {
            main: entry.rev.main,
            offset: put.value.offset,
            // Slot lengths are at most MAX_VALUE_LEN, far below TOMBSTONE.
            len: u32::try_from(put.value.len()).unwrap_or(TOMBSTONE - 1),
            sub,
        });
    }

    /// Drops the newest entry.
    pub fn pop(&mut self) {
        self.entries.pop();
        let len = self.len();
        while self.marks.last().is_some_and(|m| m.start >= len) {
            self.marks.pop();
        }
    }

    /// Drops the `n` oldest entries (compaction).
    pub fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len());
        // The mark covering entry n (if any) moves to n and keeps describing it.
        let covering = self.marks.partition_point(|m| m.start <= n);
        if let Some(first_kept) = covering.checked_sub(1) {
            let m = &mut self.marks[first_kept];
            let skipped = i64::try_from(n - m.start).unwrap_or(i64::MAX);
            m.version = m.version.saturating_add(skipped);
            m.start = n;
            self.marks.drain(..first_kept);
        }
        self.entries.drop_front(n);
        for m in &mut self.marks {
            m.start -= n;
        }
    }
}

impl Serialize for History {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for entry in self.iter() {
            seq.serialize_element(&entry)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wide = Vec::<Entry>::deserialize(d)?;
        let mut history = History::default();
        for entry in wide {
            if u32::try_from(entry.rev.sub).is_err() {
                return Err(D::Error::custom(format!(
                    "sub-revision {} out of range",
                    entry.rev.sub
                )));
            }
            history.push(entry);
        }
        Ok(history)
    }
}

impl FromIterator<Entry> for History {
    fn from_iter<I: IntoIterator<Item = Entry>>(entries: I) -> Self {
        let mut history = History::default();
        for entry in entries {
            history.push(entry);
        }
        history
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(main: i64, create_revision: i64, version: i64, lease: i64) -> Entry {
        Entry {
            rev: Revision { main, sub: 0 },
            put: Some(Stored {
                value: Slot::new(main as u64 * 10, 3),
                create_revision,
                version,
                lease,
            }),
        }
    }

    fn tombstone(main: i64) -> Entry {
        Entry {
            rev: Revision { main, sub: 1 },
            put: None,
        }
    }

    fn sample() -> Vec<Entry> {
        vec![
            put(2, 2, 1, 0),
            put(3, 2, 2, 0),
            put(4, 2, 3, 7),
            tombstone(5),
            put(6, 6, 1, 7),
            put(7, 6, 2, 7),
            // Not derivable: a snapshot may carry any checked fields.
            put(8, 3, 9, 7),
        ]
    }

    #[test]
    fn entries_round_trip_through_the_packing() {
        let wide = sample();
        let h: History = wide.iter().copied().collect();
        assert_eq!(h.iter().collect::<Vec<_>>(), wide);
        assert_eq!(
            h.marks.len(),
            4,
            "first put, lease change, new generation, odd put"
        );
        assert_eq!((h.count_at_or_below(4), h.count_below(4)), (3, 2));
        assert_eq!(std::mem::size_of::<Packed>(), 24);
    }

    #[test]
    fn pop_and_drop_front_keep_the_rest_exact() {
        let wide = sample();
        for n in 0..=wide.len() {
            let mut h: History = wide.iter().copied().collect();
            h.drop_front(n);
            assert_eq!(h.iter().collect::<Vec<_>>(), wide[n..], "drop_front({n})");
            let mut h: History = wide.iter().copied().collect();
            for _ in 0..n {
                h.pop();
            }
            assert_eq!(
                h.iter().collect::<Vec<_>>(),
                wide[..wide.len() - n],
                "pop x{n}"
            );
            h.push(put(100, 100, 1, 0));
            assert_eq!(h.last(), Some(put(100, 100, 1, 0)));
        }
    }

    #[test]
    fn long_histories_span_chunks() {
        let n = 3 * CHUNK + 17;
        let wide: Vec<Entry> = (0..n as i64)
            .map(|i| put(10 + 2 * i, 10, i + 1, 0))
            .collect();
        let mut h: History = wide.iter().copied().collect();
        assert_eq!((h.len(), h.entries.chunks.len(), h.marks.len()), (n, 4, 1));
        assert!(h.entries.chunks[..3].iter().all(|c| c.len() == CHUNK));
        for i in [0, CHUNK - 1, CHUNK, 2 * CHUNK + 5, n - 1] {
            assert_eq!(h.get(i), Some(wide[i]));
            let main = wide[i].rev.main;
            assert_eq!((h.count_below(main), h.count_at_or_below(main)), (i, i + 1));
        }
        assert_eq!(h.count_at_or_below(i64::MAX), n);
        h.drop_front(CHUNK + 3);
        assert_eq!(h.iter().collect::<Vec<_>>(), wide[CHUNK + 3..]);
        while h.len() > CHUNK - 1 {
            h.pop();
        }
        assert_eq!(h.entries.chunks.len(), 1);
        assert_eq!(h.last(), Some(wide[2 * CHUNK + 1]));
    }

    #[test]
    fn serde_sees_the_wide_entries() {
        let wide = sample();
        let h: History = wide.iter().copied().collect();
        let bytes = postcard::to_allocvec(&h).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&wide).unwrap());
        let back: History = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, h);
        let mut bad = wide;
        bad[0].rev.sub = i64::from(u32::MAX) + 1;
        let bytes = postcard::to_allocvec(&bad).unwrap();
        assert!(postcard::from_bytes::<History>(&bytes).is_err());
    }
}
