//! Errors of the kv state machine, worded exactly as etcd's gRPC errors.
//!
//! etcd's Go client recognises server errors by their message text, so each
//! variant's `Display` is the string etcd sends, and [`KvError::grpc_code`]
//! gives the status code etcd pairs it with. The gRPC layer maps one to the
//! other without having to know any semantics.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A failed request. Errors are part of the replicated output, so they are
/// deterministic, comparable and serialisable like any response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Error)]
pub enum KvError {
    /// A read, watch or compaction asked for a revision below the compaction point.
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted {
        /// Oldest revision still readable (etcd's `compact_revision`).
        compact_revision: i64,
    },
    /// A read or compaction asked for a revision above the current one.
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision { current_revision: i64 },
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound { id: i64 },
    #[error("etcdserver: lease already exists")]
    LeaseExists { id: i64 },
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge { ttl: i64 },
    /// `ignore_value` / `ignore_lease` on a key that does not exist.
    #[error("etcdserver: key not found")]
    KeyNotFound,
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    #[error("etcdserver: value is provided")]
    ValueProvided,
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    /// A txn writes a key twice, or puts a key that it also deletes.
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    /// Txns nested deeper than [`crate::txn::MAX_TXN_DEPTH`]; etcd's protobuf
    /// decoder would refuse such a message before it reached the server.
    #[error("etcdserver: txn nested too deeply")]
    TxnTooDeep,
    /// A write op was given to a read-only entry point such as
    /// [`crate::KvStore::txn_read_only`].
    #[error("etcdserver: txn is not read-only")]
    NotReadOnly,
    /// A put's value is larger than [`crate::MAX_VALUE_LEN`].
    #[error("etcdserver: request is too large")]
    RequestTooLarge,
    /// A command sent as a user wraps another such command.
    #[error("etcdserver: a request carries more than one user")]
    NestedCaller,
    /// Refused by auth (etcd's wording and code).
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthError),
    /// The command's log index is not above the last applied one; nothing changed.
    #[error("kv: log index {index} already applied (applied index {applied})")]
    AlreadyApplied { index: u64, applied: u64 },
}

/// gRPC status codes etcd uses for these errors (kept here so this crate
/// need not depend on tonic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcCode {
    InvalidArgument,
    NotFound,
    FailedPrecondition,
    OutOfRange,
    PermissionDenied,
    Unauthenticated,
    Internal,
    /// What etcd sends for an error that has no gRPC mapping (a plain Go error).
    Unknown,
}

impl KvError {
    /// The status code etcd sends with this error.
    pub fn grpc_code(&self) -> GrpcCode {
        match self {
            KvError::Compacted { .. } | KvError::FutureRevision { .. } => GrpcCode::OutOfRange,
            KvError::LeaseTtlTooLarge { .. } => GrpcCode::OutOfRange,
            KvError::LeaseNotFound { .. } => GrpcCode::NotFound,
            KvError::LeaseExists { .. } => GrpcCode::FailedPrecondition,
            KvError::KeyNotFound
            | KvError::EmptyKey
            | KvError::ValueProvided
            | KvError::LeaseProvided
            | KvError::DuplicateKey
            | KvError::TooManyOps
            | KvError::TxnTooDeep
            | KvError::NotReadOnly
            | KvError::RequestTooLarge
            | KvError::NestedCaller => GrpcCode::InvalidArgument,
            KvError::Auth(a) => a.grpc_code(),
            KvError::AlreadyApplied { .. } => GrpcCode::Internal,
        }
    }
}

/// A command or snapshot that could not be decoded or failed validation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    #[error("kv: cannot decode: {0}")]
    Decode(String),
    #[error("kv: bad snapshot: {0}")]
    BadSnapshot(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_etcd() {
        assert_eq!(
            KvError::Compacted {
                compact_revision: 3
            }
            .to_string(),
            "etcdserver: mvcc: required revision has been compacted"
        );
        assert_eq!(
            KvError::LeaseNotFound { id: 1 }.to_string(),
            "etcdserver: requested lease not found"
        );
        assert_eq!(
            KvError::KeyNotFound.to_string(),
            "etcdserver: key not found"
        );
        assert_eq!(
            KvError::DuplicateKey.to_string(),
            "etcdserver: duplicate key given in txn request"
        );
        assert_eq!(KvError::DuplicateKey.grpc_code(), GrpcCode::InvalidArgument);
        assert_eq!(
            KvError::LeaseNotFound { id: 1 }.grpc_code(),
            GrpcCode::NotFound
        );
    }
}
