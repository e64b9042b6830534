//! Errors a driver reports, grouped into the kinds the results count separately.

use std::time::Duration;

/// An operation's failure. [`DriverError::kind`] is the label errors are counted under.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DriverError {
    /// The server could not be reached (connection refused, reset, DNS, TLS).
    #[error("cannot reach {endpoint}: {detail}")]
    Unreachable { endpoint: String, detail: String },
    /// The operation did not finish in time.
    #[error("operation timed out after {0:?}")]
    Timeout(Duration),
    /// The cluster has no leader or the member is not part of a quorum; retryable.
    #[error("no leader: {0}")]
    NoLeader(String),
    /// The session (lease or ZooKeeper session) expired; locks it held are gone.
    #[error("session expired: {0}")]
    SessionExpired(String),
    /// The server answered with an error status.
    #[error("server error: {0}")]
    Server(String),
    /// The server refused the client's credentials or their permissions (etcd auth: no or
    /// a wrong user, an expired token that could not be renewed, no permission).
    #[error("access denied: {0}")]
    Denied(String),
    /// The request was malformed or not supported by this driver.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl DriverError {
    /// The stable label this error is counted under in results (`errors_by_kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            DriverError::Unreachable { .. } => "unreachable",
            DriverError::Timeout(_) => "timeout",
            DriverError::NoLeader(_) => "no_leader",
            DriverError::SessionExpired(_) => "session_expired",
            DriverError::Server(_) => "server",
            DriverError::Denied(_) => "denied",
            DriverError::Unsupported(_) => "unsupported",
        }
    }
}
