//! etcd's `(key, range_end)` convention as one value type.
//!
//! - `range_end` empty: the single key `key`;
//! - `range_end == [0]`: every key `>= key` (so `key = [0]` too means all keys);
//! - otherwise the half-open interval `[key, range_end)`, empty when
//!   `range_end <= key`.
//!
//! [`prefix_end`] gives the `range_end` that selects every key starting
//! with a prefix, as etcd's `clientv3.GetPrefixRangeEnd` does.

use std::collections::BTreeMap;
use std::ops::Bound;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyRange {
    /// Exactly one key.
    Single(Vec<u8>),
    /// `[start, end)`, or every key `>= start` when `end` is `None`.
    Interval {
        start: Vec<u8>,
        end: Option<Vec<u8>>,
    },
}

impl KeyRange {
    /// Interprets an etcd `(key, range_end)` pair.
    pub fn new(key: &[u8], range_end: &[u8]) -> Self {
        match range_end {
            [] => KeyRange::Single(key.to_vec()),
            [0] => KeyRange::Interval {
                start: key.to_vec(),
                end: None,
            },
            end => KeyRange::Interval {
                start: key.to_vec(),
                end: Some(end.to_vec()),
            },
        }
    }

    /// Every key starting with `prefix` (all keys for an empty prefix).
    pub fn prefix(prefix: &[u8]) -> Self {
        KeyRange::new(prefix, &prefix_end(prefix))
    }

    /// Every key.
    pub fn all() -> Self {
        KeyRange::Interval {
            start: Vec::new(),
            end: None,
        }
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            KeyRange::Single(k) => k.as_slice() == key,
            KeyRange::Interval { start, end } => {
                key >= start.as_slice() && end.as_ref().is_none_or(|e| key < e.as_slice())
            }
        }
    }

    /// True when no key can be in the range.
    pub fn is_empty(&self) -> bool {
        match self {
            KeyRange::Single(_) => false,
            KeyRange::Interval { start, end } => end.as_ref().is_some_and(|e| e <= start),
        }
    }

    /// True when the two ranges share at least one key.
    pub fn intersects(&self, other: &KeyRange) -> bool {
        if self.is_empty() || other.is_empty() {
            return false;
        }
        match (self, other) {
            (KeyRange::Single(k), r) | (r, KeyRange::Single(k)) => r.contains(k),
            (
                KeyRange::Interval { start: s1, end: e1 },
                KeyRange::Interval { start: s2, end: e2 },
            ) => {
                // Half-open intervals overlap iff each starts before the other ends.
                let before = |s: &Vec<u8>, e: &Option<Vec<u8>>| e.as_ref().is_none_or(|e| s < e);
                before(s1, e2) && before(s2, e1)
            }
        }
    }

    /// The entries of `map` whose keys are in this range, in key order.
    pub fn iter<'a, V>(
        &self,
        map: &'a BTreeMap<Vec<u8>, V>,
    ) -> Box<dyn DoubleEndedIterator<Item = (&'a Vec<u8>, &'a V)> + 'a> {
        match self {
            KeyRange::Single(k) => Box::new(map.get_key_value(k).into_iter()),
            _ if self.is_empty() => Box::new(std::iter::empty()),
            KeyRange::Interval { start, end } => {
                let lo = Bound::Included(start.as_slice());
                let hi = match end {
                    Some(e) => Bound::Excluded(e.as_slice()),
                    None => Bound::Unbounded,
                };
                Box::new(map.range::<[u8], _>((lo, hi)))
            }
        }
    }
}

/// The `range_end` selecting every key with `prefix`: the prefix with its
/// last byte below 0xff incremented and the bytes after it dropped; `[0]`
/// (all keys) when there is no such byte.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventions() {
        assert_eq!(KeyRange::new(b"a", b""), KeyRange::Single(b"a".to_vec()));
        let all_from_b = KeyRange::new(b"b", b"\0");
        assert!(all_from_b.contains(b"b") && all_from_b.contains(b"zzz"));
        assert!(!all_from_b.contains(b"a"));
        let all = KeyRange::new(b"\0", b"\0");
        assert!(all.contains(b"\0") && all.contains(b"\xff\xff"));
        let r = KeyRange::new(b"b", b"d");
        assert!(r.contains(b"b") && r.contains(b"c\xff") && !r.contains(b"d"));
        assert!(KeyRange::new(b"d", b"b").is_empty());
        assert!(KeyRange::new(b"d", b"d").is_empty());
    }

    #[test]
    fn prefixes() {
        assert_eq!(prefix_end(b"abc"), b"abd".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
        assert_eq!(prefix_end(b""), vec![0]);
        let p = KeyRange::prefix(b"/x/");
        assert!(
            p.contains(b"/x/")
                && p.contains(b"/x/\xff")
                && !p.contains(b"/x0")
                && !p.contains(b"/x")
        );
    }

    #[test]
    fn intersections() {
        let s = |k: &[u8]| KeyRange::Single(k.to_vec());
        let i = |a: &[u8], b: &[u8]| KeyRange::new(a, b);
        assert!(s(b"a").intersects(&s(b"a")));
        assert!(!s(b"a").intersects(&s(b"b")));
        assert!(s(b"b").intersects(&i(b"a", b"c")));
        assert!(!s(b"c").intersects(&i(b"a", b"c")));
        assert!(i(b"a", b"c").intersects(&i(b"b", b"d")));
        assert!(!i(b"a", b"b").intersects(&i(b"b", b"d")));
        assert!(i(b"x", b"\0").intersects(&i(b"a", b"y")));
        assert!(!i(b"c", b"a").intersects(&i(b"a", b"z")));
    }

    #[test]
    fn iterates_map_ranges() {
        let map: BTreeMap<Vec<u8>, u8> =
            [(b"a".to_vec(), 1), (b"b".to_vec(), 2), (b"c".to_vec(), 3)]
                .into_iter()
                .collect();
        let keys = |r: KeyRange| r.iter(&map).map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(keys(KeyRange::new(b"b", b"")), vec![b"b".to_vec()]);
        assert_eq!(
            keys(KeyRange::new(b"a", b"c")),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        assert_eq!(keys(KeyRange::new(b"b", b"\0")).len(), 2);
        assert!(keys(KeyRange::new(b"c", b"a")).is_empty());
    }
}
