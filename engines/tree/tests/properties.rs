//! Seeded property tests: determinism across replicas, snapshot/restore mid-sequence,
//! a reference model of create / delete / setData / children / sequence numbering /
//! sessions, and one-shot watch semantics against the events the tree produces.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use coordbench_tree::*;

const SEEDS: u64 = 32;
const STEPS: usize = 400;

fn apply_checked(tree: &mut DataTree, zxid: i64, cmd: &Command) -> Applied {
    let applied = tree.apply(zxid, cmd);
    tree.check_invariants()
        .unwrap_or_else(|e| panic!("after {cmd:?}: {e}"));
    assert!(applied.events.iter().all(|e| e.zxid == zxid));
    applied
}

/// (1) Two replicas fed the same (encoded, decoded) commands agree on every output and
/// on their snapshots.
#[test]
fn replicas_agree() {
    for seed in 0..SEEDS {
        let mut rng = Rng::new(seed);
        let (mut a, mut b) = (DataTree::new(), DataTree::new());
        let mut now = 0;
        let mut created = 0;
        for i in 0..STEPS {
            let cmd = command(&mut rng, &a, &mut now);
            let decoded = Command::decode(&cmd.encode()).unwrap();
            assert_eq!(decoded, cmd);
            let zxid = i as i64 + 1;
            let ra = apply_checked(&mut a, zxid, &cmd);
            let rb = apply_checked(&mut b, zxid, &decoded);
            assert_eq!(ra, rb, "seed {seed} step {i}: {cmd:?}");
            created += ra
                .events
                .iter()
                .filter(|e| e.kind == EventType::NodeCreated)
                .count();
            if i % 50 == 0 {
                assert_eq!(a.snapshot(), b.snapshot());
            }
        }
        assert_eq!(a.snapshot(), b.snapshot(), "seed {seed}");
        assert!(created > 20, "seed {seed}: too few creates ({created})");
    }
}

/// (2) A replica restored from a snapshot taken mid-sequence continues exactly like the
/// one that never stopped.
#[test]
fn snapshot_restore_mid_sequence() {
    for seed in 0..SEEDS {
        let mut rng = Rng::new(1000 + seed);
        let mut a = DataTree::new();
        let mut b: Option<DataTree> = None;
        let cut = 20 + rng.below(STEPS as u64 - 40) as usize;
        let mut now = 0;
        for i in 0..STEPS {
            if i == cut {
                let snap = a.snapshot();
                let mut restored = DataTree::new();
                restored.restore(&snap).unwrap();
                assert_eq!(restored.snapshot(), snap);
                assert_eq!(restored, a);
                b = Some(restored);
            }
            let cmd = command(&mut rng, &a, &mut now);
            let ra = apply_checked(&mut a, i as i64 + 1, &cmd);
            if let Some(b) = b.as_mut() {
                let rb = apply_checked(b, i as i64 + 1, &cmd);
                assert_eq!(ra, rb, "seed {seed} step {i}");
            }
        }
        assert_eq!(b.unwrap().snapshot(), a.snapshot());
    }
}

// ---- (3) a reference model ----

#[derive(Debug, Clone, PartialEq)]
struct MNode {
    data: Option<Vec<u8>>,
    version: i32,
    /// Children created plus children deleted, as ZooKeeper counts.
    cversion: i32,
    /// Children ever created: the next sequential child's number.
    created: i64,
    kind: NodeKind,
    mtime: i64,
}

#[derive(Debug, Clone, Default)]
struct Model {
    nodes: BTreeMap<String, MNode>,
    /// id -> (timeout, deadline)
    sessions: BTreeMap<i64, (i32, i64)>,
}

/// What a command did, in terms both the model and the tree can state.
#[derive(Debug, PartialEq)]
enum Outcome {
    Err(i32),
    Created(String),
    Done,
    Multi(Vec<Option<String>>),
    Aborted(usize, i32),
    Session(i64),
    Ended(Vec<i64>),
}

fn parent_of(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => path[..i].into(),
    }
}

impl Model {
    fn new() -> Model {
        let mut m = Model::default();
        // ZooKeeper's initial cversions (see DataTree::new).
        for (p, cversion) in [
            ("/", -1),
            ("/zookeeper", -2),
            ("/zookeeper/quota", 0),
            ("/zookeeper/config", 0),
        ] {
            m.nodes.insert(
                p.into(),
                MNode {
                    data: Some(vec![]),
                    version: 0,
                    cversion,
                    created: 0,
                    kind: NodeKind::Persistent,
                    mtime: 0,
                },
            );
        }
        m
    }

    fn children(&self, path: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|p| p.as_str() != "/" && parent_of(p) == path)
            .map(|p| p[p.rfind('/').unwrap() + 1..].to_string())
            .collect()
    }

    /// One op; Ok(created path for a create).
    fn op(&mut self, session: i64, now: i64, op: &Op) -> Result<Option<String>, i32> {
        let versions_ok = |want: i32, have: i32| want == -1 || want == have;
        match op {
            Op::Create {
                path,
                data,
                mode,
                ttl_ms,
                ..
            } => {
                let valid = if mode.is_sequential() {
                    path::validate(&format!("{path}1")).is_ok()
                } else {
                    path::validate(path).is_ok()
                };
                let ttl_ok = if mode.is_ttl() {
                    *ttl_ms >= 1
                } else {
                    *ttl_ms == 0
                };
                if !valid || !ttl_ok {
                    return Err(code::BAD_ARGUMENTS);
                }
                if path == "/" && !mode.is_sequential() {
                    return Err(code::NODE_EXISTS);
                }
                if mode.is_ephemeral() && session == 0 {
                    return Err(code::BAD_ARGUMENTS);
                }
                let parent = parent_of(path);
                let Some(p) = self.nodes.get(&parent) else {
                    return Err(code::NO_NODE);
                };
                let full = if mode.is_sequential() {
                    format!("{path}{:010}", p.created)
                } else {
                    path.clone()
                };
                if self.nodes.contains_key(&full) {
                    return Err(code::NODE_EXISTS);
                }
                if matches!(p.kind, NodeKind::Ephemeral { .. }) {
                    return Err(code::NO_CHILDREN_FOR_EPHEMERALS);
                }
                let p = self.nodes.get_mut(&parent).unwrap();
                p.cversion += 1;
                p.created += 1;
                let kind = if mode.is_ephemeral() {
                    NodeKind::Ephemeral { owner: session }
                } else if *mode == CreateMode::Container {
                    NodeKind::Container
                } else if mode.is_ttl() {
                    NodeKind::Ttl { ttl_ms: *ttl_ms }
                } else {
                    NodeKind::Persistent
                };
                self.nodes.insert(
                    full.clone(),
                    MNode {
                        data: data.clone(),
                        version: 0,
                        cversion: 0,
                        created: 0,
                        kind,
                        mtime: now,
                    },
                );
                Ok(Some(full))
            }
            Op::Delete { path, version } => {
                if path::validate(path).is_err()
                    || ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"]
                        .contains(&path.as_str())
                {
                    return Err(code::BAD_ARGUMENTS);
                }
                let n = self.nodes.get(path).ok_or(code::NO_NODE)?;
                if !versions_ok(*version, n.version) {
                    return Err(code::BAD_VERSION);
                }
                if !self.children(path).is_empty() {
                    return Err(code::NOT_EMPTY);
                }
                self.remove(path);
                Ok(None)
            }
            Op::SetData {
                path,
                data,
                version,
            } => {
                if path::validate(path).is_err() {
                    return Err(code::BAD_ARGUMENTS);
                }
                let n = self.nodes.get_mut(path).ok_or(code::NO_NODE)?;
                if !versions_ok(*version, n.version) {
                    return Err(code::BAD_VERSION);
                }
                n.data = data.clone();
                n.version += 1;
                n.mtime = now;
                Ok(None)
            }
            Op::Check { path, version } => {
                if path::validate(path).is_err() {
                    return Err(code::BAD_ARGUMENTS);
                }
                let n = self.nodes.get(path).ok_or(code::NO_NODE)?;
                if !versions_ok(*version, n.version) {
                    return Err(code::BAD_VERSION);
                }
                Ok(None)
            }
            // The generator makes only open ACLs (ACL checks are tested in acl.rs and
            // semantics.rs), so the model has no ACLs to change.
            Op::SetAcl { .. } => Err(code::UNIMPLEMENTED),
            Op::Refuse { error } => Err(error.code()),
        }
    }

    /// Removes a childless node; its parent's cversion counts the delete.
    fn remove(&mut self, path: &str) {
        self.nodes.remove(path);
        if let Some(p) = self.nodes.get_mut(&parent_of(path)) {
            p.cversion += 1;
        }
    }

    fn end_session(&mut self, id: i64) {
        self.sessions.remove(&id);
        let owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.kind == NodeKind::Ephemeral { owner: id })
            .map(|(p, _)| p.clone())
            .collect();
        for p in owned {
            self.remove(&p);
        }
    }

    fn live(&mut self, session: i64, now: i64) -> bool {
        if session == 0 {
            return true;
        }
        match self.sessions.get_mut(&session) {
            Some((timeout, deadline)) => {
                *deadline = (*deadline).max(now + i64::from(*timeout));
                true
            }
            None => false,
        }
    }

    fn apply(&mut self, zxid: i64, cmd: &Command) -> Outcome {
        match cmd {
            Command::CreateSession {
                timeout_ms, now_ms, ..
            } => {
                self.sessions
                    .insert(zxid, (*timeout_ms, now_ms + i64::from(*timeout_ms)));
                Outcome::Session(zxid)
            }
            Command::CloseSession { session } => {
                let existed = self.sessions.contains_key(session);
                self.end_session(*session);
                Outcome::Ended(if existed { vec![*session] } else { vec![] })
            }
            Command::TouchSessions { sessions, now_ms } => {
                for s in sessions {
                    self.live(*s, *now_ms);
                }
                Outcome::Done
            }
            Command::RenewAllSessions { now_ms } => {
                for (timeout, deadline) in self.sessions.values_mut() {
                    *deadline = now_ms + i64::from(*timeout);
                }
                Outcome::Done
            }
            Command::ExpireSessions { sessions, now_ms } => {
                let mut ended = vec![];
                for s in sessions {
                    if self.sessions.get(s).is_some_and(|(_, d)| d <= now_ms) {
                        self.end_session(*s);
                        ended.push(*s);
                    }
                }
                Outcome::Ended(ended)
            }
            Command::Reap { paths, now_ms } => {
                for p in paths {
                    let due = self.nodes.get(p).is_some_and(|n| match n.kind {
                        NodeKind::Container => n.cversion > 0,
                        NodeKind::Ttl { ttl_ms } => now_ms - n.mtime > ttl_ms,
                        _ => false,
                    });
                    if due && self.children(p).is_empty() {
                        self.remove(p);
                    }
                }
                Outcome::Done
            }
            Command::Write {
                session,
                now_ms,
                op,
                ..
            } => {
                if !self.live(*session, *now_ms) {
                    return Outcome::Err(code::SESSION_EXPIRED);
                }
                match self.op(*session, *now_ms, op) {
                    Ok(Some(p)) => Outcome::Created(p),
                    Ok(None) => Outcome::Done,
                    Err(c) => Outcome::Err(c),
                }
            }
            Command::Multi {
                session,
                now_ms,
                ops,
                ..
            } => {
                if !self.live(*session, *now_ms) {
                    return Outcome::Err(code::SESSION_EXPIRED);
                }
                let mut scratch = self.clone();
                let mut results = vec![];
                for (i, op) in ops.iter().enumerate() {
                    match scratch.op(*session, *now_ms, op) {
                        Ok(p) => results.push(p),
                        Err(c) => return Outcome::Aborted(i, c),
                    }
                }
                *self = scratch;
                Outcome::Multi(results)
            }
        }
    }
}

fn outcome(cmd: &Command, applied: &Applied) -> Outcome {
    match (&applied.result, cmd) {
        (Err(e), _) => Outcome::Err(e.code()),
        (Ok(Response::SessionCreated { session, .. }), _) => Outcome::Session(*session),
        (Ok(Response::SessionClosed { .. }), _) | (Ok(Response::Expired { .. }), _) => {
            Outcome::Ended(applied.ended_sessions.clone())
        }
        (Ok(Response::Op(OpResult::Create { path, .. })), _) => Outcome::Created(path.clone()),
        (Ok(Response::Multi(MultiOutcome::Committed(rs))), _) => Outcome::Multi(
            rs.iter()
                .map(|r| match r {
                    OpResult::Create { path, .. } => Some(path.clone()),
                    _ => None,
                })
                .collect(),
        ),
        (Ok(Response::Multi(MultiOutcome::Aborted { index, error })), _) => {
            Outcome::Aborted(*index, error.code())
        }
        _ => Outcome::Done,
    }
}

fn assert_same(model: &Model, tree: &DataTree, ctx: &str) {
    assert_eq!(tree.node_count(), model.nodes.len(), "{ctx}: node count");
    for (p, n) in &model.nodes {
        let (data, stat) = tree
            .get_data(p)
            .unwrap_or_else(|e| panic!("{ctx}: {p}: {e}"));
        assert_eq!(data, n.data.as_deref(), "{ctx}: {p} data");
        assert_eq!(stat.version, n.version, "{ctx}: {p} version");
        assert_eq!(stat.cversion, n.cversion, "{ctx}: {p} cversion");
        assert_eq!(stat.mtime, n.mtime, "{ctx}: {p} mtime");
        assert_eq!(
            stat.ephemeral_owner,
            n.kind.client_ephemeral_owner(),
            "{ctx}: {p} owner"
        );
        let (children, stat) = tree.children(p).unwrap();
        assert_eq!(children, model.children(p), "{ctx}: {p} children");
        assert_eq!(stat.num_children as usize, children.len());
        assert_eq!(
            stat.data_length as usize,
            n.data.as_ref().map_or(0, Vec::len)
        );
    }
    let sessions: Vec<i64> = tree.sessions().map(|(id, _)| id).collect();
    let expected: Vec<i64> = model.sessions.keys().copied().collect();
    assert_eq!(sessions, expected, "{ctx}: sessions");
    for (id, s) in tree.sessions() {
        assert_eq!(
            s.deadline_ms, model.sessions[&id].1,
            "{ctx}: deadline of {id}"
        );
    }
}

#[test]
fn model_agrees() {
    for seed in 0..SEEDS {
        let mut rng = Rng::new(2000 + seed);
        let mut tree = DataTree::new();
        let mut model = Model::new();
        let mut now = 0;
        let mut sequential = 0;
        for i in 0..STEPS {
            let cmd = command(&mut rng, &tree, &mut now);
            let zxid = i as i64 + 1;
            let applied = apply_checked(&mut tree, zxid, &cmd);
            let expected = model.apply(zxid, &cmd);
            let ctx = format!("seed {seed} step {i}: {cmd:?}");
            assert_eq!(outcome(&cmd, &applied), expected, "{ctx}");
            if let Outcome::Created(p) = &expected {
                sequential +=
                    usize::from(p.len() > 10 && p.ends_with(|c: char| c.is_ascii_digit()));
            }
            assert_same(&model, &tree, &ctx);
        }
        assert!(
            sequential > 0,
            "seed {seed}: no sequential create succeeded"
        );
    }
}

/// (4) Applying the tree's events to a WatchManager fires each one-shot watch exactly
/// at the first event that matches it, and persistent ones at every matching event.
#[test]
fn watches_fire_per_their_kind() {
    fn matches(kind: WatchKind, watched: &str, e: &WatchEvent) -> bool {
        match kind {
            WatchKind::Data => e.path == watched && e.kind != EventType::NodeChildrenChanged,
            WatchKind::Child => {
                e.path == watched
                    && matches!(
                        e.kind,
                        EventType::NodeChildrenChanged | EventType::NodeDeleted
                    )
            }
            WatchKind::Persistent => e.path == watched,
            WatchKind::PersistentRecursive => {
                path::is_within(&e.path, watched) && e.kind != EventType::NodeChildrenChanged
            }
        }
    }
    let kinds = [
        WatchKind::Data,
        WatchKind::Child,
        WatchKind::Persistent,
        WatchKind::PersistentRecursive,
    ];
    for seed in 0..SEEDS {
        let mut rng = Rng::new(3000 + seed);
        let mut tree = DataTree::new();
        let mut manager: WatchManager<u32> = WatchManager::new();
        // The reference: live registrations.
        let mut live: BTreeSet<(u32, String, WatchKind)> = BTreeSet::new();
        let mut now = 0;
        for i in 0..STEPS {
            if rng.chance(20) {
                let w = rng.below(4) as u32;
                let p = rng.pick(&PATHS[..7]).to_string();
                let k = *rng.pick(&kinds);
                manager.add(&p, k, w);
                live.insert((w, p, k));
            }
            let cmd = command(&mut rng, &tree, &mut now);
            let applied = apply_checked(&mut tree, i as i64 + 1, &cmd);
            for e in &applied.events {
                let fired = manager.trigger(e);
                let hit: Vec<(u32, String, WatchKind)> = live
                    .iter()
                    .filter(|(_, p, k)| matches(*k, p, e))
                    .cloned()
                    .collect();
                let expected: BTreeSet<u32> = hit.iter().map(|(w, _, _)| *w).collect();
                assert_eq!(
                    fired,
                    expected.into_iter().collect::<Vec<_>>(),
                    "seed {seed} step {i}: {e:?}"
                );
                for h in hit {
                    if matches!(h.2, WatchKind::Data | WatchKind::Child) {
                        live.remove(&h);
                    }
                }
            }
            assert_eq!(manager.len(), live.len());
        }
    }
}
