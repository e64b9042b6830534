//! Errors of the tree, each carrying ZooKeeper's `KeeperException.Code` so the protocol
//! layer sends them as they are.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// ZooKeeper's error codes, as sent in reply headers and multi results.
pub mod code {
    pub const OK: i32 = 0;
    pub const SYSTEM_ERROR: i32 = -1;
    pub const RUNTIME_INCONSISTENCY: i32 = -2;
    /// Client-side codes: a connection lost with the request in flight, a request timed out.
    pub const CONNECTION_LOSS: i32 = -4;
    pub const MARSHALLING_ERROR: i32 = -5;
    pub const UNIMPLEMENTED: i32 = -6;
    pub const OPERATION_TIMEOUT: i32 = -7;
    pub const BAD_ARGUMENTS: i32 = -8;
    pub const NO_NODE: i32 = -101;
    pub const NO_AUTH: i32 = -102;
    pub const BAD_VERSION: i32 = -103;
    pub const NO_CHILDREN_FOR_EPHEMERALS: i32 = -108;
    pub const NODE_EXISTS: i32 = -110;
    pub const NOT_EMPTY: i32 = -111;
    pub const SESSION_EXPIRED: i32 = -112;
    pub const INVALID_ACL: i32 = -114;
    pub const AUTH_FAILED: i32 = -115;
    /// The session is held by another connection.
    pub const SESSION_MOVED: i32 = -118;
    /// Sent to a connection that is not authenticated while the server enforces auth.
    pub const SESSION_CLOSED_REQUIRE_AUTH: i32 = -124;
    pub const NO_WATCHER: i32 = -121;
    pub const RECONFIG_DISABLED: i32 = -123;
}

/// A failed operation. Errors are part of the replicated output: deterministic,
/// comparable and serialisable like any response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Error)]
pub enum TreeError {
    #[error("no node")]
    NoNode,
    #[error("node exists")]
    NodeExists,
    #[error("directory not empty")]
    NotEmpty,
    #[error("bad version")]
    BadVersion,
    #[error("ephemeral nodes may not have children")]
    NoChildrenForEphemerals,
    /// An invalid path, mode, TTL or session timeout; the text says which.
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// The session is unknown: it expired, was closed, or never existed.
    #[error("session expired")]
    SessionExpired,
    /// The node's ACL does not grant the permission to the session's ids.
    #[error("not authorized")]
    NoAuth,
    /// A create's or setACL's ACL is empty, malformed, or uses `auth` unauthenticated.
    #[error("invalid ACL")]
    InvalidAcl,
    /// What ZooKeeper answers when its server fails on a request in a way that is no
    /// KeeperException (a null where it expects a string): MARSHALLINGERROR.
    #[error("request ZooKeeper's server cannot process (marshalling error)")]
    Marshalling,
    /// The command's log position is not above the last applied one; nothing changed.
    #[error("zxid {zxid:#x} already applied (last {last:#x})")]
    AlreadyApplied { zxid: i64, last: i64 },
}

impl TreeError {
    /// The `KeeperException.Code` a ZooKeeper server sends for this error.
    pub fn code(&self) -> i32 {
        match self {
            TreeError::NoNode => code::NO_NODE,
            TreeError::NodeExists => code::NODE_EXISTS,
            TreeError::NotEmpty => code::NOT_EMPTY,
            TreeError::BadVersion => code::BAD_VERSION,
            TreeError::NoChildrenForEphemerals => code::NO_CHILDREN_FOR_EPHEMERALS,
            TreeError::BadArguments(_) => code::BAD_ARGUMENTS,
            TreeError::SessionExpired => code::SESSION_EXPIRED,
            TreeError::NoAuth => code::NO_AUTH,
            TreeError::InvalidAcl => code::INVALID_ACL,
            TreeError::Marshalling => code::MARSHALLING_ERROR,
            TreeError::AlreadyApplied { .. } => code::SYSTEM_ERROR,
        }
    }
}

/// A command or snapshot that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    #[error("tree: cannot decode: {0}")]
    Decode(String),
    #[error("tree: bad snapshot: {0}")]
    BadSnapshot(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_zookeeper() {
        assert_eq!(TreeError::NoNode.code(), -101);
        assert_eq!(TreeError::NodeExists.code(), -110);
        assert_eq!(TreeError::NotEmpty.code(), -111);
        assert_eq!(TreeError::BadVersion.code(), -103);
        assert_eq!(TreeError::NoChildrenForEphemerals.code(), -108);
        assert_eq!(TreeError::BadArguments(String::new()).code(), -8);
        assert_eq!(TreeError::SessionExpired.code(), -112);
        assert_eq!(TreeError::NoAuth.code(), -102);
        assert_eq!(TreeError::InvalidAcl.code(), -114);
        assert_eq!(TreeError::Marshalling.code(), -5);
    }
}
