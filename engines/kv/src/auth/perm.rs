//! Permissions on keys and key ranges as etcd's auth grants them (READ, WRITE, READWRITE
//! on one key, a `[key, range_end)` interval, a prefix or everything from a key on), and
//! the check of a request's key or range against the permissions of a user's roles.
//!
//! A request's range is permitted when the union of the granted intervals covers all of
//! it, as etcd's merged range-permission cache decides: two adjacent grants `[a, b)` and
//! `[b, c)` together permit `[a, c)`; a single-key grant is the interval `[key, key\0)`.

use serde::{Deserialize, Serialize};

use crate::key_range::KeyRange;

/// etcd's `authpb.Permission.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PermType {
    Read,
    Write,
    ReadWrite,
}

/// What a request needs of a key: to read it or to write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl PermType {
    /// The protobuf enum value (READ = 0, WRITE = 1, READWRITE = 2); `None` for others.
    pub fn from_proto(v: i32) -> Option<PermType> {
        match v {
            0 => Some(PermType::Read),
            1 => Some(PermType::Write),
            2 => Some(PermType::ReadWrite),
            _ => None,
        }
    }

    pub fn to_proto(self) -> i32 {
        match self {
            PermType::Read => 0,
            PermType::Write => 1,
            PermType::ReadWrite => 2,
        }
    }

    fn allows(self, access: Access) -> bool {
        matches!(
            (self, access),
            (PermType::ReadWrite, _)
                | (PermType::Read, Access::Read)
                | (PermType::Write, Access::Write)
        )
    }
}

/// One grant of a role: `range_end` follows etcd's convention (empty: the key alone;
/// `[0]`: every key from `key` on; otherwise `[key, range_end)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    pub perm_type: PermType,
    pub key: Vec<u8>,
    pub range_end: Vec<u8>,
}

/// A half-open interval of keys; `end: None` is unbounded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Span {
    begin: Vec<u8>,
    end: Option<Vec<u8>>,
}

impl Span {
    fn of(key: &[u8], range_end: &[u8]) -> Span {
        match KeyRange::new(key, range_end) {
            KeyRange::Single(k) => {
                let mut end = k.clone();
                end.push(0);
                Span {
                    begin: k,
                    end: Some(end),
                }
            }
            KeyRange::Interval { start, end } => Span { begin: start, end },
        }
    }

    fn is_empty(&self) -> bool {
        self.end.as_ref().is_some_and(|e| *e <= self.begin)
    }
}

/// Whether `perms` grant `access` on the key (`range_end` empty) or on the whole range
/// `(key, range_end)`. An empty or inverted range is refused, as etcd's interval check
/// refuses it.
pub fn permits<'a>(
    perms: impl IntoIterator<Item = &'a Permission>,
    access: Access,
    key: &[u8],
    range_end: &[u8],
) -> bool {
    let want = Span::of(key, range_end);
    if want.is_empty() {
        return false;
    }
    let mut granted: Vec<Span> = perms
        .into_iter()
        .filter(|p| p.perm_type.allows(access))
        .map(|p| Span::of(&p.key, &p.range_end))
        .filter(|s| !s.is_empty())
        .collect();
    granted.sort_by(|a, b| a.begin.cmp(&b.begin));
    covers(&granted, &want)
}

/// Sweeps the grants (sorted by start) from the wanted start: covered once a grant reaches
/// past the wanted end, refused at the first gap.
fn covers(granted: &[Span], want: &Span) -> bool {
    let mut cursor: &[u8] = &want.begin;
    for span in granted {
        if span.begin.as_slice() > cursor {
            return false;
        }
        match &span.end {
            None => return true,
            Some(end) if end.as_slice() > cursor => cursor = end,
            Some(_) => {}
        }
        if want.end.as_deref().is_some_and(|e| cursor >= e) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_range::prefix_end;

    fn perm(perm_type: PermType, key: &str, range_end: &[u8]) -> Permission {
        Permission {
            perm_type,
            key: key.as_bytes().to_vec(),
            range_end: range_end.to_vec(),
        }
    }

    fn can(perms: &[Permission], access: Access, key: &str, range_end: &[u8]) -> bool {
        permits(perms, access, key.as_bytes(), range_end)
    }

    #[test]
    fn a_single_key_grant_covers_that_key_only() {
        let p = [perm(PermType::Read, "foo", b"")];
        assert!(can(&p, Access::Read, "foo", b""));
        assert!(!can(&p, Access::Read, "foo1", b""));
        assert!(!can(&p, Access::Read, "fo", b""));
        assert!(!can(&p, Access::Write, "foo", b""));
        // The range holding just "foo" is the key itself.
        assert!(can(&p, Access::Read, "foo", b"foo\0"));
        assert!(!can(&p, Access::Read, "foo", b"fop"));
    }

    #[test]
    fn ranges_prefixes_and_from_key() {
        let p = [
            perm(PermType::ReadWrite, "a", b"c"),
            perm(PermType::Write, "dir/", &prefix_end(b"dir/")),
            perm(PermType::Read, "x", &[0]),
        ];
        assert!(can(&p, Access::Write, "b", b""));
        assert!(can(&p, Access::Read, "a", b"c"));
        assert!(can(&p, Access::Read, "a", b"b"));
        assert!(!can(&p, Access::Read, "a", b"c\0"));
        assert!(!can(&p, Access::Read, "c", b""));
        assert!(can(&p, Access::Write, "dir/x/y", b""));
        assert!(!can(&p, Access::Read, "dir/x", b""));
        assert!(can(&p, Access::Write, "dir/", &prefix_end(b"dir/")));
        assert!(!can(&p, Access::Write, "dir", &prefix_end(b"dir")));
        assert!(can(&p, Access::Read, "zzz", b""));
        assert!(can(&p, Access::Read, "x", &[0]));
        assert!(can(&p, Access::Read, "y", &[0]));
        assert!(!can(&p, Access::Read, "w", &[0]));
        assert!(!can(&p, Access::Write, "x", b""));
    }

    #[test]
    fn adjacent_and_overlapping_grants_merge() {
        let p = [
            perm(PermType::Read, "c", b"e"),
            perm(PermType::ReadWrite, "a", b"c"),
            perm(PermType::Read, "d", b"f"),
        ];
        assert!(can(&p, Access::Read, "a", b"f"));
        assert!(!can(&p, Access::Read, "a", b"f\0"));
        assert!(!can(&p, Access::Write, "a", b"d"));
        let gap = [
            perm(PermType::Read, "a", b"b"),
            perm(PermType::Read, "b\0", b"c"),
        ];
        assert!(!can(&gap, Access::Read, "a", b"c"));
        assert!(can(&gap, Access::Read, "b\0", b""));
        assert!(!can(&gap, Access::Read, "b", b""));
    }

    #[test]
    fn every_key_and_empty_ranges() {
        let all = [perm(PermType::ReadWrite, "", &[0])];
        assert!(can(&all, Access::Write, "anything", b""));
        assert!(can(&all, Access::Read, "", &[0]));
        assert!(can(&all, Access::Read, "\0", &[0]));
        // Inverted and empty ranges are refused even with every key granted.
        assert!(!can(&all, Access::Read, "b", b"a"));
        assert!(!can(&all, Access::Read, "b", b"b"));
        assert!(!can(&[], Access::Read, "k", b""));
        // A grant whose range is inverted grants nothing.
        let inverted = [perm(PermType::Read, "z", b"a")];
        assert!(!can(&inverted, Access::Read, "m", b""));
    }
}
