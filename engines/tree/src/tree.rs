//! [`DataTree`]: the state machine. `apply` is the only mutation; the query methods serve
//! local reads. No I/O, clock, threads or hash-ordered containers: equal command sequences
//! give equal states, outputs and snapshots.

use std::collections::{BTreeMap, BTreeSet};

use crate::acl::{self, perm, Acl, Id};
use crate::command::{Applied, Command, MultiOutcome, Op, Response};
use crate::error::TreeError;
use crate::node::{Node, Session};
use crate::path;
use crate::types::{NodeKind, Stat, WatchEvent};
use crate::write::{Ctx, Undo, PROTECTED};

/// ZooKeeper's data model as a deterministic state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataTree {
    pub(crate) nodes: BTreeMap<String, Node>,
    pub(crate) sessions: BTreeMap<i64, Session>,
    /// Derived indexes for the leader's container / TTL check.
    pub(crate) containers: BTreeSet<String>,
    pub(crate) ttls: BTreeSet<String>,
    /// zxid of the last applied command (ZooKeeper's lastProcessedZxid).
    pub(crate) last_zxid: i64,
}

impl Default for DataTree {
    fn default() -> Self {
        DataTree::new()
    }
}

/// What one command accumulates besides its result.
struct Effects {
    events: Vec<WatchEvent>,
    ended: Vec<i64>,
}

impl DataTree {
    /// The tree every ZooKeeper starts with: `/`, `/zookeeper`, `/zookeeper/quota` and
    /// `/zookeeper/config`, at zxid 0, with the stats and ACLs ZooKeeper 3.8 shows clients
    /// (tests/zk_differential.rs reads them from a real server): `/` starts at cversion -1
    /// and `/zookeeper` at -2, and `/zookeeper/config` is readable by anyone and writable
    /// by no one, at aversion -1.
    pub fn new() -> Self {
        let mut tree = DataTree {
            nodes: BTreeMap::new(),
            sessions: BTreeMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            last_zxid: 0,
        };
        for p in PROTECTED {
            tree.insert_node(p, Node::system());
        }
        for (path, cversion) in [(path::ROOT, -1), ("/zookeeper", -2)] {
            if let Some(n) = tree.nodes.get_mut(path) {
                n.cversion = cversion;
            }
        }
        if let Some(n) = tree.nodes.get_mut("/zookeeper/config") {
            n.acl = vec![Acl {
                perms: perm::READ,
                ..Acl::open()
            }];
            n.aversion = -1;
        }
        tree
    }

    /// zxid of the last applied command; 0 for a new tree.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Applies the command at `zxid` (its log position). zxids must increase; gaps are
    /// fine. An old zxid changes nothing and yields [`TreeError::AlreadyApplied`].
    pub fn apply(&mut self, zxid: i64, cmd: &Command) -> Applied {
        let mut fx = Effects {
            events: Vec::new(),
            ended: Vec::new(),
        };
        if zxid <= self.last_zxid {
            let err = TreeError::AlreadyApplied {
                zxid,
                last: self.last_zxid,
            };
            return applied(zxid, Err(err), fx);
        }
        self.last_zxid = zxid;
        let result = match cmd {
            Command::CreateSession {
                timeout_ms,
                password,
                now_ms,
            } => self.create_session(zxid, *timeout_ms, password, *now_ms),
            Command::CloseSession { session } => {
                let existed = self.end_session(*session, zxid, &mut fx);
                Ok(Response::SessionClosed { existed })
            }
            Command::TouchSessions { sessions, now_ms } => {
                let mut missing = Vec::new();
                for id in sessions {
                    match self.sessions.get_mut(id) {
                        Some(s) => s.renew(*now_ms),
                        None => missing.push(*id),
                    }
                }
                Ok(Response::Touched { missing })
            }
            Command::RenewAllSessions { now_ms } => {
                for s in self.sessions.values_mut() {
                    s.deadline_ms = now_ms.saturating_add(i64::from(s.timeout_ms));
                }
                Ok(Response::RenewedAll {
                    sessions: self.sessions.len(),
                })
            }
            Command::ExpireSessions { sessions, now_ms } => {
                let mut expired = Vec::new();
                for &id in sessions {
                    let due = self
                        .sessions
                        .get(&id)
                        .is_some_and(|s| s.deadline_ms <= *now_ms);
                    if due && self.end_session(id, zxid, &mut fx) {
                        expired.push(id);
                    }
                }
                Ok(Response::Expired { sessions: expired })
            }
            Command::Write {
                session,
                now_ms,
                op,
                auth,
            } => self.check_session(*session, *now_ms).and_then(|()| {
                let ctx = Ctx {
                    zxid,
                    now_ms: *now_ms,
                    session: *session,
                    auth,
                };
                self.exec(&ctx, op, &mut fx.events)
                    .map(|(r, _)| Response::Op(r))
            }),
            Command::Multi {
                session,
                now_ms,
                ops,
                auth,
            } => self.check_session(*session, *now_ms).map(|()| {
                let ctx = Ctx {
                    zxid,
                    now_ms: *now_ms,
                    session: *session,
                    auth,
                };
                Response::Multi(self.multi(&ctx, ops, &mut fx.events))
            }),
            Command::Reap { paths, now_ms } => {
                let mut reaped = Vec::new();
                for p in paths {
                    if self.reapable(p, *now_ms) && self.check_delete(p, -1).is_ok() {
                        self.delete_node(p, zxid, &mut fx.events);
                        reaped.push(p.clone());
                    }
                }
                Ok(Response::Reaped { paths: reaped })
            }
        };
        applied(zxid, result, fx)
    }

    fn create_session(
        &mut self,
        zxid: i64,
        timeout_ms: i32,
        password: &[u8],
        now_ms: i64,
    ) -> Result<Response, TreeError> {
        if timeout_ms <= 0 {
            return Err(TreeError::BadArguments(format!(
                "session timeout {timeout_ms}"
            )));
        }
        // zxids are unique, so the id is too.
        self.sessions.insert(
            zxid,
            Session {
                timeout_ms,
                password: password.to_vec(),
                deadline_ms: now_ms.saturating_add(i64::from(timeout_ms)),
                ephemerals: BTreeSet::new(),
            },
        );
        Ok(Response::SessionCreated {
            session: zxid,
            timeout_ms,
        })
    }

    /// A write's session must be live; the write renews it. Session 0 is "none".
    fn check_session(&mut self, session: i64, now_ms: i64) -> Result<(), TreeError> {
        if session == 0 {
            return Ok(());
        }
        let s = self
            .sessions
            .get_mut(&session)
            .ok_or(TreeError::SessionExpired)?;
        s.renew(now_ms);
        Ok(())
    }

    /// Ends a session, deleting its ephemerals (in path order). False if unknown.
    fn end_session(&mut self, id: i64, zxid: i64, fx: &mut Effects) -> bool {
        let Some(session) = self.sessions.get(&id) else {
            return false;
        };
        let doomed: Vec<String> = session.ephemerals.iter().cloned().collect();
        for p in doomed {
            // Ephemerals have no children, so every delete succeeds.
            self.delete_node(&p, zxid, &mut fx.events);
        }
        self.sessions.remove(&id);
        fx.ended.push(id);
        true
    }

    /// All ops or none: on the first failure, the ops before it are undone in reverse
    /// and their events dropped.
    fn multi(&mut self, ctx: &Ctx, ops: &[Op], events: &mut Vec<WatchEvent>) -> MultiOutcome {
        let mark = events.len();
        let mut undos: Vec<Undo> = Vec::with_capacity(ops.len());
        let mut results = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            match self.exec(ctx, op, events) {
                Ok((result, undo)) => {
                    results.push(result);
                    undos.push(undo);
                }
                Err(error) => {
                    for undo in undos.into_iter().rev() {
                        self.undo(undo);
                    }
                    events.truncate(mark);
                    return MultiOutcome::Aborted { index, error };
                }
            }
        }
        MultiOutcome::Committed(results)
    }

    /// Whether the leader's check should delete `path` at `now_ms` (children aside).
    fn reapable(&self, p: &str, now_ms: i64) -> bool {
        let Some(node) = self.nodes.get(p) else {
            return false;
        };
        if !node.children.is_empty() {
            return false;
        }
        match node.kind {
            NodeKind::Container => node.cversion > 0,
            NodeKind::Ttl { ttl_ms } => now_ms.saturating_sub(node.mtime) > ttl_ms,
            _ => false,
        }
    }

    // ---- reads ----

    /// The stat of `path`, if it exists (exists()).
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.nodes.get(path).map(Node::stat)
    }

    /// Data and stat (getData); `None` is null data, as the create or setData sent it.
    pub fn get_data(&self, path: &str) -> Result<(Option<&[u8]>, Stat), TreeError> {
        let node = self.nodes.get(path).ok_or(TreeError::NoNode)?;
        Ok((node.data.as_deref(), node.stat()))
    }

    /// Child names in sorted order, and the node's stat (getChildren2).
    pub fn children(&self, path: &str) -> Result<(Vec<String>, Stat), TreeError> {
        let node = self.nodes.get(path).ok_or(TreeError::NoNode)?;
        Ok((node.children.iter().cloned().collect(), node.stat()))
    }

    /// Whether the session holding `auth` may `wanted` (a [`crate::acl::perm`]) on
    /// `path`: [`TreeError::NoNode`] if there is no such node, [`TreeError::NoAuth`] if its
    /// ACL does not grant it. For reads; writes are checked at apply.
    pub fn check_perm(&self, path: &str, wanted: i32, auth: &[Id]) -> Result<(), TreeError> {
        let node = self.nodes.get(path).ok_or(TreeError::NoNode)?;
        acl::check(&node.acl, wanted, auth)
    }

    /// A node's ACL and stat (getACL).
    pub fn acl(&self, path: &str) -> Result<(Vec<Acl>, Stat), TreeError> {
        let node = self.nodes.get(path).ok_or(TreeError::NoNode)?;
        Ok((node.acl.clone(), node.stat()))
    }

    /// Number of nodes below `path`, at any depth (getAllChildrenNumber).
    pub fn descendant_count(&self, path: &str) -> Result<usize, TreeError> {
        if !self.nodes.contains_key(path) {
            return Err(TreeError::NoNode);
        }
        if path == path::ROOT {
            return Ok(self.nodes.len() - 1);
        }
        let prefix = format!("{path}/");
        Ok(self
            .nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .count())
    }

    pub fn session(&self, id: i64) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// All sessions, ascending by id.
    pub fn sessions(&self) -> impl Iterator<Item = (i64, &Session)> {
        self.sessions.iter().map(|(id, s)| (*id, s))
    }

    /// A session's ephemeral paths starting with `prefix` (getEphemerals; a plain string
    /// prefix, as ZooKeeper matches it), sorted.
    pub fn ephemerals(&self, session: i64, prefix: &str) -> Vec<String> {
        self.sessions.get(&session).map_or_else(Vec::new, |s| {
            s.ephemerals
                .iter()
                .filter(|p| p.starts_with(prefix))
                .cloned()
                .collect()
        })
    }

    /// Sessions whose deadline is at or before `now_ms` (the leader's clock), ascending:
    /// what the leader should propose in [`Command::ExpireSessions`].
    pub fn expired_sessions(&self, now_ms: i64) -> Vec<i64> {
        self.sessions
            .iter()
            .filter(|(_, s)| s.deadline_ms <= now_ms)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Containers and TTL nodes due for deletion at `now_ms`, sorted: what the leader
    /// should propose in [`Command::Reap`].
    pub fn reap_candidates(&self, now_ms: i64) -> Vec<String> {
        let mut due: Vec<String> = self
            .containers
            .iter()
            .chain(&self.ttls)
            .filter(|p| self.reapable(p, now_ms))
            .cloned()
            .collect();
        due.sort();
        due
    }

    /// Number of znodes, the root and system nodes included (as ZooKeeper counts).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn ephemeral_count(&self) -> usize {
        self.sessions.values().map(|s| s.ephemerals.len()).sum()
    }

    /// Bytes of paths and data (ZooKeeper's `approximate_data_size`).
    pub fn approximate_data_size(&self) -> u64 {
        self.nodes
            .iter()
            .map(|(p, n)| (p.len() + n.data_len()) as u64)
            .sum()
    }

    /// Checks the invariants the tree relies on; for tests and snapshot restore.
    pub fn check_invariants(&self) -> Result<(), String> {
        if !self.nodes.contains_key(path::ROOT) {
            return Err("no root".into());
        }
        let mut ephemerals: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
        for (p, node) in &self.nodes {
            path::validate(p).map_err(|e| e.to_string())?;
            if node.czxid > self.last_zxid || node.mzxid > self.last_zxid {
                return Err(format!("{p}: zxid above the last applied"));
            }
            if let Some(parent) = path::parent(p) {
                let parent_node = self
                    .nodes
                    .get(parent)
                    .ok_or_else(|| format!("{p}: no parent"))?;
                if !parent_node.children.contains(path::name(p)) {
                    return Err(format!("{p}: not listed in its parent"));
                }
                if matches!(parent_node.kind, NodeKind::Ephemeral { .. }) {
                    return Err(format!("{p}: child of an ephemeral"));
                }
            }
            for child in &node.children {
                if !self.nodes.contains_key(&path::join(p, child)) {
                    return Err(format!("{p}: lists missing child {child}"));
                }
            }
            let indexed = match node.kind {
                NodeKind::Container => self.containers.contains(p),
                NodeKind::Ttl { .. } => self.ttls.contains(p),
                NodeKind::Ephemeral { owner } => {
                    ephemerals.entry(owner).or_default().insert(p.clone());
                    true
                }
                NodeKind::Persistent => true,
            };
            if !indexed {
                return Err(format!("{p}: missing from its index"));
            }
        }
        let indexed = self.containers.len() + self.ttls.len();
        let kinds = self
            .nodes
            .values()
            .filter(|n| matches!(n.kind, NodeKind::Container | NodeKind::Ttl { .. }))
            .count();
        if indexed != kinds {
            return Err("container / TTL index lists extra nodes".into());
        }
        for (id, s) in &self.sessions {
            if s.timeout_ms <= 0 {
                return Err(format!("session {id:#x}: timeout {}", s.timeout_ms));
            }
            let owned = ephemerals.remove(id).unwrap_or_default();
            if owned != s.ephemerals {
                return Err(format!("session {id:#x}: ephemeral list differs"));
            }
        }
        if let Some(id) = ephemerals.keys().next() {
            return Err(format!("ephemerals owned by unknown session {id:#x}"));
        }
        Ok(())
    }
}

fn applied(zxid: i64, result: Result<Response, TreeError>, fx: Effects) -> Applied {
    Applied {
        zxid,
        result,
        events: fx.events,
        ended_sessions: fx.ended,
    }
}
