//! [`Node`]: one znode as the tree stores it, and [`Session`]: one session's replicated
//! record.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::acl::Acl;
use crate::types::{NodeKind, Stat};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// `None`: the client sent null data (jute length -1), which ZooKeeper keeps and
    /// returns as null; distinct from empty.
    pub data: Option<Vec<u8>>,
    pub czxid: i64,
    pub mzxid: i64,
    pub pzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub kind: NodeKind,
    /// ACL changes (setACL).
    pub aversion: i32,
    pub acl: Vec<Acl>,
    /// Names (not paths) of the children, sorted: listings are deterministic.
    pub children: BTreeSet<String>,
}

impl Node {
    /// A node of the initial tree (zxid 0, time 0).
    pub fn system() -> Node {
        Node::new(
            Some(Vec::new()),
            NodeKind::Persistent,
            0,
            0,
            vec![Acl::open()],
        )
    }

    pub fn new(
        data: Option<Vec<u8>>,
        kind: NodeKind,
        zxid: i64,
        now_ms: i64,
        acl: Vec<Acl>,
    ) -> Node {
        Node {
            data,
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            ctime: now_ms,
            mtime: now_ms,
            version: 0,
            cversion: 0,
            kind,
            aversion: 0,
            acl,
            children: BTreeSet::new(),
        }
    }

    /// Bytes of data; null data counts 0, as ZooKeeper's `dataLength` does.
    pub fn data_len(&self) -> usize {
        self.data.as_ref().map_or(0, Vec::len)
    }

    pub fn stat(&self) -> Stat {
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion,
            aversion: self.aversion,
            ephemeral_owner: self.kind.client_ephemeral_owner(),
            data_length: i32::try_from(self.data_len()).unwrap_or(i32::MAX),
            num_children: i32::try_from(self.children.len()).unwrap_or(i32::MAX),
            pzxid: self.pzxid,
        }
    }
}

/// A live session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The negotiated timeout.
    pub timeout_ms: i32,
    /// What a reconnecting client must present.
    pub password: Vec<u8>,
    /// Expires when the leader's clock passes this (ms since the epoch).
    pub deadline_ms: i64,
    /// Paths of the ephemeral nodes it owns.
    pub ephemerals: BTreeSet<String>,
}

impl Session {
    /// Moves the deadline to at least `now_ms + timeout`.
    pub(crate) fn renew(&mut self, now_ms: i64) {
        self.deadline_ms = self
            .deadline_ms
            .max(now_ms.saturating_add(i64::from(self.timeout_ms)));
    }
}
