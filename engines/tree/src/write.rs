//! The write ops (create, delete, setData, check) on the tree, each checked in full before
//! it changes anything, and each returning an [`Undo`] so that a multi can roll back the
//! ops before a failing one.
//!
//! Semantics follow ZooKeeper's PrepRequestProcessor and DataTree: a create increments
//! the parent's cversion and sets its pzxid; a delete sets the parent's pzxid only (the
//! cversion counts creates, which is what sequential names use); setData bumps the
//! version. Checks come in ZooKeeper's order, so the same request fails with the same code.

use crate::acl::{self, perm, Acl, Id};
use crate::command::{Op, OpResult};
use crate::error::TreeError;
use crate::node::Node;
use crate::path;
use crate::tree::DataTree;
use crate::types::{CreateMode, EventType, NodeKind, WatchEvent};

/// Where and when a write happens, and who asks.
pub(crate) struct Ctx<'a> {
    pub zxid: i64,
    pub now_ms: i64,
    pub session: i64,
    /// The ids the session authenticated, for ACL checks.
    pub auth: &'a [Id],
}

/// What a create stores: the data and the ACL already fixed up.
struct Content<'a> {
    data: Option<&'a [u8]>,
    acl: Vec<Acl>,
}

/// How to take back one successful op.
pub(crate) enum Undo {
    Create {
        path: String,
        parent_cversion: i32,
        parent_pzxid: i64,
    },
    Delete {
        path: String,
        node: Box<Node>,
        parent_cversion: i32,
        parent_pzxid: i64,
    },
    SetData {
        path: String,
        data: Option<Vec<u8>>,
        mzxid: i64,
        mtime: i64,
        version: i32,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        aversion: i32,
    },
    Nothing,
}

/// Paths that cannot be deleted: the root and ZooKeeper's system nodes.
pub(crate) const PROTECTED: [&str; 4] =
    ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

fn version_matches(expected: i32, actual: i32) -> bool {
    expected == -1 || expected == actual
}

/// The parent of a create's path (for a sequential create, of the final path).
fn create_parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => path::ROOT,
        Some(i) => &path[..i],
    }
}

impl DataTree {
    pub(crate) fn exec(
        &mut self,
        ctx: &Ctx,
        op: &Op,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(OpResult, Undo), TreeError> {
        op.validate()?;
        match op {
            Op::Create {
                path,
                data,
                mode,
                ttl_ms,
                acl,
            } => {
                let content = Content {
                    data: data.as_deref(),
                    acl: acl::fix_acl(acl, ctx.auth)?,
                };
                self.create(ctx, path, content, *mode, *ttl_ms, events)
            }
            Op::Delete { path, version } => {
                self.check_delete_perm(path, ctx.auth)?;
                self.check_delete(path, *version)?;
                let (node, (parent_cversion, parent_pzxid)) =
                    self.delete_node(path, ctx.zxid, events);
                let undo = Undo::Delete {
                    path: path.clone(),
                    node: Box::new(node),
                    parent_cversion,
                    parent_pzxid,
                };
                Ok((OpResult::Delete, undo))
            }
            Op::SetData {
                path,
                data,
                version,
            } => {
                let node = self.nodes.get_mut(path).ok_or(TreeError::NoNode)?;
                acl::check(&node.acl, perm::WRITE, ctx.auth)?;
                if !version_matches(*version, node.version) {
                    return Err(TreeError::BadVersion);
                }
                let undo = Undo::SetData {
                    path: path.clone(),
                    data: std::mem::replace(&mut node.data, data.clone()),
                    mzxid: node.mzxid,
                    mtime: node.mtime,
                    version: node.version,
                };
                node.version = node.version.wrapping_add(1);
                node.mzxid = ctx.zxid;
                node.mtime = ctx.now_ms;
                let stat = node.stat();
                let e = event(EventType::NodeDataChanged, path, ctx.zxid, &node.acl);
                events.push(e);
                Ok((OpResult::SetData { stat }, undo))
            }
            Op::Check { path, version } => {
                let node = self.nodes.get(path).ok_or(TreeError::NoNode)?;
                acl::check(&node.acl, perm::READ, ctx.auth)?;
                if !version_matches(*version, node.version) {
                    return Err(TreeError::BadVersion);
                }
                Ok((OpResult::Check, Undo::Nothing))
            }
            Op::SetAcl { path, acl, version } => self.set_acl(ctx, path, acl, *version),
            Op::Refuse { error } => Err(error.clone()),
        }
    }

    /// setACL, in ZooKeeper's order: the node, ADMIN on it, the new list, the aversion.
    fn set_acl(
        &mut self,
        ctx: &Ctx,
        path: &str,
        acl: &[Acl],
        version: i32,
    ) -> Result<(OpResult, Undo), TreeError> {
        let node = self.nodes.get_mut(path).ok_or(TreeError::NoNode)?;
        acl::check(&node.acl, perm::ADMIN, ctx.auth)?;
        let fixed = acl::fix_acl(acl, ctx.auth)?;
        if !version_matches(version, node.aversion) {
            return Err(TreeError::BadVersion);
        }
        let undo = Undo::SetAcl {
            path: path.to_string(),
            acl: std::mem::replace(&mut node.acl, fixed),
            aversion: node.aversion,
        };
        node.aversion = node.aversion.wrapping_add(1);
        Ok((OpResult::SetAcl { stat: node.stat() }, undo))
    }

    /// DELETE on the parent of `path`, checked before the node itself, as ZooKeeper does.
    fn check_delete_perm(&self, path: &str, auth: &[Id]) -> Result<(), TreeError> {
        if PROTECTED.contains(&path) {
            return Ok(()); // check_delete refuses it with its own error
        }
        let parent = self
            .nodes
            .get(create_parent(path))
            .ok_or(TreeError::NoNode)?;
        acl::check(&parent.acl, perm::DELETE, auth)
    }

    fn create(
        &mut self,
        ctx: &Ctx,
        path: &str,
        content: Content,
        mode: CreateMode,
        ttl_ms: i64,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(OpResult, Undo), TreeError> {
        if path == path::ROOT && !mode.is_sequential() {
            return Err(TreeError::NodeExists);
        }
        let kind = match mode {
            _ if mode.is_ephemeral() => {
                if ctx.session == 0 {
                    return Err(TreeError::BadArguments(
                        "an ephemeral node needs a session".into(),
                    ));
                }
                NodeKind::Ephemeral { owner: ctx.session }
            }
            CreateMode::Container => NodeKind::Container,
            _ if mode.is_ttl() => NodeKind::Ttl { ttl_ms },
            _ => NodeKind::Persistent,
        };
        let parent_path = create_parent(path);
        let parent = self.nodes.get(parent_path).ok_or(TreeError::NoNode)?;
        acl::check(&parent.acl, perm::CREATE, ctx.auth)?;
        let full = if mode.is_sequential() {
            // Zero-padded to 10 digits, as ZooKeeper prints numbers up to i32::MAX.
            let full = format!("{path}{:010}", children_created(parent));
            path::validate(&full)?;
            full
        } else {
            path.to_string()
        };
        if self.nodes.contains_key(&full) {
            return Err(TreeError::NodeExists);
        }
        if matches!(parent.kind, NodeKind::Ephemeral { .. }) {
            return Err(TreeError::NoChildrenForEphemerals);
        }
        let (parent_cversion, parent_pzxid) = (parent.cversion, parent.pzxid);
        let parent_acl = parent.acl.clone();
        events.push(event(EventType::NodeCreated, &full, ctx.zxid, &content.acl));
        events.push(event(
            EventType::NodeChildrenChanged,
            parent_path,
            ctx.zxid,
            &parent_acl,
        ));
        let node = Node::new(
            content.data.map(<[u8]>::to_vec),
            kind,
            ctx.zxid,
            ctx.now_ms,
            content.acl,
        );
        let stat = node.stat();
        self.insert_node(&full, node);
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            parent.cversion = parent.cversion.wrapping_add(1);
            parent.pzxid = ctx.zxid;
        }
        let undo = Undo::Create {
            path: full.clone(),
            parent_cversion,
            parent_pzxid,
        };
        Ok((OpResult::Create { path: full, stat }, undo))
    }

    /// The checks of a delete, in ZooKeeper's order.
    pub(crate) fn check_delete(&self, path: &str, version: i32) -> Result<(), TreeError> {
        if PROTECTED.contains(&path) {
            return Err(TreeError::BadArguments(format!("{path} cannot be deleted")));
        }
        let node = self.nodes.get(path).ok_or(TreeError::NoNode)?;
        if !version_matches(version, node.version) {
            return Err(TreeError::BadVersion);
        }
        if !node.children.is_empty() {
            return Err(TreeError::NotEmpty);
        }
        Ok(())
    }

    /// Deletes a node that passed [`DataTree::check_delete`]; returns it and the parent's
    /// cversion and pzxid before. A delete counts in the parent's cversion, as in ZooKeeper.
    pub(crate) fn delete_node(
        &mut self,
        path: &str,
        zxid: i64,
        events: &mut Vec<WatchEvent>,
    ) -> (Node, (i32, i64)) {
        let node = self.remove_node(path);
        let parent_path = path::parent(path).unwrap_or(path::ROOT);
        let mut before = (0, 0);
        let mut parent_acl = Vec::new();
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            before = (parent.cversion, parent.pzxid);
            parent.cversion = parent.cversion.wrapping_add(1);
            parent.pzxid = parent.pzxid.max(zxid);
            parent_acl = parent.acl.clone();
        }
        events.push(event(EventType::NodeDeleted, path, zxid, &node.acl));
        events.push(event(
            EventType::NodeChildrenChanged,
            parent_path,
            zxid,
            &parent_acl,
        ));
        (node, before)
    }

    pub(crate) fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::Create {
                path,
                parent_cversion,
                parent_pzxid,
            } => {
                self.remove_node(&path);
                if let Some(parent) = self.nodes.get_mut(create_parent(&path)) {
                    parent.cversion = parent_cversion;
                    parent.pzxid = parent_pzxid;
                }
            }
            Undo::Delete {
                path,
                node,
                parent_cversion,
                parent_pzxid,
            } => {
                self.insert_node(&path, *node);
                if let Some(parent) = path::parent(&path).and_then(|p| self.nodes.get_mut(p)) {
                    parent.cversion = parent_cversion;
                    parent.pzxid = parent_pzxid;
                }
            }
            Undo::SetAcl {
                path,
                acl,
                aversion,
            } => {
                if let Some(node) = self.nodes.get_mut(&path) {
                    node.acl = acl;
                    node.aversion = aversion;
                }
            }
            Undo::SetData {
                path,
                data,
                mzxid,
                mtime,
                version,
            } => {
                if let Some(node) = self.nodes.get_mut(&path) {
                    node.data = data;
                    node.mzxid = mzxid;
                    node.mtime = mtime;
                    node.version = version;
                }
            }
            Undo::Nothing => {}
        }
    }

    /// Adds a node and everything derived from it: the parent's child list, the owner's
    /// ephemerals, the container and TTL indexes. Stats are the caller's business.
    pub(crate) fn insert_node(&mut self, path: &str, node: Node) {
        match node.kind {
            NodeKind::Ephemeral { owner } => {
                if let Some(s) = self.sessions.get_mut(&owner) {
                    s.ephemerals.insert(path.to_string());
                }
            }
            NodeKind::Container => {
                self.containers.insert(path.to_string());
            }
            NodeKind::Ttl { .. } => {
                self.ttls.insert(path.to_string());
            }
            NodeKind::Persistent => {}
        }
        if let Some(parent) = path::parent(path).and_then(|p| self.nodes.get_mut(p)) {
            parent.children.insert(path::name(path).to_string());
        }
        self.nodes.insert(path.to_string(), node);
    }

    /// Removes a node and what is derived from it (the inverse of `insert_node`).
    fn remove_node(&mut self, path: &str) -> Node {
        let node = self.nodes.remove(path).unwrap_or_else(Node::system);
        match node.kind {
            NodeKind::Ephemeral { owner } => {
                if let Some(s) = self.sessions.get_mut(&owner) {
                    s.ephemerals.remove(path);
                }
            }
            NodeKind::Container => {
                self.containers.remove(path);
            }
            NodeKind::Ttl { .. } => {
                self.ttls.remove(path);
            }
            NodeKind::Persistent => {}
        }
        if let Some(parent) = path::parent(path).and_then(|p| self.nodes.get_mut(p)) {
            parent.children.remove(path::name(path));
        }
        node
    }
}

/// The sequence number of `parent`'s next sequential child: how many children were ever
/// created under it. ZooKeeper 3.8 numbers so while its cversion counts deletes too (create
/// /r/a, delete it, create -s /r/s-: /r/s-0000000001, cversion 3), so the count follows from
/// cversion = creates + deletes and the child count = creates - deletes.
fn children_created(parent: &Node) -> i64 {
    (i64::from(parent.cversion) + parent.children.len() as i64) / 2
}

pub(crate) fn event(kind: EventType, path: &str, zxid: i64, acl: &[Acl]) -> WatchEvent {
    WatchEvent {
        kind,
        path: path.to_string(),
        zxid,
        acl: acl.to_vec(),
    }
}
