//! The values the tree shares with clients: [`Stat`], [`CreateMode`], the kind of a node
//! ([`NodeKind`]) and watch events ([`WatchEvent`]).

use serde::{Deserialize, Serialize};

/// A znode's metadata, field for field ZooKeeper's `Stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Stat {
    /// zxid of the create.
    pub czxid: i64,
    /// zxid of the last data change (the create's until the first setData).
    pub mzxid: i64,
    /// Leader's wall clock (ms since the epoch) at the create.
    pub ctime: i64,
    /// Leader's wall clock at the last data change.
    pub mtime: i64,
    /// Number of data changes.
    pub version: i32,
    /// Number of children created (ZooKeeper does not count deletes).
    pub cversion: i32,
    /// Number of ACL changes (setACL).
    pub aversion: i32,
    /// The owning session of an ephemeral node; 0 otherwise (containers and TTL nodes
    /// too: see [`NodeKind::client_ephemeral_owner`]).
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
    /// zxid of the last create or delete of a child (the create's if none).
    pub pzxid: i64,
}

/// How a node is created: ZooKeeper's `CreateMode` and its wire flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CreateMode {
    Persistent,
    Ephemeral,
    PersistentSequential,
    EphemeralSequential,
    /// Deleted by the leader's periodic check once empty after having had children.
    Container,
    /// Deleted by the leader's periodic check once empty and unmodified for its TTL.
    PersistentWithTtl,
    PersistentSequentialWithTtl,
}

impl CreateMode {
    /// The mode of ZooKeeper's `flags` value; `None` for an unknown one.
    pub fn from_flags(flags: i32) -> Option<CreateMode> {
        Some(match flags {
            0 => CreateMode::Persistent,
            1 => CreateMode::Ephemeral,
            2 => CreateMode::PersistentSequential,
            3 => CreateMode::EphemeralSequential,
            4 => CreateMode::Container,
            5 => CreateMode::PersistentWithTtl,
            6 => CreateMode::PersistentSequentialWithTtl,
            _ => return None,
        })
    }

    pub fn flags(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::Ephemeral => 1,
            CreateMode::PersistentSequential => 2,
            CreateMode::EphemeralSequential => 3,
            CreateMode::Container => 4,
            CreateMode::PersistentWithTtl => 5,
            CreateMode::PersistentSequentialWithTtl => 6,
        }
    }

    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// Largest TTL, in ms: what fits beside ZooKeeper's TTL marker in `ephemeralOwner`.
pub const MAX_TTL_MS: i64 = 0x00FF_FFFF_FFFF;

/// What a node is, for its lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    Persistent,
    /// Owned by a session; deleted when it ends.
    Ephemeral {
        owner: i64,
    },
    Container,
    Ttl {
        ttl_ms: i64,
    },
}

impl NodeKind {
    /// The `ephemeralOwner` ZooKeeper stores (its `StatPersisted`, with extended types
    /// enabled): the session for ephemerals, `0x8000…` for containers, `0xFF00…` | TTL for
    /// TTL nodes. Clients see [`NodeKind::client_ephemeral_owner`].
    pub fn ephemeral_owner(self) -> i64 {
        match self {
            NodeKind::Persistent => 0,
            NodeKind::Ephemeral { owner } => owner,
            NodeKind::Container => i64::MIN,
            NodeKind::Ttl { ttl_ms } => (0xFF00_0000_0000_0000_u64 as i64) | (ttl_ms & MAX_TTL_MS),
        }
    }

    /// The `ephemeralOwner` of the Stat clients get: the session for ephemerals, 0 for
    /// every other kind, containers and TTL nodes included (ZooKeeper's
    /// `DataNode.getClientEphemeralOwner` hides its encodings of those).
    pub fn client_ephemeral_owner(self) -> i64 {
        match self {
            NodeKind::Ephemeral { owner } => owner,
            _ => 0,
        }
    }
}

/// ZooKeeper's `EventType` for node changes (the values are the wire codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventType {
    NodeCreated = 1,
    NodeDeleted = 2,
    NodeDataChanged = 3,
    NodeChildrenChanged = 4,
}

impl EventType {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// A change that fires watches, produced by applying a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchEvent {
    pub kind: EventType,
    pub path: String,
    /// The zxid of the command that made the change.
    pub zxid: i64,
    /// The ACL a watcher needs READ in to be told (ZooKeeper checks it at delivery, and
    /// a watcher without it loses its one-shot watch unnotified): the node's for data,
    /// create and delete events (the deleted node's), the parent's for child events;
    /// empty (anyone) for events SetWatches fires.
    pub acl: Vec<crate::acl::Acl>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip() {
        for flags in 0..7 {
            assert_eq!(
                CreateMode::from_flags(flags).map(CreateMode::flags),
                Some(flags)
            );
        }
        assert_eq!(CreateMode::from_flags(7), None);
        assert_eq!(CreateMode::from_flags(-1), None);
    }

    #[test]
    fn owners_encode_like_zookeeper() {
        assert_eq!(NodeKind::Container.ephemeral_owner(), i64::MIN);
        assert_eq!(
            NodeKind::Ttl { ttl_ms: 1000 }.ephemeral_owner() as u64,
            0xFF00_0000_0000_03E8
        );
        assert_eq!(NodeKind::Ephemeral { owner: 7 }.ephemeral_owner(), 7);
        assert_eq!(NodeKind::Container.client_ephemeral_owner(), 0);
        assert_eq!(NodeKind::Ttl { ttl_ms: 1000 }.client_ephemeral_owner(), 0);
        assert_eq!(NodeKind::Ephemeral { owner: 7 }.client_ephemeral_owner(), 7);
    }
}
