//! [`WatchManager`]: which watcher (a server's connection) watches what, and whom each
//! [`WatchEvent`] notifies.
//!
//! Kinds, as a ZooKeeper server keeps them:
//! - [`WatchKind::Data`]: one-shot, set by getData and by exists (on a node that exists
//!   or not); fired by NodeCreated, NodeDataChanged and NodeDeleted of its path.
//! - [`WatchKind::Child`]: one-shot, set by getChildren; fired by NodeChildrenChanged and
//!   NodeDeleted of its path.
//! - [`WatchKind::Persistent`] (addWatch mode 0): every event of its path, kept.
//! - [`WatchKind::PersistentRecursive`] (addWatch mode 1): NodeCreated, NodeDataChanged
//!   and NodeDeleted of its path and every path below it (never NodeChildrenChanged), kept.
//!
//! A watcher is notified at most once per event whatever number of its watches match.
//! [`WatchManager::resume`] re-registers a reconnecting client's watches (SetWatches),
//! firing at once those whose condition changed after the zxid the client had seen.

use std::collections::{BTreeMap, BTreeSet};

use crate::path;
use crate::tree::DataTree;
use crate::types::{EventType, WatchEvent};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WatchKind {
    Data,
    Child,
    Persistent,
    PersistentRecursive,
}

const KINDS: [WatchKind; 4] = [
    WatchKind::Data,
    WatchKind::Child,
    WatchKind::Persistent,
    WatchKind::PersistentRecursive,
];

/// The paths a reconnecting client still watches (ZooKeeper's SetWatches / SetWatches2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchSet {
    pub data: Vec<String>,
    pub exist: Vec<String>,
    pub child: Vec<String>,
    pub persistent: Vec<String>,
    pub persistent_recursive: Vec<String>,
}

#[derive(Debug, Clone)]
struct PathWatchers<W> {
    by_kind: [BTreeSet<W>; 4],
}

impl<W> Default for PathWatchers<W> {
    fn default() -> Self {
        PathWatchers {
            by_kind: Default::default(),
        }
    }
}

impl<W> PathWatchers<W> {
    fn is_empty(&self) -> bool {
        self.by_kind.iter().all(BTreeSet::is_empty)
    }
}

/// Watch registrations of one server, keyed by watcher `W` (e.g. a connection id).
#[derive(Debug, Clone)]
pub struct WatchManager<W> {
    paths: BTreeMap<String, PathWatchers<W>>,
    by_watcher: BTreeMap<W, BTreeSet<(String, WatchKind)>>,
    /// Number of recursive registrations: when 0, events skip the ancestor walk.
    recursive: usize,
}

impl<W> Default for WatchManager<W> {
    fn default() -> Self {
        WatchManager {
            paths: BTreeMap::new(),
            by_watcher: BTreeMap::new(),
            recursive: 0,
        }
    }
}

impl<W: Ord + Copy> WatchManager<W> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a watch; false if it was already there.
    pub fn add(&mut self, path: &str, kind: WatchKind, watcher: W) -> bool {
        let set = &mut self.paths.entry(path.to_string()).or_default().by_kind[kind as usize];
        if !set.insert(watcher) {
            return false;
        }
        if kind == WatchKind::PersistentRecursive {
            self.recursive += 1;
        }
        self.by_watcher
            .entry(watcher)
            .or_default()
            .insert((path.to_string(), kind));
        true
    }

    /// Removes a watch; false if there was none.
    pub fn remove(&mut self, path: &str, kind: WatchKind, watcher: W) -> bool {
        let Some(pw) = self.paths.get_mut(path) else {
            return false;
        };
        if !pw.by_kind[kind as usize].remove(&watcher) {
            return false;
        }
        if pw.is_empty() {
            self.paths.remove(path);
        }
        if kind == WatchKind::PersistentRecursive {
            self.recursive -= 1;
        }
        if let Some(mine) = self.by_watcher.get_mut(&watcher) {
            mine.remove(&(path.to_string(), kind));
            if mine.is_empty() {
                self.by_watcher.remove(&watcher);
            }
        }
        true
    }

    pub fn contains(&self, path: &str, kind: WatchKind, watcher: W) -> bool {
        self.paths
            .get(path)
            .is_some_and(|pw| pw.by_kind[kind as usize].contains(&watcher))
    }

    /// The kinds `watcher` has on `path`.
    pub fn kinds(&self, path: &str, watcher: W) -> Vec<WatchKind> {
        KINDS
            .into_iter()
            .filter(|k| self.contains(path, *k, watcher))
            .collect()
    }

    /// Drops every watch of a watcher (its connection closed); returns how many.
    pub fn remove_watcher(&mut self, watcher: W) -> usize {
        let Some(mine) = self.by_watcher.remove(&watcher) else {
            return 0;
        };
        for (path, kind) in &mine {
            if let Some(pw) = self.paths.get_mut(path) {
                pw.by_kind[*kind as usize].remove(&watcher);
                if pw.is_empty() {
                    self.paths.remove(path);
                }
            }
            if *kind == WatchKind::PersistentRecursive {
                self.recursive -= 1;
            }
        }
        mine.len()
    }

    /// The watchers `event` notifies, ascending, each once; one-shot watches it fires are
    /// removed.
    pub fn trigger(&mut self, event: &WatchEvent) -> Vec<W> {
        let mut fired = BTreeSet::new();
        let one_shot: &[WatchKind] = match event.kind {
            EventType::NodeCreated | EventType::NodeDataChanged => &[WatchKind::Data],
            EventType::NodeDeleted => &[WatchKind::Data, WatchKind::Child],
            EventType::NodeChildrenChanged => &[WatchKind::Child],
        };
        if let Some(pw) = self.paths.get_mut(&event.path) {
            for kind in one_shot {
                let taken = std::mem::take(&mut pw.by_kind[*kind as usize]);
                for w in taken {
                    fired.insert(w);
                    if let Some(mine) = self.by_watcher.get_mut(&w) {
                        mine.remove(&(event.path.clone(), *kind));
                        if mine.is_empty() {
                            self.by_watcher.remove(&w);
                        }
                    }
                }
            }
            fired.extend(pw.by_kind[WatchKind::Persistent as usize].iter().copied());
            if pw.is_empty() {
                self.paths.remove(&event.path);
            }
        }
        if self.recursive > 0 && event.kind != EventType::NodeChildrenChanged {
            for p in path::self_and_ancestors(&event.path) {
                if let Some(pw) = self.paths.get(p) {
                    fired.extend(
                        pw.by_kind[WatchKind::PersistentRecursive as usize]
                            .iter()
                            .copied(),
                    );
                }
            }
        }
        fired.into_iter().collect()
    }

    /// Re-registers a reconnecting client's watches as of `rel_zxid` (the last zxid it
    /// saw) and returns the events it missed, fired instead of registered (zxid -1, as
    /// ZooKeeper sends them): a data watch whose node changed or went, an exist watch
    /// whose node now exists, a child watch whose children changed or whose node went.
    /// Persistent watches are registered again without events.
    pub fn resume(
        &mut self,
        tree: &DataTree,
        watcher: W,
        rel_zxid: i64,
        set: &WatchSet,
    ) -> Vec<WatchEvent> {
        let mut fire = Vec::new();
        let mut missed = |kind, path: &str| {
            fire.push(WatchEvent {
                kind,
                path: path.to_string(),
                zxid: -1,
                // ZooKeeper's setWatches notifies without an ACL check.
                acl: Vec::new(),
            })
        };
        for p in &set.data {
            match tree.stat(p) {
                None => missed(EventType::NodeDeleted, p),
                Some(st) if st.mzxid > rel_zxid => missed(EventType::NodeDataChanged, p),
                Some(_) => {
                    self.add(p, WatchKind::Data, watcher);
                }
            }
        }
        for p in &set.exist {
            match tree.stat(p) {
                Some(_) => missed(EventType::NodeCreated, p),
                None => {
                    self.add(p, WatchKind::Data, watcher);
                }
            }
        }
        for p in &set.child {
            match tree.stat(p) {
                None => missed(EventType::NodeDeleted, p),
                Some(st) if st.pzxid > rel_zxid => missed(EventType::NodeChildrenChanged, p),
                Some(_) => {
                    self.add(p, WatchKind::Child, watcher);
                }
            }
        }
        for p in &set.persistent {
            self.add(p, WatchKind::Persistent, watcher);
        }
        for p in &set.persistent_recursive {
            self.add(p, WatchKind::PersistentRecursive, watcher);
        }
        fire
    }

    /// Registered (path, kind, watcher) triples (ZooKeeper's `zk_watch_count`).
    pub fn len(&self) -> usize {
        self.by_watcher.values().map(BTreeSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_watcher.is_empty()
    }

    /// Distinct watched paths.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Command, Op};
    use crate::types::CreateMode;

    fn ev(kind: EventType, path: &str) -> WatchEvent {
        WatchEvent {
            kind,
            path: path.into(),
            zxid: 1,
            acl: Vec::new(),
        }
    }

    #[test]
    fn one_shot_watches_fire_once() {
        let mut m = WatchManager::new();
        m.add("/a", WatchKind::Data, 1);
        m.add("/a", WatchKind::Child, 2);
        m.add("/a", WatchKind::Data, 2);
        assert_eq!(m.len(), 3);
        assert_eq!(m.trigger(&ev(EventType::NodeDataChanged, "/a")), vec![1, 2]);
        assert_eq!(
            m.trigger(&ev(EventType::NodeDataChanged, "/a")),
            Vec::<i32>::new()
        );
        assert_eq!(
            m.trigger(&ev(EventType::NodeChildrenChanged, "/b")),
            Vec::<i32>::new()
        );
        assert_eq!(m.trigger(&ev(EventType::NodeDeleted, "/a")), vec![2]);
        assert!(m.is_empty());
        assert_eq!(m.path_count(), 0);
    }

    #[test]
    fn persistent_watches_stay() {
        let mut m = WatchManager::new();
        m.add("/a", WatchKind::Persistent, 1);
        m.add("/a", WatchKind::PersistentRecursive, 2);
        m.add("/", WatchKind::PersistentRecursive, 3);
        for _ in 0..2 {
            assert_eq!(
                m.trigger(&ev(EventType::NodeDataChanged, "/a")),
                vec![1, 2, 3]
            );
        }
        assert_eq!(
            m.trigger(&ev(EventType::NodeChildrenChanged, "/a")),
            vec![1]
        );
        assert_eq!(m.trigger(&ev(EventType::NodeCreated, "/a/b/c")), vec![2, 3]);
        assert_eq!(m.trigger(&ev(EventType::NodeCreated, "/ab")), vec![3]);
        assert_eq!(m.remove_watcher(3), 1);
        assert_eq!(
            m.trigger(&ev(EventType::NodeDeleted, "/x")),
            Vec::<i32>::new()
        );
        assert!(m.remove("/a", WatchKind::Persistent, 1));
        assert!(!m.remove("/a", WatchKind::Persistent, 1));
        assert_eq!(m.kinds("/a", 2), vec![WatchKind::PersistentRecursive]);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn resume_fires_what_changed() {
        let mut t = DataTree::new();
        let write = |op| Command::Write {
            session: 0,
            now_ms: 0,
            op,
            auth: vec![],
        };
        let create = |p: &str| {
            write(Op::Create {
                path: p.into(),
                data: Some(vec![]),
                mode: CreateMode::Persistent,
                ttl_ms: 0,
                acl: vec![crate::Acl::open()],
            })
        };
        t.apply(1, &create("/same"));
        t.apply(2, &create("/changed"));
        t.apply(3, &create("/parent"));
        t.apply(
            4,
            &write(Op::SetData {
                path: "/changed".into(),
                data: Some(b"x".to_vec()),
                version: -1,
            }),
        );
        t.apply(5, &create("/parent/kid"));
        let set = WatchSet {
            data: vec!["/same".into(), "/changed".into(), "/gone".into()],
            exist: vec!["/same".into(), "/absent".into()],
            child: vec!["/parent".into(), "/same".into()],
            persistent: vec!["/p".into()],
            persistent_recursive: vec!["/r".into()],
        };
        let mut m = WatchManager::new();
        let fired = m.resume(&t, 7, 3, &set);
        let fired: Vec<(EventType, &str)> =
            fired.iter().map(|e| (e.kind, e.path.as_str())).collect();
        assert_eq!(
            fired,
            vec![
                (EventType::NodeDataChanged, "/changed"),
                (EventType::NodeDeleted, "/gone"),
                (EventType::NodeCreated, "/same"),
                (EventType::NodeChildrenChanged, "/parent"),
            ]
        );
        assert!(m.contains("/same", WatchKind::Data, 7));
        assert!(m.contains("/absent", WatchKind::Data, 7));
        assert!(m.contains("/same", WatchKind::Child, 7));
        assert!(m.contains("/p", WatchKind::Persistent, 7));
        assert!(m.contains("/r", WatchKind::PersistentRecursive, 7));
        assert_eq!(m.len(), 5);
    }
}
