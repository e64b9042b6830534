//! Static txn checks and branch selection.
//!
//! [`validate_txn`] holds the checks etcd's gRPC layer makes before
//! proposing (empty keys, ignore flags, op counts, put/delete overlaps).
//! The state machine repeats them on apply, so a command that skipped them
//! still fails identically on every replica.
//!
//! [`path`] evaluates every compare of the txn tree, nested ones included,
//! against the state *before* the txn runs, as etcd's `compareToPath`
//! does; execution then follows the recorded branches.

use std::collections::BTreeSet;

use crate::compare::all_hold;
use crate::error::KvError;
use crate::key_range::KeyRange;
use crate::mvcc::Mvcc;
use crate::types::{DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest};

/// etcd's default `--max-txn-ops`: per compare/success/failure list.
pub const MAX_TXN_OPS: usize = 128;
/// Deepest txn nesting accepted (protobuf's decoder stops at 100 levels).
pub const MAX_TXN_DEPTH: usize = 32;

pub fn validate_range(r: &RangeRequest) -> Result<(), KvError> {
    if r.key.is_empty() {
        return Err(KvError::EmptyKey);
    }
    Ok(())
}

pub fn validate_put(p: &PutRequest) -> Result<(), KvError> {
    if p.key.is_empty() {
        return Err(KvError::EmptyKey);
    }
    if p.ignore_value && !p.value.is_empty() {
        return Err(KvError::ValueProvided);
    }
    if p.ignore_lease && p.lease != 0 {
        return Err(KvError::LeaseProvided);
    }
    Ok(())
}

pub fn validate_delete(d: &DeleteRangeRequest) -> Result<(), KvError> {
    if d.key.is_empty() {
        return Err(KvError::EmptyKey);
    }
    Ok(())
}

/// All static checks of a txn request (see the module doc).
pub fn validate_txn(t: &TxnRequest) -> Result<(), KvError> {
    check_txn(t, 1)?;
    // After the size checks, so the overlap check cannot blow up.
    check_intervals(&t.success)?;
    check_intervals(&t.failure)?;
    Ok(())
}

fn check_txn(t: &TxnRequest, depth: usize) -> Result<(), KvError> {
    if depth > MAX_TXN_DEPTH {
        return Err(KvError::TxnTooDeep);
    }
    if t.compare.len() > MAX_TXN_OPS
        || t.success.len() > MAX_TXN_OPS
        || t.failure.len() > MAX_TXN_OPS
    {
        return Err(KvError::TooManyOps);
    }
    for op in t.success.iter().chain(&t.failure) {
        match op {
            RequestOp::Range(r) => validate_range(r)?,
            RequestOp::Put(p) => validate_put(p)?,
            RequestOp::DeleteRange(d) => validate_delete(d)?,
            RequestOp::Txn(t) => check_txn(t, depth + 1)?,
        }
    }
    Ok(())
}

/// etcd's `checkIntervals`: no key may be put twice, nor put and deleted,
/// among one op list and the nested txns it may run. The success and
/// failure branches of a nested txn may put the same key (only one runs).
/// Returns the keys put and the ranges deleted by `ops`.
fn check_intervals(ops: &[RequestOp]) -> Result<(BTreeSet<Vec<u8>>, Vec<KeyRange>), KvError> {
    // etcd takes a delete's range_end as is here: `"\0"` (from the key on) makes an
    // empty interval, which overlaps no put.
    let mut dels: Vec<KeyRange> = ops
        .iter()
        .filter_map(|op| match op {
            RequestOp::DeleteRange(d) if d.range_end != [0] => {
                Some(KeyRange::new(&d.key, &d.range_end))
            }
            _ => None,
        })
        .collect();
    let deleted = |dels: &[KeyRange], k: &[u8]| dels.iter().any(|d| d.contains(k));
    let mut puts: BTreeSet<Vec<u8>> = BTreeSet::new();
    for op in ops {
        let RequestOp::Txn(t) = op else { continue };
        let (puts_then, dels_then) = check_intervals(&t.success)?;
        let (puts_else, dels_else) = check_intervals(&t.failure)?;
        for k in &puts_then {
            if puts.contains(k) || deleted(&dels, k) {
                return Err(KvError::DuplicateKey);
            }
            puts.insert(k.clone());
        }
        for k in puts_else {
            if (puts.contains(&k) && !puts_then.contains(&k)) || deleted(&dels, &k) {
                return Err(KvError::DuplicateKey);
            }
            puts.insert(k);
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in ops {
        let RequestOp::Put(p) = op else { continue };
        if puts.contains(&p.key) || deleted(&dels, &p.key) {
            return Err(KvError::DuplicateKey);
        }
        puts.insert(p.key.clone());
    }
    Ok((puts, dels))
}

/// True when no op in either branch, at any depth, writes.
pub fn is_read_only(t: &TxnRequest) -> bool {
    t.success.iter().chain(&t.failure).all(|op| match op {
        RequestOp::Range(_) => true,
        RequestOp::Txn(t) => is_read_only(t),
        RequestOp::Put(_) | RequestOp::DeleteRange(_) => false,
    })
}

/// Branch taken by `t` and by each nested txn it runs, in execution
/// (pre-)order, all evaluated against the current state of `mvcc`.
pub(crate) fn path(mvcc: &Mvcc, t: &TxnRequest, out: &mut Vec<bool>) {
    let ok = all_hold(mvcc, &t.compare);
    out.push(ok);
    for op in if ok { &t.success } else { &t.failure } {
        if let RequestOp::Txn(nested) = op {
            path(mvcc, nested, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &[u8]) -> RequestOp {
        RequestOp::Put(PutRequest {
            key: k.to_vec(),
            ..Default::default()
        })
    }
    fn del(k: &[u8], end: &[u8]) -> RequestOp {
        RequestOp::DeleteRange(DeleteRangeRequest {
            key: k.to_vec(),
            range_end: end.to_vec(),
            prev_kv: false,
        })
    }
    fn txn(success: Vec<RequestOp>, failure: Vec<RequestOp>) -> TxnRequest {
        TxnRequest {
            compare: vec![],
            success,
            failure,
        }
    }

    #[test]
    fn duplicate_keys() {
        let v = |s, f| validate_txn(&txn(s, f));
        assert_eq!(
            v(vec![put(b"a"), put(b"a")], vec![]),
            Err(KvError::DuplicateKey)
        );
        assert_eq!(
            v(vec![del(b"a", b"c"), put(b"b")], vec![]),
            Err(KvError::DuplicateKey)
        );
        assert_eq!(
            v(vec![put(b"b"), del(b"a", b"\0")], vec![]),
            Ok(()),
            "as etcd's check: a delete from a key on overlaps no put"
        );
        assert_eq!(
            v(vec![put(b"a")], vec![put(b"a")]),
            Ok(()),
            "branches are exclusive"
        );
        assert_eq!(
            v(vec![del(b"a", b""), del(b"a", b"b")], vec![]),
            Ok(()),
            "overlapping deletes are fine"
        );
        let nested = RequestOp::Txn(txn(vec![put(b"a")], vec![put(b"a")]));
        assert_eq!(v(vec![nested.clone()], vec![]), Ok(()));
        assert_eq!(
            v(vec![nested.clone(), put(b"a")], vec![]),
            Err(KvError::DuplicateKey)
        );
        let nested_del = RequestOp::Txn(txn(vec![], vec![del(b"a", b"")]));
        assert_eq!(
            v(vec![nested_del, put(b"a")], vec![]),
            Err(KvError::DuplicateKey)
        );
    }

    #[test]
    fn static_checks() {
        let bad_put = RequestOp::Put(PutRequest {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            ignore_value: true,
            ..Default::default()
        });
        assert_eq!(
            validate_txn(&txn(vec![], vec![bad_put])),
            Err(KvError::ValueProvided)
        );
        let bad_lease = PutRequest {
            key: b"k".to_vec(),
            lease: 3,
            ignore_lease: true,
            ..Default::default()
        };
        assert_eq!(validate_put(&bad_lease), Err(KvError::LeaseProvided));
        assert_eq!(
            validate_txn(&txn(vec![put(b"")], vec![])),
            Err(KvError::EmptyKey)
        );
        let many: Vec<RequestOp> = (0..=MAX_TXN_OPS)
            .map(|i| put(format!("k{i}").as_bytes()))
            .collect();
        assert_eq!(validate_txn(&txn(many, vec![])), Err(KvError::TooManyOps));
        let mut deep = txn(vec![], vec![]);
        for _ in 0..MAX_TXN_DEPTH {
            deep = txn(vec![RequestOp::Txn(deep)], vec![]);
        }
        assert_eq!(validate_txn(&deep), Err(KvError::TxnTooDeep));
        assert!(is_read_only(&txn(
            vec![RequestOp::Txn(txn(vec![], vec![]))],
            vec![]
        )));
        assert!(!is_read_only(&txn(
            vec![],
            vec![RequestOp::Txn(txn(vec![put(b"a")], vec![]))]
        )));
    }
}
