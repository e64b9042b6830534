//! A client-side copy of the keys under one prefix, read once and then kept current by
//! applying watch events, so followers never re-read per event. It answers the two
//! questions the watch handles ask: which names exist (service members), and which key was
//! created first (the election's leader).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use etcd_client::KeyValue;

/// One key's state as the view needs it. The value is shared: the watchers of one key on
/// one stream hold one copy of each of its values (see watch_mux.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub create_rev: i64,
    pub value: Bytes,
}

/// A watch event, reduced to what the watch handles use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    Put { key: Bytes, entry: Entry },
    Delete { key: Bytes },
}

/// The entry a key-value read or watched gives (its value copied once).
pub(super) fn entry(kv: &KeyValue) -> Entry {
    Entry {
        create_rev: kv.create_revision(),
        value: Bytes::copy_from_slice(kv.value()),
    }
}

/// The keys under `prefix`, by full key.
#[derive(Debug, Clone)]
pub(super) struct PrefixView {
    prefix: Vec<u8>,
    entries: BTreeMap<Bytes, Entry>,
}

impl PrefixView {
    /// The view after a range read of the prefix.
    pub fn from_kvs(prefix: &str, kvs: &[KeyValue]) -> PrefixView {
        PrefixView {
            prefix: prefix.as_bytes().to_vec(),
            entries: kvs
                .iter()
                .map(|kv| (Bytes::copy_from_slice(kv.key()), entry(kv)))
                .collect(),
        }
    }

    /// An empty view of `prefix`.
    #[cfg(test)]
    pub fn empty(prefix: &str) -> PrefixView {
        PrefixView {
            prefix: prefix.as_bytes().to_vec(),
            entries: BTreeMap::new(),
        }
    }

    /// Applies events in revision order; keys outside the prefix are ignored.
    pub fn apply(&mut self, changes: impl IntoIterator<Item = Change>) {
        for change in changes {
            match change {
                Change::Put { key, entry } if key.starts_with(&self.prefix) => {
                    self.entries.insert(key, entry);
                }
                Change::Delete { key } => {
                    self.entries.remove(&key);
                }
                Change::Put { .. } => {}
            }
        }
    }

    /// The key names below the prefix (lossy UTF-8).
    pub fn names(&self) -> BTreeSet<String> {
        self.entries
            .keys()
            .map(|k| String::from_utf8_lossy(&k[self.prefix.len()..]).into_owned())
            .collect()
    }

    /// The entry with the lowest create revision: the queue's head.
    pub fn first_created(&self) -> Option<&Entry> {
        self.entries.values().min_by_key(|e| e.create_rev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, create_rev: i64, value: &str) -> Change {
        Change::Put {
            key: Bytes::copy_from_slice(key.as_bytes()),
            entry: Entry {
                create_rev,
                value: Bytes::copy_from_slice(value.as_bytes()),
            },
        }
    }

    fn delete(key: &str) -> Change {
        Change::Delete {
            key: Bytes::copy_from_slice(key.as_bytes()),
        }
    }

    fn names(view: &PrefixView) -> Vec<String> {
        view.names().into_iter().collect()
    }

    #[test]
    fn members_follow_puts_and_deletes_in_order() {
        let mut view = PrefixView::empty("/s/web/");
        view.apply([put("/s/web/a", 5, "x"), put("/s/web/b", 6, "y")]);
        assert_eq!(names(&view), ["a", "b"]);
        // A delete and a re-registration in one response: the order of events decides.
        view.apply([
            delete("/s/web/a"),
            put("/s/web/a", 9, "z"),
            delete("/s/web/b"),
        ]);
        assert_eq!(names(&view), ["a"]);
        view.apply([delete("/s/web/a")]);
        assert!(view.names().is_empty());
    }

    #[test]
    fn keys_outside_the_prefix_and_unknown_deletes_are_ignored() {
        let mut view = PrefixView::empty("/s/web/");
        view.apply([put("/s/webby/a", 5, ""), delete("/s/web/never")]);
        assert!(view.names().is_empty());
    }

    #[test]
    fn the_head_is_the_lowest_create_revision_not_the_lowest_key() {
        let mut view = PrefixView::empty("/e/");
        assert_eq!(view.first_created(), None);
        view.apply([put("/e/ff", 7, "first"), put("/e/01", 8, "second")]);
        assert_eq!(view.first_created().map(|e| e.create_rev), Some(7));
        // A value update keeps the create revision (a leader proclaiming a new value).
        view.apply([put("/e/ff", 7, "again")]);
        assert_eq!(
            view.first_created().map(|e| &e.value[..]),
            Some(&b"again"[..])
        );
        view.apply([delete("/e/ff")]);
        assert_eq!(view.first_created().map(|e| e.create_rev), Some(8));
    }
}
