//! The null target's key-value store: every key's latest value and version (a revision
//! counter shared by all keys, like etcd's), behind one mutex. A store can be told to lose
//! writes: every n-th put is acknowledged but not kept, the fault the lost-write check
//! must catch.

use std::collections::HashMap;
use std::sync::Mutex;

use super::locked;
use crate::{CasOutcome, Versioned};

#[derive(Default)]
struct Keys {
    values: HashMap<String, Versioned>,
    revision: i64,
    puts: u64,
}

impl Keys {
    /// Stores `value` under `key` at the next revision.
    fn write(&mut self, key: &str, value: &[u8]) {
        self.revision += 1;
        let version = self.revision;
        self.values.insert(
            key.to_string(),
            Versioned {
                value: value.to_vec(),
                version,
            },
        );
    }
}

#[derive(Default)]
pub(super) struct Store {
    keys: Mutex<Keys>,
    /// Lose every n-th put (`None`: keep all).
    lose_every: Option<u64>,
}

impl Store {
    pub(super) fn losing_every(n: u64) -> Store {
        Store {
            keys: Mutex::default(),
            lose_every: Some(n.max(1)),
        }
    }

    /// Writes `value` (unless this put is one the store loses).
    pub(super) fn put(&self, key: &str, value: &[u8]) {
        let mut keys = locked(&self.keys);
        keys.puts += 1;
        if self.lose_every.is_some_and(|n| keys.puts % n == 0) {
            return;
        }
        keys.write(key, value);
    }

    pub(super) fn get(&self, key: &str) -> Option<Versioned> {
        locked(&self.keys).values.get(key).cloned()
    }

    /// Writes `new` if `key` is at version `expected`.
    pub(super) fn compare_and_set(&self, key: &str, expected: i64, new: &[u8]) -> CasOutcome {
        let mut keys = locked(&self.keys);
        let current = keys.values.get(key);
        if current.map(|v| v.version) != Some(expected) {
            return CasOutcome::Rejected {
                current: Some(current.map(|v| v.value.clone())),
            };
        }
        keys.write(key, new);
        CasOutcome::Applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_increase_and_cas_applies_only_at_the_read_version() {
        let s = Store::default();
        s.put("k", b"a");
        let v = s.get("k").unwrap();
        assert_eq!(s.compare_and_set("k", v.version, b"b"), CasOutcome::Applied);
        assert_eq!(
            s.compare_and_set("k", v.version, b"c"),
            CasOutcome::Rejected {
                current: Some(Some(b"b".to_vec()))
            }
        );
        assert!(s.get("k").unwrap().version > v.version);
    }

    #[test]
    fn a_losing_store_drops_every_nth_put() {
        let s = Store::losing_every(2);
        s.put("a", b"1");
        s.put("b", b"2");
        s.put("c", b"3");
        assert!(s.get("a").is_some() && s.get("b").is_none() && s.get("c").is_some());
    }
}
