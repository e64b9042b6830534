//! Txn guards: etcd's `applyCompare` / `compareKV`.
//!
//! A compare selects keys like a Range. It holds when it holds for every
//! selected key. With no key selected it is evaluated against an all-zero
//! kv (so `version = 0` tests absence), except a value compare, which
//! then fails: protobuf cannot tell a missing value from an empty one.

use std::cmp::Ordering;

use crate::key_range::KeyRange;
use crate::mvcc::{Mvcc, LATEST};
use crate::types::{Compare, CompareResult, CompareTarget, KeyValue};

/// Evaluates `c` against the latest state of `mvcc`.
pub(crate) fn holds(mvcc: &Mvcc, c: &Compare) -> bool {
    let range = KeyRange::new(&c.key, &c.range_end);
    let mut any = false;
    for kv in mvcc.range(&range, LATEST) {
        any = true;
        if !compare_kv(c, &kv) {
            return false;
        }
    }
    if any {
        return true;
    }
    !matches!(c.target, CompareTarget::Value(_)) && compare_kv(c, &KeyValue::default())
}

/// All compares hold (an empty list holds).
pub(crate) fn all_hold(mvcc: &Mvcc, compares: &[Compare]) -> bool {
    compares.iter().all(|c| holds(mvcc, c))
}

fn compare_kv(c: &Compare, kv: &KeyValue) -> bool {
    let ord = match &c.target {
        CompareTarget::Version(v) => kv.version.cmp(v),
        CompareTarget::Create(v) => kv.create_revision.cmp(v),
        CompareTarget::Mod(v) => kv.mod_revision.cmp(v),
        CompareTarget::Lease(v) => kv.lease.cmp(v),
        CompareTarget::Value(v) => kv.value.as_slice().cmp(v.as_slice()),
        CompareTarget::Unknown => Ordering::Equal,
    };
    match c.result {
        CompareResult::Equal => ord == Ordering::Equal,
        CompareResult::NotEqual => ord != Ordering::Equal,
        CompareResult::Greater => ord == Ordering::Greater,
        CompareResult::Less => ord == Ordering::Less,
        CompareResult::Unknown => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Mvcc {
        let mut m = Mvcc::default();
        let mut w = m.begin();
        m.put(&mut w, b"a", b"x".to_vec(), 0);
        m.put(&mut w, b"b", b"y".to_vec(), 5);
        m.commit(w);
        m
    }

    fn cmp(key: &[u8], end: &[u8], result: CompareResult, target: CompareTarget) -> Compare {
        Compare {
            result,
            target,
            key: key.to_vec(),
            range_end: end.to_vec(),
        }
    }

    #[test]
    fn single_key_targets() {
        let m = store();
        use CompareResult::*;
        use CompareTarget::*;
        assert!(holds(&m, &cmp(b"a", b"", Equal, Value(b"x".to_vec()))));
        assert!(holds(&m, &cmp(b"a", b"", Greater, Value(b"w".to_vec()))));
        assert!(holds(&m, &cmp(b"a", b"", Less, Value(b"xa".to_vec()))));
        assert!(holds(&m, &cmp(b"a", b"", Equal, Version(1))));
        assert!(holds(&m, &cmp(b"a", b"", Equal, Create(2))));
        assert!(holds(&m, &cmp(b"a", b"", Equal, Mod(2))));
        assert!(holds(&m, &cmp(b"b", b"", Equal, Lease(5))));
        assert!(holds(&m, &cmp(b"b", b"", NotEqual, Lease(0))));
        assert!(!holds(&m, &cmp(b"b", b"", Less, Mod(2))));
    }

    #[test]
    fn missing_keys_and_ranges() {
        let m = store();
        use CompareResult::*;
        use CompareTarget::*;
        assert!(
            holds(&m, &cmp(b"zz", b"", Equal, Create(0))),
            "absent key has create_revision 0"
        );
        assert!(holds(&m, &cmp(b"zz", b"", Equal, Version(0))));
        assert!(
            !holds(&m, &cmp(b"zz", b"", Equal, Value(vec![]))),
            "value compares fail on absent keys"
        );
        assert!(!holds(&m, &cmp(b"zz", b"", NotEqual, Value(vec![]))));
        assert!(
            holds(&m, &cmp(b"a", b"c", Equal, Version(1))),
            "holds for every key in range"
        );
        assert!(
            !holds(&m, &cmp(b"a", b"c", Equal, Lease(0))),
            "b has a lease"
        );
        assert!(holds(&m, &cmp(b"a", b"\0", Greater, Mod(1))));
        assert!(all_hold(&m, &[]));
    }
}
