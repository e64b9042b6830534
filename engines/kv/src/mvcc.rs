//! Multi-version key history: etcd's revisioned key space.
//!
//! Each key keeps the list of its writes in revision order: puts (value,
//! create revision, version, lease) and tombstones. A revision is
//! `(main, sub)`: `main` is the store revision, bumped once per write-bearing
//! command; `sub` orders the writes within it (a txn's ops, a lease
//! revoke's deletions). The store revision starts at 1, so the first write
//! makes revision 2, as in etcd.
//!
//! A write happens inside a [`WriteCtx`]: its entries are appended at
//! `main = revision + 1` right away (so later ops of the same txn read them),
//! then either committed (the revision becomes `main` if anything was
//! written) or rolled back by popping exactly those entries.
//!
//! Compaction at `c` keeps every entry with `main >= c` plus, per key, the
//! newest older entry when it is a put: enough to read at any revision
//! `>= c` and to give every event at `>= c` its `prev_kv`. (etcd also drops
//! a tombstone at exactly `c`; keeping it lets a watch restarted at the
//! compact revision, as etcd clients do, see that delete.)
//!
//! Values are not kept here: each put's value is appended once to the [`ValueLog`] and the
//! history holds its [`Slot`], so the in-memory history is an index of the writes, packed
//! per key by [`History`] (24 bytes per revision).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::KvError;
use crate::history::History;
use crate::key_range::KeyRange;
use crate::types::{Event, EventKind, KeyValue};
use crate::values::{Slot, ValueLog};

/// Position of a write: store revision and order within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Revision {
    pub main: i64,
    pub sub: i64,
}

/// A put, as a key's history gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stored {
    pub value: Slot,
    pub create_revision: i64,
    pub version: i64,
    pub lease: i64,
}

/// One write to a key: a put, or a tombstone (`put == None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub rev: Revision,
    pub put: Option<Stored>,
}

impl Entry {
    pub(crate) fn to_kv(self, key: &[u8], values: &ValueLog) -> Option<KeyValue> {
        self.put.as_ref().map(|p| KeyValue {
            key: key.to_vec(),
            create_revision: p.create_revision,
            mod_revision: self.rev.main,
            version: p.version,
            value: values.read(p.value),
            lease: p.lease,
        })
    }
}

/// Reads at this "revision" see everything, including the writes of the
/// current [`WriteCtx`].
pub(crate) const LATEST: i64 = i64::MAX;

/// Writes of one revision in progress.
#[derive(Debug)]
pub(crate) struct WriteCtx {
    pub main: i64,
    /// Next sub-revision; also the number of writes so far.
    pub sub: i64,
    /// Events in write order, each with its `prev_kv`.
    pub events: Vec<Event>,
    /// Keys written, for rollback.
    pub touched: Vec<Vec<u8>>,
}

#[derive(Debug)]
pub(crate) struct Mvcc {
    pub keys: BTreeMap<Vec<u8>, History>,
    /// Current store revision.
    pub revision: i64,
    /// Oldest readable revision; 0 before any compaction.
    pub compact_revision: i64,
    /// The bytes of every value the history's slots point at.
    pub values: ValueLog,
}

impl Default for Mvcc {
    fn default() -> Self {
        Mvcc::with_values(ValueLog::default())
    }
}

/// Equal histories: the same writes with the same values, wherever the values are stored.
impl PartialEq for Mvcc {
    fn eq(&self, other: &Self) -> bool {
        let same_entry = |a: &Entry, b: &Entry| match (&a.put, &b.put) {
            (None, None) => a.rev == b.rev,
            (Some(x), Some(y)) => {
                a.rev == b.rev
                    && (x.create_revision, x.version, x.lease)
                        == (y.create_revision, y.version, y.lease)
                    && self.values.read(x.value) == other.values.read(y.value)
            }
            _ => false,
        };
        self.revision == other.revision
            && self.compact_revision == other.compact_revision
            && self.keys.len() == other.keys.len()
            && self
                .keys
                .iter()
                .zip(&other.keys)
                .all(|((ka, ha), (kb, hb))| {
                    ka == kb
                        && ha.len() == hb.len()
                        && ha.iter().zip(hb.iter()).all(|(a, b)| same_entry(&a, &b))
                })
    }
}

impl Eq for Mvcc {}

/// The entry of `hist` visible at revision `at`, if it is a put.
fn visible(hist: &History, at: i64) -> Option<Entry> {
    let e = hist.get(hist.count_at_or_below(at).checked_sub(1)?)?;
    e.put.map(|_| e)
}

impl Mvcc {
    pub fn with_values(values: ValueLog) -> Self {
        Mvcc {
            keys: BTreeMap::new(),
            revision: 1,
            compact_revision: 0,
            values,
        }
    }

    /// Checks a requested read revision the way etcd does and turns it into
    /// an `at` for the read functions (`<= 0` = current).
    pub fn read_revision(&self, rev: i64) -> Result<i64, KvError> {
        if rev > self.revision {
            return Err(KvError::FutureRevision {
                current_revision: self.revision,
            });
        }
        if rev <= 0 {
            return Ok(LATEST);
        }
        if rev < self.compact_revision {
            return Err(KvError::Compacted {
                compact_revision: self.compact_revision,
            });
        }
        Ok(rev)
    }

    pub fn get(&self, key: &[u8], at: i64) -> Option<KeyValue> {
        visible(self.keys.get(key)?, at)?.to_kv(key, &self.values)
    }

    /// Keys of `range` visible at `at`, in key order.
    pub fn range<'a>(
        &'a self,
        range: &KeyRange,
        at: i64,
    ) -> impl DoubleEndedIterator<Item = KeyValue> + 'a {
        range
            .iter(&self.keys)
            .filter_map(move |(k, hist)| visible(hist, at)?.to_kv(k, &self.values))
    }

    /// Number of keys of `range` visible at `at`.
    pub fn count(&self, range: &KeyRange, at: i64) -> usize {
        range
            .iter(&self.keys)
            .filter(|(_, hist)| visible(hist, at).is_some())
            .count()
    }

    pub fn begin(&self) -> WriteCtx {
        WriteCtx {
            main: self.revision.saturating_add(1),
            sub: 0,
            events: Vec::new(),
            touched: Vec::new(),
        }
    }

    /// Appends a put; returns the previous and the new kv.
    pub fn put(
        &mut self,
        w: &mut WriteCtx,
        key: &[u8],
        value: Vec<u8>,
        lease: i64,
    ) -> (Option<KeyValue>, KeyValue) {
        let prev = self.get(key, LATEST);
        let (create_revision, version) = match &prev {
            Some(p) => (p.create_revision, p.version.saturating_add(1)),
            None => (w.main, 1),
        };
        let rev = Revision {
            main: w.main,
            sub: w.sub,
        };
        let entry = Entry {
            rev,
            put: Some(Stored {
                value: self.values.append(&value),
                create_revision,
                version,
                lease,
            }),
        };
        let kv = KeyValue {
            key: key.to_vec(),
            create_revision,
            mod_revision: w.main,
            version,
            value,
            lease,
        };
        let event_prev = match create_revision == w.main {
            true => None,
            false => self.before_write(key, w),
        };
        self.keys.entry(key.to_vec()).or_default().push(entry);
        w.sub += 1;
        w.touched.push(key.to_vec());
        w.events.push(Event {
            kind: EventKind::Put,
            kv: kv.clone(),
            prev_kv: event_prev,
        });
        (prev, kv)
    }

    /// An event's prev_kv as etcd gives it: the key as it was before the write's revision
    /// (not as an earlier op of the same txn left it), none for a put that creates the key.
    fn before_write(&self, key: &[u8], w: &WriteCtx) -> Option<KeyValue> {
        self.get(key, w.main - 1)
    }

    /// Appends a tombstone if the key exists; returns the deleted kv.
    pub fn delete(&mut self, w: &mut WriteCtx, key: &[u8]) -> Option<KeyValue> {
        let prev = self.get(key, LATEST)?;
        let rev = Revision {
            main: w.main,
            sub: w.sub,
        };
        self.keys
            .entry(key.to_vec())
            .or_default()
            .push(Entry { rev, put: None });
        w.sub += 1;
        w.touched.push(key.to_vec());
        let kv = KeyValue {
            key: key.to_vec(),
            mod_revision: w.main,
            ..Default::default()
        };
        w.events.push(Event {
            kind: EventKind::Delete,
            kv,
            prev_kv: self.before_write(key, w),
        });
        Some(prev)
    }

    /// Makes the writes of `w` part of the store; returns its events.
    pub fn commit(&mut self, w: WriteCtx) -> Vec<Event> {
        if w.sub > 0 {
            self.revision = w.main;
        }
        w.events
    }

    /// Drops the writes of `w` to `key` (call once per touched key).
    pub fn rollback_key(&mut self, w: &WriteCtx, key: &[u8]) {
        if let Some(hist) = self.keys.get_mut(key) {
            while hist.last().is_some_and(|e| e.rev.main == w.main) {
                hist.pop();
            }
            if hist.is_empty() {
                self.keys.remove(key);
            }
        }
    }

    /// Drops history below `rev` (see the module doc). The caller checks
    /// `compact_revision < rev <= revision`.
    pub fn compact(&mut self, rev: i64) {
        self.keys.retain(|_, hist| {
            let idx = hist.count_below(rev);
            let keep_from = match idx.checked_sub(1).and_then(|i| hist.get(i)) {
                Some(e) if e.put.is_some() => idx - 1,
                _ => idx,
            };
            hist.drop_front(keep_from);
            !hist.is_empty()
        });
        self.compact_revision = rev;
    }

    /// Every event at revision `>= start` on keys of `range`, in revision
    /// order, each with its `prev_kv` (none where the revision before the event is
    /// compacted, as etcd). `start <= 0` means "from now": none.
    pub fn events_since(&self, start: i64, range: &KeyRange) -> Result<Vec<Event>, KvError> {
        if start <= 0 {
            return Ok(Vec::new());
        }
        if start < self.compact_revision {
            return Err(KvError::Compacted {
                compact_revision: self.compact_revision,
            });
        }
        let mut out: Vec<(Revision, Event)> = Vec::new();
        for (key, hist) in range.iter(&self.keys) {
            let first = hist.count_below(start);
            // The last entry seen, and the last of a revision before the current entry's.
            let mut last = first.checked_sub(1).and_then(|p| hist.get(p));
            let mut before = last;
            for e in (first..hist.len()).filter_map(|i| hist.get(i)) {
                if last.is_none_or(|l| l.rev.main < e.rev.main) {
                    before = last;
                }
                last = Some(e);
                // etcd reads an event's prev_kv at the revision before it (gone once
                // compacted), and none for a put that creates its key.
                let creates = e
                    .put
                    .as_ref()
                    .is_some_and(|p| p.create_revision == e.rev.main);
                let prev_kv = before
                    .filter(|_| !creates && e.rev.main > self.compact_revision)
                    .and_then(|p| p.to_kv(key, &self.values));
                let ev = match e.to_kv(key, &self.values) {
                    Some(kv) => Event {
                        kind: EventKind::Put,
                        kv,
                        prev_kv,
                    },
                    None => Event {
                        kind: EventKind::Delete,
                        kv: KeyValue {
                            key: key.clone(),
                            mod_revision: e.rev.main,
                            ..Default::default()
                        },
                        prev_kv,
                    },
                };
                out.push((e.rev, ev));
            }
        }
        // Revisions are unique across keys, so this order is total.
        out.sort_by_key(|(rev, _)| *rev);
        Ok(out.into_iter().map(|(_, ev)| ev).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(m: &mut Mvcc, key: &[u8], value: &[u8]) -> KeyValue {
        let mut w = m.begin();
        let (_, kv) = m.put(&mut w, key, value.to_vec(), 0);
        m.commit(w);
        kv
    }

    fn del(m: &mut Mvcc, key: &[u8]) -> Option<KeyValue> {
        let mut w = m.begin();
        let prev = m.delete(&mut w, key);
        m.commit(w);
        prev
    }

    #[test]
    fn revisions_versions_and_history() {
        let mut m = Mvcc::default();
        assert_eq!(m.revision, 1);
        let a1 = put(&mut m, b"a", b"1");
        assert_eq!((a1.create_revision, a1.mod_revision, a1.version), (2, 2, 1));
        let a2 = put(&mut m, b"a", b"2");
        assert_eq!((a2.create_revision, a2.mod_revision, a2.version), (2, 3, 2));
        assert_eq!(del(&mut m, b"a").map(|kv| kv.value), Some(b"2".to_vec()));
        assert_eq!(del(&mut m, b"a"), None);
        assert_eq!(
            m.revision, 4,
            "deleting a missing key does not bump the revision"
        );
        let a3 = put(&mut m, b"a", b"3");
        assert_eq!((a3.create_revision, a3.mod_revision, a3.version), (5, 5, 1));
        assert_eq!(m.get(b"a", 2).map(|kv| kv.value), Some(b"1".to_vec()));
        assert_eq!(m.get(b"a", 4), None);
        assert_eq!(m.get(b"a", 1), None);
    }

    #[test]
    fn one_revision_for_many_writes_and_rollback() {
        let mut m = Mvcc::default();
        put(&mut m, b"x", b"0");
        let mut w = m.begin();
        m.put(&mut w, b"a", b"1".to_vec(), 0);
        m.put(&mut w, b"b", b"1".to_vec(), 0);
        assert_eq!(
            m.get(b"a", LATEST).map(|kv| kv.mod_revision),
            Some(3),
            "a txn reads its own writes"
        );
        assert_eq!(m.get(b"a", 2), None);
        for k in w.touched.clone() {
            m.rollback_key(&w, &k);
        }
        assert_eq!(m.get(b"a", LATEST), None);
        assert_eq!(m.revision, 2);
        let mut w = m.begin();
        m.put(&mut w, b"a", b"1".to_vec(), 0);
        m.delete(&mut w, b"x");
        let events = m.commit(w);
        assert_eq!(m.revision, 3);
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|e| e.revision() == 3));
        assert_eq!(m.events_since(3, &KeyRange::all()).unwrap(), events);
    }

    #[test]
    fn compaction_keeps_what_later_reads_need() {
        let mut m = Mvcc::default();
        put(&mut m, b"a", b"1"); // 2
        put(&mut m, b"b", b"1"); // 3
        put(&mut m, b"a", b"2"); // 4
        del(&mut m, b"b"); // 5
        put(&mut m, b"c", b"1"); // 6
        del(&mut m, b"c"); // 7
        let before: Vec<_> = (5..=7)
            .map(|r| m.range(&KeyRange::all(), r).collect::<Vec<_>>())
            .collect();
        let events = m.events_since(5, &KeyRange::all()).unwrap();
        m.compact(5);
        let after: Vec<_> = (5..=7)
            .map(|r| m.range(&KeyRange::all(), r).collect::<Vec<_>>())
            .collect();
        assert_eq!(before, after);
        // The same events, but the revision before 5 is gone: as etcd, an event at the
        // compaction's revision has no prev_kv any more.
        let events: Vec<_> = events
            .into_iter()
            .map(|mut e| {
                if e.revision() == 5 {
                    e.prev_kv = None;
                }
                e
            })
            .collect();
        assert_eq!(m.events_since(5, &KeyRange::all()).unwrap(), events);
        assert_eq!(m.keys[&b"a".to_vec()].len(), 1);
        assert_eq!(
            m.read_revision(4),
            Err(KvError::Compacted {
                compact_revision: 5
            })
        );
        assert_eq!(
            m.read_revision(8),
            Err(KvError::FutureRevision {
                current_revision: 7
            })
        );
        assert!(m.events_since(4, &KeyRange::all()).is_err());
        m.compact(7);
        assert!(!m.keys.contains_key(b"b".as_slice()));
        assert_eq!(
            m.events_since(7, &KeyRange::all()).unwrap().len(),
            1,
            "the delete at the compact revision stays"
        );
    }
}
