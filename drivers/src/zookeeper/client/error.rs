//! Why a call on a ZooKeeper session failed: the server's `KeeperException` codes the
//! recipes act on, and the client's own conditions (connection lost, session expired,
//! client closed).

use coordbench_zk_proto::code;

/// A failed call. Server codes the recipes do not tell apart arrive as [`Error::Code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("no node")]
    NoNode,
    #[error("node exists")]
    NodeExists,
    #[error("bad version")]
    BadVersion,
    #[error("node has children")]
    NotEmpty,
    #[error("not authorized (NoAuth)")]
    NoAuth,
    #[error("authentication failed (AuthFailed)")]
    AuthFailed,
    /// The server no longer knows the session, or the client gave up on it (see
    /// [`super::Options::session_timeout`]).
    #[error("session expired")]
    SessionExpired,
    /// Another connection took over the session.
    #[error("session moved")]
    SessionMoved,
    /// The connection broke with the call in flight; the call may or may not have applied.
    #[error("connection lost")]
    ConnectionLoss,
    /// The session was closed or its client dropped.
    #[error("the session's client is closed")]
    Closed,
    #[error("bad arguments: {0}")]
    BadArguments(String),
    #[error("unimplemented by the server")]
    Unimplemented,
    /// Any other `KeeperException` code.
    #[error("server error code {0}")]
    Code(i32),
    /// No server accepted a connection (the text says what each attempt met).
    #[error("{0}")]
    Connect(String),
    /// The server sent bytes that are not the reply asked for.
    #[error("undecodable reply: {0}")]
    Protocol(String),
}

impl Error {
    /// The error a reply header's non-zero `err` stands for.
    pub fn from_code(err: i32) -> Error {
        match err {
            code::NO_NODE => Error::NoNode,
            code::NODE_EXISTS => Error::NodeExists,
            code::BAD_VERSION => Error::BadVersion,
            code::NOT_EMPTY => Error::NotEmpty,
            code::NO_AUTH => Error::NoAuth,
            code::AUTH_FAILED | code::SESSION_CLOSED_REQUIRE_AUTH => Error::AuthFailed,
            code::SESSION_EXPIRED => Error::SessionExpired,
            code::SESSION_MOVED => Error::SessionMoved,
            code::CONNECTION_LOSS => Error::ConnectionLoss,
            code::UNIMPLEMENTED => Error::Unimplemented,
            code::BAD_ARGUMENTS => Error::BadArguments("refused by the server".into()),
            other => Error::Code(other),
        }
    }

    /// Whether the session can no longer be used (every later call fails the same way).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired | Error::SessionMoved | Error::AuthFailed | Error::Closed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_codes_map_to_the_errors_recipes_match() {
        assert_eq!(Error::from_code(-101), Error::NoNode);
        assert_eq!(Error::from_code(-110), Error::NodeExists);
        assert_eq!(Error::from_code(-103), Error::BadVersion);
        assert_eq!(Error::from_code(-112), Error::SessionExpired);
        assert_eq!(Error::from_code(-4), Error::ConnectionLoss);
        assert_eq!(Error::from_code(-999), Error::Code(-999));
        assert!(Error::SessionExpired.is_terminal() && !Error::ConnectionLoss.is_terminal());
    }
}
