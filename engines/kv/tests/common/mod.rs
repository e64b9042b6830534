//! Seeded random generation of commands for the property tests.
#![allow(dead_code)]

use coordbench_kv::*;

/// The shared property-test generator (engines/sim): the stream these tests were written
/// against.
pub use coordbench_sim::PropRng as Rng;

pub const KEYS: &[&[u8]] = &[
    b"a", b"ab", b"abc", b"b", b"ba", b"c", b"d", b"d\xff", b"e", b"\xff",
];

pub fn key(rng: &mut Rng) -> Vec<u8> {
    rng.pick(KEYS).to_vec()
}

pub fn value(rng: &mut Rng) -> Vec<u8> {
    (0..rng.below(4))
        .map(|_| b'0' + rng.below(4) as u8)
        .collect()
}

/// A `range_end` for `key`: single key, all from key, prefix, or arbitrary.
pub fn range_end(rng: &mut Rng, key: &[u8]) -> Vec<u8> {
    match rng.below(10) {
        0..=3 => vec![],
        4 => vec![0],
        5 | 6 => prefix_end(key),
        _ => self::key(rng),
    }
}

pub fn lease_id(rng: &mut Rng, store: &KvStore) -> i64 {
    let existing: Vec<i64> = store.lease_leases().leases.iter().map(|l| l.id).collect();
    if !existing.is_empty() && rng.chance(60) {
        *rng.pick(&existing)
    } else {
        rng.between(1, 4)
    }
}

pub fn compare(rng: &mut Rng, store: &KvStore) -> Compare {
    let key = key(rng);
    let range_end = if rng.chance(70) {
        vec![]
    } else {
        range_end(rng, &key)
    };
    let rev = rng.between(0, store.revision() + 1);
    let target = match rng.below(5) {
        0 => CompareTarget::Version(rng.between(0, 3)),
        1 => CompareTarget::Create(rev),
        2 => CompareTarget::Mod(rev),
        3 => CompareTarget::Value(value(rng)),
        _ => CompareTarget::Lease(if rng.chance(50) {
            0
        } else {
            lease_id(rng, store)
        }),
    };
    let result = *rng.pick(&[
        CompareResult::Equal,
        CompareResult::NotEqual,
        CompareResult::Less,
        CompareResult::Greater,
    ]);
    Compare {
        result,
        target,
        key,
        range_end,
    }
}

pub fn range_request(rng: &mut Rng, store: &KvStore) -> RangeRequest {
    let key = key(rng);
    let range_end = range_end(rng, &key);
    let (lo, hi) = (store.compact_revision() - 1, store.revision() + 1);
    let mut r = RangeRequest {
        key,
        range_end,
        ..Default::default()
    };
    if rng.chance(30) {
        r.revision = rng.between(lo, hi);
    }
    if rng.chance(40) {
        r.limit = rng.between(-1, 4);
    }
    if rng.chance(40) {
        r.sort_order = *rng.pick(&[SortOrder::None, SortOrder::Ascend, SortOrder::Descend]);
        r.sort_target = *rng.pick(&[
            SortTarget::Key,
            SortTarget::Version,
            SortTarget::Create,
            SortTarget::Mod,
            SortTarget::Value,
        ]);
    }
    if rng.chance(20) {
        let rev = store.revision();
        r.min_mod_revision = rng.between(0, rev);
        r.max_mod_revision = rng.between(0, rev);
        r.min_create_revision = rng.between(0, rev);
        r.max_create_revision = rng.between(0, rev);
    }
    r.keys_only = rng.chance(15);
    r.count_only = rng.chance(10);
    r
}

pub fn put_request(rng: &mut Rng, store: &KvStore) -> PutRequest {
    let mut p = PutRequest {
        key: key(rng),
        value: value(rng),
        prev_kv: rng.chance(50),
        ..Default::default()
    };
    if rng.chance(30) {
        p.lease = lease_id(rng, store);
    }
    if rng.chance(10) {
        p.ignore_value = true;
        if rng.chance(80) {
            p.value.clear();
        }
    }
    if rng.chance(10) {
        p.ignore_lease = true;
        if rng.chance(80) {
            p.lease = 0;
        }
    }
    if rng.chance(2) {
        p.key.clear();
    }
    p
}

pub fn delete_request(rng: &mut Rng) -> DeleteRangeRequest {
    let key = key(rng);
    DeleteRangeRequest {
        range_end: range_end(rng, &key),
        key,
        prev_kv: rng.chance(50),
    }
}

pub fn txn_request(rng: &mut Rng, store: &KvStore, depth: u32) -> TxnRequest {
    let ops = |rng: &mut Rng| -> Vec<RequestOp> {
        (0..rng.below(4))
            .map(|_| match rng.below(if depth < 2 { 8 } else { 7 }) {
                0 | 1 => RequestOp::Range(range_request(rng, store)),
                2..=4 => RequestOp::Put(put_request(rng, store)),
                5 | 6 => RequestOp::DeleteRange(delete_request(rng)),
                _ => RequestOp::Txn(txn_request(rng, store, depth + 1)),
            })
            .collect()
    };
    let success = ops(rng);
    let failure = ops(rng);
    let compare = (0..rng.below(3)).map(|_| compare(rng, store)).collect();
    TxnRequest {
        compare,
        success,
        failure,
    }
}

/// A random command shaped by `store`'s current state; `now_ms` moves forward.
pub fn command(rng: &mut Rng, store: &KvStore, now_ms: &mut u64) -> Command {
    *now_ms += rng.below(1500);
    let now = *now_ms;
    match rng.below(100) {
        0..=29 => Command::Put(put_request(rng, store)),
        30..=41 => Command::DeleteRange(delete_request(rng)),
        42..=69 => Command::Txn(txn_request(rng, store, 0)),
        70..=72 => {
            let revision = rng.between(store.compact_revision() - 1, store.revision() + 1);
            Command::Compact(CompactionRequest {
                revision,
                physical: false,
            })
        }
        75..=81 => {
            let id = if rng.chance(20) { 0 } else { rng.between(1, 4) };
            Command::LeaseGrant {
                id,
                ttl: rng.between(0, 5),
                now_ms: now,
            }
        }
        82..=85 => Command::LeaseRevoke {
            id: lease_id(rng, store),
        },
        86..=91 => Command::LeaseRenew {
            id: lease_id(rng, store),
            now_ms: now,
        },
        92 => Command::LeaseRenewAll { now_ms: now },
        93..=95 => Command::LeaseCheckpoint {
            checkpoints: (0..rng.below(3))
                .map(|_| LeaseCheckpoint {
                    id: lease_id(rng, store),
                    remaining_ms: if rng.chance(30) { 0 } else { rng.below(9_000) },
                })
                .collect(),
        },
        _ => {
            // What a leader would list: leases its clock found expired (here: every other
            // one), sometimes one more.
            let mut ids: Vec<i64> = store.leases().map(|l| l.id).step_by(2).collect();
            if rng.chance(30) {
                ids.push(lease_id(rng, store));
            }
            Command::LeaseExpire { ids, now_ms: now }
        }
    }
}
