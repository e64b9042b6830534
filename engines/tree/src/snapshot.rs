//! Snapshot and restore of the whole tree, for log compaction and lagging members.
//!
//! Layout: the magic `CBZT`, a format version byte, then postcard of the last zxid, every
//! node (path order, without its child list; format 2 adds each node's aversion and ACL)
//! and every session (id order, without its ephemeral list); format 3 keeps null data
//! apart from empty data (`Option`). Format 2 snapshots restore with every node's data
//! present, and format 1 snapshots (before ACLs were kept) also with the open ACL. Child lists and the ephemeral, container and TTL indexes are rebuilt
//! on restore. Equal trees give byte-identical snapshots. Restore checks the invariants
//! the tree relies on, so corrupt bytes give an error, never a tree that misbehaves later.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::acl::Acl;
use crate::error::CodecError;
use crate::node::{Node, Session};
use crate::tree::DataTree;
use crate::types::NodeKind;

const MAGIC: &[u8; 4] = b"CBZT";
/// Format 1 had no ACLs; format 2 carries them; format 3 can say null data.
const FORMAT_V1: u8 = 1;
const FORMAT_V2: u8 = 2;
const FORMAT: u8 = 3;

/// A node's data and stat; `D` is its data: `Option<Vec<u8>>` (format 3) or `Vec<u8>`
/// (formats 1 and 2, which had no null data).
#[derive(Serialize, Deserialize)]
struct NodeData<D = Option<Vec<u8>>> {
    data: D,
    czxid: i64,
    mzxid: i64,
    pzxid: i64,
    ctime: i64,
    mtime: i64,
    version: i32,
    cversion: i32,
    kind: NodeKind,
}

impl<D> NodeData<D> {
    /// The same node with its data converted (an older format's read as format 3's).
    fn map<E>(self, f: impl FnOnce(D) -> E) -> NodeData<E> {
        NodeData {
            data: f(self.data),
            czxid: self.czxid,
            mzxid: self.mzxid,
            pzxid: self.pzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion,
            kind: self.kind,
        }
    }
}

impl NodeData {
    /// The stored form of a node's data and stat.
    fn of(n: &Node) -> Self {
        NodeData {
            data: n.data.clone(),
            czxid: n.czxid,
            mzxid: n.mzxid,
            pzxid: n.pzxid,
            ctime: n.ctime,
            mtime: n.mtime,
            version: n.version,
            cversion: n.cversion,
            kind: n.kind,
        }
    }
}

/// What format 2 adds to each node.
#[derive(Serialize, Deserialize)]
struct NodeAccess {
    aversion: i32,
    acl: Vec<Acl>,
}

impl NodeAccess {
    /// A format 1 node's: never changed, open to anyone.
    fn open() -> Self {
        NodeAccess {
            aversion: 0,
            acl: vec![Acl::open()],
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SessionData {
    id: i64,
    timeout_ms: i32,
    password: Vec<u8>,
    deadline_ms: i64,
}

/// A snapshot's body; `N` is a node entry: `(path, NodeData<Vec<u8>>)` in format 1,
/// `(path, NodeData<Vec<u8>>, NodeAccess)` in format 2, `(path, NodeData, NodeAccess)` in
/// format 3.
#[derive(Serialize, Deserialize)]
struct Data<N> {
    last_zxid: i64,
    nodes: Vec<N>,
    sessions: Vec<SessionData>,
}

/// Decodes a whole body (no trailing bytes).
fn decode_body<N: serde::de::DeserializeOwned>(body: &[u8]) -> Result<Data<N>, CodecError> {
    match postcard::take_from_bytes::<Data<N>>(body) {
        Ok((data, [])) => Ok(data),
        Ok(_) => Err(CodecError::BadSnapshot("trailing bytes".into())),
        Err(e) => Err(CodecError::Decode(e.to_string())),
    }
}

impl DataTree {
    /// The full state as bytes (see the module doc for the layout).
    pub fn snapshot(&self) -> Vec<u8> {
        let data = Data {
            last_zxid: self.last_zxid,
            nodes: self
                .nodes
                .iter()
                .map(|(p, n)| {
                    let access = NodeAccess {
                        aversion: n.aversion,
                        acl: n.acl.clone(),
                    };
                    let d = NodeData::of(n);
                    (p.clone(), d, access)
                })
                .collect(),
            sessions: self
                .sessions
                .iter()
                .map(|(id, s)| SessionData {
                    id: *id,
                    timeout_ms: s.timeout_ms,
                    password: s.password.clone(),
                    deadline_ms: s.deadline_ms,
                })
                .collect(),
        };
        let mut out = MAGIC.to_vec();
        out.push(FORMAT);
        // Cannot fail: all lengths are known and the Vec grows.
        postcard::to_extend(&data, out).expect("postcard serialisation of a snapshot is infallible")
    }

    /// Replaces this tree with a snapshot's. On error the tree is unchanged.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), CodecError> {
        *self = DataTree::from_snapshot(bytes)?;
        Ok(())
    }

    /// A tree holding a snapshot's state.
    pub fn from_snapshot(bytes: &[u8]) -> Result<DataTree, CodecError> {
        let bad = CodecError::BadSnapshot;
        let data: Data<(String, NodeData, NodeAccess)> = match bytes.strip_prefix(MAGIC.as_slice())
        {
            Some([FORMAT, body @ ..]) => decode_body(body)?,
            Some([FORMAT_V2, body @ ..]) => {
                let v2: Data<(String, NodeData<Vec<u8>>, NodeAccess)> = decode_body(body)?;
                Data {
                    last_zxid: v2.last_zxid,
                    nodes: v2
                        .nodes
                        .into_iter()
                        .map(|(p, n, a)| (p, n.map(Some), a))
                        .collect(),
                    sessions: v2.sessions,
                }
            }
            Some([FORMAT_V1, body @ ..]) => {
                let v1: Data<(String, NodeData<Vec<u8>>)> = decode_body(body)?;
                Data {
                    last_zxid: v1.last_zxid,
                    nodes: v1
                        .nodes
                        .into_iter()
                        .map(|(p, n)| (p, n.map(Some), NodeAccess::open()))
                        .collect(),
                    sessions: v1.sessions,
                }
            }
            Some(_) => return Err(bad("unknown format version".into())),
            None => return Err(bad("not a tree snapshot".into())),
        };
        let mut sessions = BTreeMap::new();
        for s in data.sessions {
            let session = Session {
                timeout_ms: s.timeout_ms,
                password: s.password,
                deadline_ms: s.deadline_ms,
                ephemerals: BTreeSet::new(),
            };
            if sessions.insert(s.id, session).is_some() {
                return Err(bad(format!("session {:#x} twice", s.id)));
            }
        }
        let mut tree = DataTree {
            nodes: BTreeMap::new(),
            sessions,
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            last_zxid: data.last_zxid,
        };
        // Path order puts every parent before its children.
        for (path, n, access) in data.nodes {
            if tree.nodes.contains_key(&path) {
                return Err(bad(format!("{path} twice")));
            }
            if let NodeKind::Ephemeral { owner } = n.kind {
                if !tree.sessions.contains_key(&owner) {
                    return Err(bad(format!("{path} owned by unknown session {owner:#x}")));
                }
            }
            let node = Node {
                data: n.data,
                czxid: n.czxid,
                mzxid: n.mzxid,
                pzxid: n.pzxid,
                ctime: n.ctime,
                mtime: n.mtime,
                version: n.version,
                cversion: n.cversion,
                kind: n.kind,
                aversion: access.aversion,
                acl: access.acl,
                children: BTreeSet::new(),
            };
            tree.insert_node(&path, node);
        }
        tree.check_invariants().map_err(bad)?;
        Ok(tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{perm, Id};
    use crate::command::{Command, Op};
    use crate::types::CreateMode;

    fn sample() -> DataTree {
        let mut t = DataTree::new();
        t.apply(
            1,
            &Command::CreateSession {
                timeout_ms: 5000,
                password: vec![1; 16],
                now_ms: 10,
            },
        );
        let create = |path: &str, mode, ttl_ms| Command::Write {
            session: 1,
            now_ms: 20,
            op: Op::Create {
                path: path.into(),
                data: Some(b"v".to_vec()),
                mode,
                ttl_ms,
                acl: vec![Acl::open()],
            },
            auth: vec![],
        };
        t.apply(2, &create("/a", CreateMode::Container, 0));
        t.apply(3, &create("/a/e-", CreateMode::EphemeralSequential, 0));
        t.apply(4, &create("/t", CreateMode::PersistentWithTtl, 100));
        t.apply(5, &create("/a/p", CreateMode::Persistent, 0));
        let private = Acl {
            perms: perm::READ,
            scheme: "digest".into(),
            id: "u:h".into(),
        };
        let restrict = Command::Write {
            session: 1,
            now_ms: 30,
            op: Op::SetAcl {
                path: "/a/p".into(),
                acl: vec![private],
                version: 0,
            },
            auth: vec![],
        };
        t.apply(6, &restrict);
        for (zxid, path, data) in [(7, "/null", None), (8, "/empty", Some(vec![]))] {
            let op = Op::Create {
                path: path.into(),
                data,
                mode: CreateMode::Persistent,
                ttl_ms: 0,
                acl: vec![Acl::open()],
            };
            t.apply(
                zxid,
                &Command::Write {
                    session: 1,
                    now_ms: 40,
                    op,
                    auth: vec![],
                },
            );
        }
        t
    }

    /// `tree` as a format 1 snapshot (no ACLs), as builds before format 2 wrote it.
    fn snapshot_v1(tree: &DataTree) -> Vec<u8> {
        let data = Data {
            last_zxid: tree.last_zxid,
            nodes: tree
                .nodes
                .iter()
                .map(|(p, n)| (p.clone(), NodeData::of(n).map(Option::unwrap_or_default)))
                .collect(),
            sessions: Vec::<SessionData>::new(),
        };
        let mut out = MAGIC.to_vec();
        out.push(FORMAT_V1);
        postcard::to_extend(&data, out).unwrap()
    }

    #[test]
    fn acls_survive_a_snapshot_and_format_1_restores_open() {
        let t = sample();
        let r = DataTree::from_snapshot(&t.snapshot()).unwrap();
        let (acl, stat) = r.acl("/a/p").unwrap();
        assert_eq!(
            (acl.len(), acl[0].scheme.as_str(), stat.aversion),
            (1, "digest", 1)
        );
        assert!(r.check_perm("/a/p", perm::READ, &[]).is_err());
        assert!(r
            .check_perm("/a/p", perm::READ, &[Id::new("digest", "u:h")])
            .is_ok());

        let mut plain = DataTree::new();
        let create = Command::Write {
            session: 0,
            now_ms: 1,
            op: Op::Create {
                path: "/x".into(),
                data: Some(b"v".to_vec()),
                mode: CreateMode::Persistent,
                ttl_ms: 0,
                acl: vec![Acl::open()],
            },
            auth: vec![],
        };
        plain.apply(1, &create);
        let old = DataTree::from_snapshot(&snapshot_v1(&plain)).unwrap();
        // Format 1 had no ACLs: every node restores open, /zookeeper/config too.
        if let Some(config) = plain.nodes.get_mut("/zookeeper/config") {
            config.acl = vec![Acl::open()];
            config.aversion = 0;
        }
        assert_eq!(old, plain);
        assert_eq!(old.acl("/x").unwrap().0, vec![Acl::open()]);
    }

    #[test]
    fn null_data_survives_a_snapshot_and_format_2_restores_present() {
        let t = sample();
        let r = DataTree::from_snapshot(&t.snapshot()).unwrap();
        assert_eq!(r.get_data("/null").unwrap().0, None);
        assert_eq!(r.get_data("/empty").unwrap().0, Some(&b""[..]));
        assert_eq!(r.get_data("/a/p").unwrap().0, Some(&b"v"[..]));

        // Format 2, as builds before null data wrote it: every node's data present.
        let data = Data {
            last_zxid: t.last_zxid,
            nodes: t
                .nodes
                .iter()
                .map(|(p, n)| {
                    let access = NodeAccess {
                        aversion: n.aversion,
                        acl: n.acl.clone(),
                    };
                    (
                        p.clone(),
                        NodeData::of(n).map(Option::unwrap_or_default),
                        access,
                    )
                })
                .collect(),
            sessions: vec![SessionData {
                id: 1,
                timeout_ms: 5000,
                password: vec![1; 16],
                deadline_ms: 0,
            }],
        };
        let mut v2 = MAGIC.to_vec();
        v2.push(FORMAT_V2);
        let old = DataTree::from_snapshot(&postcard::to_extend(&data, v2).unwrap()).unwrap();
        assert_eq!(old.get_data("/null").unwrap().0, Some(&b""[..]));
        assert_eq!(old.acl("/a/p").unwrap().0, t.acl("/a/p").unwrap().0);
    }

    #[test]
    fn round_trip() {
        let t = sample();
        let bytes = t.snapshot();
        let r = DataTree::from_snapshot(&bytes).unwrap();
        assert_eq!(r, t);
        assert_eq!(r.snapshot(), bytes);
        assert_eq!(r.ephemerals(1, "/"), vec!["/a/e-0000000000".to_string()]);
        assert_eq!(
            DataTree::from_snapshot(&DataTree::new().snapshot()).unwrap(),
            DataTree::new()
        );
    }

    #[test]
    fn rejects_corruption_without_panicking() {
        let mut t = sample();
        let bytes = t.snapshot();
        assert!(t.restore(b"nope").is_err());
        assert!(t.restore(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(t.restore(&longer).is_err());
        for i in 5..bytes.len() {
            for flip in [1u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                if let Ok(r) = DataTree::from_snapshot(&b) {
                    r.check_invariants().unwrap();
                }
            }
        }
        assert_eq!(t, sample(), "failed restores leave the tree unchanged");
    }
}
