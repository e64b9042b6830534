//! Snapshot and restore of the whole state, for Raft log compaction.
//!
//! Two layouts, both the magic `CBKV` and a format version byte, then postcard:
//! - **format 1, self-contained**: applied index, revision, compact revision, every key's
//!   uncompacted history with its values inline (key order) and the leases (id order, each
//!   with the remaining TTL last checkpointed: [`Lease::remaining_ms`]).
//!   Equal states give byte-identical snapshots. A store that keeps its values in memory
//!   snapshots this way, and a leader sends it to a follower ([`KvStore::transfer_snapshot`]).
//! - **format 2, index**: the same but each put names its value's slot in the member's
//!   value log, plus the log's generation and the length `X` the snapshot covers. Taking it
//!   syncs the value log to `X` first, so the prefix it names is durable before the snapshot
//!   file is; restoring it cuts the value log back to `X` (what follows is replayed from the
//!   WAL). It is small (no values), so snapshots can be frequent and the Raft log short.
//!
//! Either format may be followed by the auth section (users, roles, permissions, whether
//! auth is on: [`AuthStore`]); it is left out while the auth state is untouched, so such
//! snapshots are byte-identical to those of builds without auth, and one without it
//! restores with auth off.
//!
//! Lease-to-key attachments are not stored: restore rebuilds them from the key space.
//! Restore checks the invariants the store relies on (and that every slot lies inside the
//! covered prefix), so corrupt bytes give an error, never a store that misbehaves later.

use std::collections::BTreeMap;

use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};

use crate::auth::AuthStore;
use crate::error::CodecError;
use crate::history::History;
use crate::lease::{Lease, Lessor};
use crate::mvcc::{Entry, Mvcc, Revision, Stored, LATEST};
use crate::store::KvStore;
use crate::values::{PendingSync, ValueLog, MAX_VALUE_LEN};

const MAGIC: &[u8; 4] = b"CBKV";
const SELF_CONTAINED: u8 = 1;
const INDEX: u8 = 2;

/// A put with its value inline (format 1).
#[derive(Serialize, Deserialize)]
struct StoredValue {
    value: Vec<u8>,
    create_revision: i64,
    version: i64,
    lease: i64,
}

#[derive(Serialize, Deserialize)]
struct EntryWithValue {
    rev: Revision,
    put: Option<StoredValue>,
}

/// Format 1 as written: the histories' values are read from the value log while they
/// are serialized, one at a time.
#[derive(Serialize)]
struct SelfContainedRef<'a> {
    applied_index: u64,
    revision: i64,
    compact_revision: i64,
    keys: WithValues<'a>,
    leases: Vec<&'a Lease>,
}

struct WithValues<'a> {
    keys: &'a BTreeMap<Vec<u8>, History>,
    values: &'a ValueLog,
}

struct HistoryWithValues<'a> {
    hist: &'a History,
    values: &'a ValueLog,
}

impl Serialize for WithValues<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let values = self.values;
        s.collect_map(
            self.keys
                .iter()
                .map(|(k, hist)| (k, HistoryWithValues { hist, values })),
        )
    }
}

impl Serialize for HistoryWithValues<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // An explicit length: postcard cannot size a sequence from an iterator's hint.
        let mut seq = s.serialize_seq(Some(self.hist.len()))?;
        for e in self.hist.iter() {
            seq.serialize_element(&EntryWithValue {
                rev: e.rev,
                put: e.put.map(|p| StoredValue {
                    value: self.values.read(p.value),
                    create_revision: p.create_revision,
                    version: p.version,
                    lease: p.lease,
                }),
            })?;
        }
        seq.end()
    }
}

#[derive(Deserialize)]
struct SelfContained {
    applied_index: u64,
    revision: i64,
    compact_revision: i64,
    keys: BTreeMap<Vec<u8>, Vec<EntryWithValue>>,
    leases: Vec<Lease>,
}

/// Format 2.
#[derive(Serialize, Deserialize)]
struct Index<K, L> {
    applied_index: u64,
    revision: i64,
    compact_revision: i64,
    generation: u64,
    values_len: u64,
    keys: K,
    leases: Vec<L>,
}

type IndexOwned = Index<BTreeMap<Vec<u8>, History>, Lease>;

/// The state a snapshot decodes to, before it is checked.
struct Decoded {
    applied_index: u64,
    auth: AuthStore,
    mvcc: Mvcc,
    leases: Vec<Lease>,
}

fn with_header(format: u8, data: &impl Serialize) -> Vec<u8> {
    // Sized exactly first: a Vec grown by doubling would hold up to twice the snapshot
    // (and copy it) while it is built. Cannot fail: all lengths are known and the Vec grows.
    let size = postcard::experimental::serialized_size(data)
        .expect("postcard sizing of a snapshot is infallible");
    let mut out = Vec::with_capacity(MAGIC.len() + 1 + size);
    out.extend_from_slice(MAGIC);
    out.push(format);
    postcard::to_extend(data, out).expect("postcard serialisation of a snapshot is infallible")
}

fn decode_body<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, CodecError> {
    match postcard::take_from_bytes::<T>(body) {
        Ok((data, [])) => Ok(data),
        Ok(_) => Err(CodecError::BadSnapshot("trailing bytes".into())),
        Err(e) => Err(CodecError::Decode(e.to_string())),
    }
}

/// Appends the auth section unless the auth state is untouched.
fn with_auth(out: Vec<u8>, auth: &AuthStore) -> Vec<u8> {
    if *auth == AuthStore::default() {
        return out;
    }
    postcard::to_extend(auth, out).expect("postcard serialisation of auth is infallible")
}

/// A format's body and the auth section after it, if any (checked).
fn decode_with_auth<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<(T, AuthStore), CodecError> {
    let (data, rest) =
        postcard::take_from_bytes::<T>(body).map_err(|e| CodecError::Decode(e.to_string()))?;
    if rest.is_empty() {
        return Ok((data, AuthStore::default()));
    }
    let auth: AuthStore = decode_body(rest)?;
    auth.check_invariants().map_err(CodecError::BadSnapshot)?;
    Ok((data, auth))
}

impl KvStore {
    /// The state as of the last applied command: an index snapshot (format 2) when values
    /// live in a file, which is synced first; self-contained (format 1) otherwise, or if
    /// that sync fails (the failure is kept: see [`KvStore::failure`]).
    pub fn snapshot(&self) -> Vec<u8> {
        let (data, pending) = self.snapshot_unsynced();
        let Some(pending) = pending else {
            return data;
        };
        match pending.sync() {
            Ok(()) => data,
            Err(e) => {
                self.mvcc.values.fail("sync", e);
                self.self_contained_snapshot()
            }
        }
    }

    /// Like [`KvStore::snapshot`], but the value log is not synced: an index snapshot comes
    /// with the [`PendingSync`] that must succeed before the snapshot may become durable
    /// (the caller syncs off its event loop, then writes the snapshot). `None`: the
    /// snapshot is self-contained.
    pub fn snapshot_unsynced(&self) -> (Vec<u8>, Option<PendingSync>) {
        let values = &self.mvcc.values;
        let Some(generation) = values.generation() else {
            return (self.self_contained_snapshot(), None);
        };
        let pending = match values.pending_sync() {
            Ok(Some(pending)) => pending,
            Ok(None) => return (self.self_contained_snapshot(), None),
            Err(e) => {
                values.fail("sync", e);
                return (self.self_contained_snapshot(), None);
            }
        };
        let index = with_header(
            INDEX,
            &Index {
                applied_index: self.applied_index,
                revision: self.mvcc.revision,
                compact_revision: self.mvcc.compact_revision,
                generation,
                values_len: values.len(),
                keys: &self.mvcc.keys,
                leases: self.lessor.leases().collect(),
            },
        );
        (with_auth(index, &self.auth), Some(pending))
    }

    /// The whole state with its values (format 1), as another member can restore it.
    pub fn self_contained_snapshot(&self) -> Vec<u8> {
        self_contained(
            self.applied_index,
            &self.mvcc.keys,
            &self.mvcc.values,
            (self.mvcc.revision, self.mvcc.compact_revision),
            self.lessor.leases().collect(),
            &self.auth,
        )
    }

    /// What to send a follower for `local`, a snapshot this store took: `None` if it is
    /// self-contained already, else the self-contained form of the state it names (its
    /// values read from this store's value log, whose prefix it covers never changes).
    pub fn transfer_snapshot(&self, local: &[u8]) -> Result<Option<Vec<u8>>, CodecError> {
        let Some([INDEX, body @ ..]) = local.strip_prefix(MAGIC.as_slice()) else {
            return Ok(None);
        };
        let (index, auth): (IndexOwned, _) = decode_with_auth(body)?;
        let values = &self.mvcc.values;
        if values.generation() != Some(index.generation) || index.values_len > values.len() {
            return Err(CodecError::BadSnapshot(
                "the value log this snapshot names has been replaced".into(),
            ));
        }
        Ok(Some(self_contained(
            index.applied_index,
            &index.keys,
            values,
            (index.revision, index.compact_revision),
            index.leases.iter().collect(),
            &auth,
        )))
    }

    /// Replaces this store's state with a snapshot's (either format). On error the store
    /// is unchanged.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), CodecError> {
        let bad = |m: String| CodecError::BadSnapshot(m);
        let decoded = match bytes.strip_prefix(MAGIC.as_slice()) {
            Some([SELF_CONTAINED, body @ ..]) => {
                let (data, auth): (SelfContained, _) = decode_with_auth(body)?;
                let entries = || data.keys.values().flatten();
                let too_large = entries().filter_map(|e| e.put.as_ref());
                if too_large.into_iter().any(|p| p.value.len() > MAX_VALUE_LEN) {
                    return Err(bad(format!("a value exceeds {MAX_VALUE_LEN} bytes")));
                }
                // A history packs sub-revisions in 32 bits (history.rs).
                if entries().any(|e| u32::try_from(e.rev.sub).is_err()) {
                    return Err(bad("a sub-revision out of range".into()));
                }
                let fresh = self
                    .mvcc
                    .values
                    .fresh_like()
                    .map_err(|e| bad(e.to_string()))?;
                let decoded = from_self_contained(data, fresh, auth);
                if let Err(e) = check(&decoded.mvcc, &decoded.leases) {
                    decoded.mvcc.values.discard();
                    return Err(bad(e));
                }
                decoded
            }
            Some([INDEX, body @ ..]) => {
                let (index, auth): (IndexOwned, _) = decode_with_auth(body)?;
                self.decode_index(index, auth)?
            }
            Some(_) => return Err(bad("unknown format version".into())),
            None => return Err(bad("not a kv snapshot".into())),
        };
        let restored = build(decoded).map_err(bad)?;
        if let Err(e) = restored.mvcc.values.remove_other_generations() {
            return Err(bad(format!("removing replaced value logs: {e}")));
        }
        *self = restored;
        Ok(())
    }

    /// Checks an index snapshot, then opens the value log prefix it names.
    fn decode_index(&self, index: IndexOwned, auth: AuthStore) -> Result<Decoded, CodecError> {
        let bad = |m: String| CodecError::BadSnapshot(m);
        let mut mvcc = Mvcc::with_values(ValueLog::default());
        mvcc.keys = index.keys;
        mvcc.revision = index.revision;
        mvcc.compact_revision = index.compact_revision;
        check(&mvcc, &index.leases).map_err(bad)?;
        let beyond = mvcc
            .keys
            .values()
            .flat_map(History::iter)
            .filter_map(|e| e.put)
            .any(|p| p.value.end() > index.values_len);
        if beyond {
            return Err(bad("a value lies beyond the value log it names".into()));
        }
        mvcc.values = self
            .mvcc
            .values
            .reopen_prefix(index.generation, index.values_len)
            .map_err(|e| bad(e.to_string()))?;
        Ok(Decoded {
            applied_index: index.applied_index,
            auth,
            mvcc,
            leases: index.leases,
        })
    }

    /// A store holding a self-contained snapshot's state, its values in memory.
    pub fn from_snapshot(bytes: &[u8]) -> Result<KvStore, CodecError> {
        let mut store = KvStore::new();
        store.restore(bytes)?;
        Ok(store)
    }
}

fn self_contained(
    applied_index: u64,
    keys: &BTreeMap<Vec<u8>, History>,
    values: &ValueLog,
    (revision, compact_revision): (i64, i64),
    leases: Vec<&Lease>,
    auth: &AuthStore,
) -> Vec<u8> {
    let body = with_header(
        SELF_CONTAINED,
        &SelfContainedRef {
            applied_index,
            revision,
            compact_revision,
            keys: WithValues { keys, values },
            leases,
        },
    );
    with_auth(body, auth)
}

/// Moves a self-contained snapshot's values into `values`.
fn from_self_contained(data: SelfContained, mut values: ValueLog, auth: AuthStore) -> Decoded {
    let mut keys = BTreeMap::new();
    for (key, hist) in data.keys {
        let hist: History = hist
            .into_iter()
            .map(|e| Entry {
                rev: e.rev,
                put: e.put.map(|p| Stored {
                    value: values.append(&p.value),
                    create_revision: p.create_revision,
                    version: p.version,
                    lease: p.lease,
                }),
            })
            .collect();
        keys.insert(key, hist);
    }
    let mut mvcc = Mvcc::with_values(values);
    mvcc.keys = keys;
    mvcc.revision = data.revision;
    mvcc.compact_revision = data.compact_revision;
    Decoded {
        applied_index: data.applied_index,
        auth,
        mvcc,
        leases: data.leases,
    }
}

/// The store of a checked snapshot: leases re-attached to their keys.
fn build(d: Decoded) -> Result<KvStore, String> {
    if let Some(f) = d.mvcc.values.failure() {
        return Err(f.to_string());
    }
    let mut lessor = Lessor::from_leases(d.leases);
    for kv in d.mvcc.range(&crate::KeyRange::all(), LATEST) {
        if kv.lease != 0 {
            if !lessor.contains(kv.lease) {
                return Err(format!("key attached to unknown lease {}", kv.lease));
            }
            lessor.attach(kv.lease, &kv.key);
        }
    }
    Ok(KvStore {
        mvcc: d.mvcc,
        lessor,
        auth: d.auth,
        applied_index: d.applied_index,
    })
}

/// The invariants `mvcc.rs` and `lease.rs` assume.
fn check(m: &Mvcc, leases: &[Lease]) -> Result<(), String> {
    // i64::MAX is the "latest" read sentinel and must stay above any revision.
    if m.revision < 1
        || m.revision >= i64::MAX / 2
        || m.compact_revision < 0
        || m.compact_revision > m.revision
    {
        return Err(format!(
            "revision {} / compact revision {}",
            m.revision, m.compact_revision
        ));
    }
    for (key, hist) in &m.keys {
        if hist.is_empty() {
            return Err(format!("key {key:?} has no history"));
        }
        let mut prev: Option<Revision> = None;
        for e in hist.iter() {
            if e.rev.main < 2 || e.rev.main > m.revision || e.rev.sub < 0 {
                return Err(format!("key {key:?} has revision {:?}", e.rev));
            }
            if prev.is_some_and(|p| p >= e.rev) {
                return Err(format!("key {key:?} history out of order"));
            }
            prev = Some(e.rev);
            if let Some(p) = &e.put {
                if p.version < 1
                    || p.create_revision < 2
                    || p.create_revision > e.rev.main
                    || p.value.len() > MAX_VALUE_LEN
                {
                    return Err(format!("key {key:?} has a bad put at {:?}", e.rev));
                }
            }
        }
    }
    if leases.windows(2).any(|w| w[0].id >= w[1].id) || leases.iter().any(|l| l.ttl < 1) {
        return Err("leases not sorted, duplicated or with a bad TTL".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::types::PutRequest;

    fn put_cmd(k: &[u8], lease: i64) -> Command {
        Command::Put(PutRequest {
            key: k.to_vec(),
            value: b"a value longer than its slot".to_vec(),
            lease,
            ..Default::default()
        })
    }

    fn sample_commands() -> Vec<Command> {
        vec![
            Command::LeaseGrant {
                id: 5,
                ttl: 10,
                now_ms: 0,
            },
            put_cmd(b"a", 5),
            put_cmd(b"b", 0),
            put_cmd(b"a", 5),
            Command::LeaseCheckpoint {
                checkpoints: vec![crate::types::LeaseCheckpoint {
                    id: 5,
                    remaining_ms: 7_250,
                }],
            },
        ]
    }

    fn sample() -> KvStore {
        let mut s = KvStore::new();
        for (i, c) in sample_commands().iter().enumerate() {
            s.apply(i as u64 + 1, c);
        }
        s
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let bytes = s.snapshot();
        let r = KvStore::from_snapshot(&bytes).unwrap();
        assert_eq!(r, s);
        assert_eq!(r.snapshot(), bytes);
        assert_eq!(r.lease_keys(5), Some(vec![b"a".to_vec()]));
        assert_eq!(
            r.lease(5).map(|l| l.remaining_ms),
            Some(7_250),
            "snapshots carry the checkpointed remaining TTL"
        );
        assert_eq!(
            KvStore::from_snapshot(&KvStore::new().snapshot()).unwrap(),
            KvStore::new()
        );
    }

    #[test]
    fn snapshot_buffer_is_sized_exactly() {
        let s = sample();
        let bytes = s.snapshot();
        assert_eq!(
            bytes.capacity(),
            bytes.len(),
            "no slack from growing the buffer"
        );
    }

    #[test]
    fn rejects_corruption_without_panicking() {
        let mut s = sample();
        let bytes = s.snapshot();
        assert!(s.restore(b"nope").is_err());
        assert!(s.restore(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(s.restore(&longer).is_err());
        for i in 5..bytes.len() {
            for flip in [1u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                if let Ok(r) = KvStore::from_snapshot(&b) {
                    r.check_invariants().unwrap();
                }
            }
        }
        assert_eq!(s, sample(), "failed restores leave the store unchanged");
    }

    fn sample_in(dir: &std::path::Path) -> KvStore {
        let mut s = KvStore::with_value_dir(dir).unwrap();
        for (i, c) in sample_commands().iter().enumerate() {
            s.apply(i as u64 + 1, c);
        }
        s
    }

    #[test]
    fn index_snapshot_names_the_synced_value_log_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let s = sample_in(dir.path());
        let index = s.snapshot();
        assert_eq!(index[4], INDEX);
        assert!(
            index.len() < s.self_contained_snapshot().len(),
            "no values inside"
        );
        // What the WAL replays after the snapshot is appended again on restart: the
        // value log is cut back to the prefix the snapshot covers.
        let mut s = s;
        s.apply(10, &put_cmd(b"c", 0));
        drop(s);
        let mut r = KvStore::with_value_dir(dir.path()).unwrap();
        r.restore(&index).unwrap();
        assert_eq!(r, sample());
        assert_eq!(r.snapshot(), index);
        // A follower gets the self-contained form, equal to what a memory store takes.
        let sent = r.transfer_snapshot(&index).unwrap().expect("expanded");
        assert_eq!(sent, sample().snapshot());
        assert_eq!(r.transfer_snapshot(&sent).unwrap(), None);
        assert!(
            KvStore::from_snapshot(&index).is_err(),
            "a memory store cannot restore an index"
        );
    }

    #[test]
    fn installing_a_self_contained_snapshot_starts_a_new_value_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = sample_in(dir.path());
        let old_index = s.snapshot();
        s.restore(&sample().snapshot()).unwrap();
        assert_eq!(s, sample());
        assert!(
            s.restore(&old_index).is_err(),
            "the replaced value log is gone"
        );
        let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(files.len(), 1);
    }

    #[test]
    fn rejects_corrupt_index_snapshots_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = sample_in(dir.path()).snapshot();
        for i in 5..bytes.len() {
            for flip in [1u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                let mut r = KvStore::with_value_dir(dir.path()).unwrap();
                if r.restore(&b).is_ok() {
                    r.check_invariants().unwrap();
                }
            }
        }
        let mut r = KvStore::with_value_dir(dir.path()).unwrap();
        r.restore(&bytes).unwrap();
        assert_eq!(r, sample(), "failed restores left the value log intact");
    }

    #[test]
    fn refuses_oversized_values() {
        let mut s = KvStore::new();
        let big = Command::Put(PutRequest {
            key: b"k".to_vec(),
            value: vec![0; crate::MAX_VALUE_LEN + 1],
            ..Default::default()
        });
        let applied = s.apply(1, &big);
        assert!(matches!(
            applied.result,
            Err(crate::KvError::RequestTooLarge)
        ));
    }
}
