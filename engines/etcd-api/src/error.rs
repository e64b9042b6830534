//! Errors of the API layer and how they become gRPC statuses, worded as etcd words them
//! (etcd's Go client recognises errors by code and message).

use coordbench_kv::{CodecError, GrpcCode, KvError};
use coordbench_node::NodeError;
use thiserror::Error;
use tonic::{Code, Status};

#[derive(Debug, Clone, Error)]
pub enum ApiError {
    /// The runtime could not replicate or read.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The state machine refused the request (identically on every replica).
    #[error(transparent)]
    Kv(#[from] KvError),
    /// The encoded command exceeds the configured maximum request size.
    #[error("etcdserver: request is too large")]
    TooLarge,
    /// A malformed request that etcd would also refuse.
    #[error("{0}")]
    InvalidArgument(String),
    /// An error that etcd returns as a plain Go error (gRPC code Unknown), as its v3lock
    /// and v3election servers do: "election: not leader", "mutex: session is expired".
    #[error("{0}")]
    Unknown(String),
    /// A bug or a corrupted log entry: the output did not match the command.
    #[error("etcdserver: {0}")]
    Internal(String),
}

impl From<CodecError> for ApiError {
    fn from(e: CodecError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

impl From<coordbench_kv::auth::AuthError> for ApiError {
    fn from(e: coordbench_kv::auth::AuthError) -> Self {
        ApiError::Kv(KvError::Auth(e))
    }
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        match e {
            ApiError::Node(n) => node_status(&n),
            ApiError::Kv(k) => Status::new(code_of(k.grpc_code()), k.to_string()),
            ApiError::TooLarge => Status::invalid_argument(e.to_string()),
            ApiError::InvalidArgument(m) => Status::invalid_argument(m),
            ApiError::Unknown(m) => Status::unknown(m),
            ApiError::Internal(_) => Status::internal(e.to_string()),
        }
    }
}

/// etcd's statuses for a member that cannot serve: all `Unavailable`, so that clients
/// retry (this member later, or another one).
fn node_status(e: &NodeError) -> Status {
    match e {
        NodeError::NoLeader => Status::unavailable("etcdserver: no leader"),
        NodeError::Dropped => Status::unavailable("etcdserver: leader changed"),
        NodeError::Timeout => Status::unavailable("etcdserver: request timed out"),
        NodeError::Stopped => Status::unavailable("etcdserver: server stopped"),
        NodeError::Rejected(m) if m.contains("too large") => {
            Status::invalid_argument("etcdserver: request is too large")
        }
        NodeError::Rejected(m) => Status::invalid_argument(format!("etcdserver: {m}")),
    }
}

fn code_of(c: GrpcCode) -> Code {
    match c {
        GrpcCode::InvalidArgument => Code::InvalidArgument,
        GrpcCode::NotFound => Code::NotFound,
        GrpcCode::FailedPrecondition => Code::FailedPrecondition,
        GrpcCode::OutOfRange => Code::OutOfRange,
        GrpcCode::PermissionDenied => Code::PermissionDenied,
        GrpcCode::Unauthenticated => Code::Unauthenticated,
        GrpcCode::Unknown => Code::Unknown,
        GrpcCode::Internal => Code::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_etcd() {
        let s = Status::from(ApiError::Node(NodeError::NoLeader));
        assert_eq!(
            (s.code(), s.message()),
            (Code::Unavailable, "etcdserver: no leader")
        );
        let s = Status::from(ApiError::Kv(KvError::Compacted {
            compact_revision: 5,
        }));
        assert_eq!(s.code(), Code::OutOfRange);
        assert_eq!(
            s.message(),
            "etcdserver: mvcc: required revision has been compacted"
        );
        let s = Status::from(ApiError::Kv(KvError::LeaseNotFound { id: 1 }));
        assert_eq!(s.code(), Code::NotFound);
        let s = Status::from(ApiError::TooLarge);
        assert_eq!(
            (s.code(), s.message()),
            (Code::InvalidArgument, "etcdserver: request is too large")
        );
        let s = Status::from(ApiError::Node(NodeError::Rejected(
            "command too large".into(),
        )));
        assert_eq!(s.message(), "etcdserver: request is too large");
    }
}
