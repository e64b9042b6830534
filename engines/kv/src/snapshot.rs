//! Snapshot and restore of the whole state, for Raft log compaction.
//!
//! Layout: the magic `CBKV`, a format version byte, then postcard of
//! [`Data`]: applied index, revision, compact revision, every key's
//! uncompacted history (key order) and the leases (id order). Lease-to-key
//! attachments are not stored: restore rebuilds them from the key space.
//! Equal states give byte-identical snapshots. Restore checks the
//! invariants the store relies on, so corrupt bytes give an error, never a
//! store that misbehaves later.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::CodecError;
use crate::lease::{Lease, Lessor};
use crate::mvcc::{Entry, Mvcc, LATEST};
use crate::store::KvStore;

const MAGIC: &[u8; 4] = b"CBKV";
const FORMAT: u8 = 1;

#[derive(Serialize)]
struct DataRef<'a> {
    applied_index: u64,
    revision: i64,
    compact_revision: i64,
    keys: &'a BTreeMap<Vec<u8>, Vec<Entry>>,
    leases: Vec<&'a Lease>,
}

#[derive(Deserialize)]
struct Data {
    applied_index: u64,
    revision: i64,
    compact_revision: i64,
    keys: BTreeMap<Vec<u8>, Vec<Entry>>,
    leases: Vec<Lease>,
}

impl KvStore {
    /// The full state as bytes (see the module doc for the layout).
    pub fn snapshot(&self) -> Vec<u8> {
        let data = DataRef {
            applied_index: self.applied_index,
            revision: self.mvcc.revision,
            compact_revision: self.mvcc.compact_revision,
            keys: &self.mvcc.keys,
            leases: self.lessor.leases().collect(),
        };
        // Sized exactly first: a snapshot is as large as the whole history, and a Vec grown
        // by doubling would hold up to twice that (and copy it) while it is built.
        // Cannot fail: all lengths are known and the Vec grows.
        let size = postcard::experimental::serialized_size(&data)
            .expect("postcard sizing of a snapshot is infallible");
        let mut out = Vec::with_capacity(MAGIC.len() + 1 + size);
        out.extend_from_slice(MAGIC);
        out.push(FORMAT);
        postcard::to_extend(&data, out).expect("postcard serialisation of a snapshot is infallible")
    }

    /// Replaces this store's state with a snapshot's. On error the store is
    /// unchanged.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), CodecError> {
        *self = KvStore::from_snapshot(bytes)?;
        Ok(())
    }

    /// A store holding a snapshot's state.
    pub fn from_snapshot(bytes: &[u8]) -> Result<KvStore, CodecError> {
        let bad = |m: String| CodecError::BadSnapshot(m);
        let body = match bytes.strip_prefix(MAGIC.as_slice()) {
            Some([FORMAT, body @ ..]) => body,
            Some(_) => return Err(bad("unknown format version".into())),
            None => return Err(bad("not a kv snapshot".into())),
        };
        let data = match postcard::take_from_bytes::<Data>(body) {
            Ok((data, [])) => data,
            Ok(_) => return Err(bad("trailing bytes".into())),
            Err(e) => return Err(CodecError::Decode(e.to_string())),
        };
        check(&data).map_err(bad)?;
        let mvcc = Mvcc {
            keys: data.keys,
            revision: data.revision,
            compact_revision: data.compact_revision,
        };
        let mut lessor = Lessor::from_leases(data.leases);
        for kv in mvcc.range(&crate::KeyRange::all(), LATEST) {
            if kv.lease != 0 {
                if !lessor.contains(kv.lease) {
                    return Err(bad(format!("key attached to unknown lease {}", kv.lease)));
                }
                lessor.attach(kv.lease, &kv.key);
            }
        }
        Ok(KvStore {
            mvcc,
            lessor,
            applied_index: data.applied_index,
        })
    }
}

/// The invariants `mvcc.rs` and `lease.rs` assume.
fn check(d: &Data) -> Result<(), String> {
    // i64::MAX is the "latest" read sentinel and must stay above any revision.
    if d.revision < 1
        || d.revision >= i64::MAX / 2
        || d.compact_revision < 0
        || d.compact_revision > d.revision
    {
        return Err(format!(
            "revision {} / compact revision {}",
            d.revision, d.compact_revision
        ));
    }
    for (key, hist) in &d.keys {
        if hist.is_empty() {
            return Err(format!("key {key:?} has no history"));
        }
        for (i, e) in hist.iter().enumerate() {
            if e.rev.main < 2 || e.rev.main > d.revision || e.rev.sub < 0 {
                return Err(format!("key {key:?} has revision {:?}", e.rev));
            }
            if i > 0 && hist[i - 1].rev >= e.rev {
                return Err(format!("key {key:?} history out of order"));
            }
            if let Some(p) = &e.put {
                if p.version < 1 || p.create_revision < 2 || p.create_revision > e.rev.main {
                    return Err(format!("key {key:?} has a bad put at {:?}", e.rev));
                }
            }
        }
    }
    if d.leases.windows(2).any(|w| w[0].id >= w[1].id) || d.leases.iter().any(|l| l.ttl < 1) {
        return Err("leases not sorted, duplicated or with a bad TTL".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::types::PutRequest;

    fn sample() -> KvStore {
        let mut s = KvStore::new();
        s.apply(
            1,
            &Command::LeaseGrant {
                id: 5,
                ttl: 10,
                now_ms: 0,
            },
        );
        let put = |k: &[u8], lease| {
            Command::Put(PutRequest {
                key: k.to_vec(),
                value: b"v".to_vec(),
                lease,
                ..Default::default()
            })
        };
        s.apply(2, &put(b"a", 5));
        s.apply(3, &put(b"b", 0));
        s.apply(4, &put(b"a", 5));
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
}
