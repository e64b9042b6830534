//! The auth errors clients see, worded and coded as etcd's (its `rpctypes`), since etcd's
//! clients recognise them by message: etcd-client and clientv3 re-authenticate on
//! "invalid auth token", and etcd servers retry on "revision of auth store is old".

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::error::GrpcCode;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Error)]
pub enum AuthError {
    #[error("etcdserver: root user does not exist")]
    RootUserNotExist,
    #[error("etcdserver: root user does not have root role")]
    RootRoleNotExist,
    #[error("etcdserver: user name already exists")]
    UserAlreadyExist,
    #[error("etcdserver: user name is empty")]
    UserEmpty,
    #[error("etcdserver: user name not found")]
    UserNotFound,
    #[error("etcdserver: role name already exists")]
    RoleAlreadyExist,
    #[error("etcdserver: role name not found")]
    RoleNotFound,
    #[error("etcdserver: role name is empty")]
    RoleEmpty,
    #[error("etcdserver: authentication failed, invalid user ID or password")]
    AuthFailed,
    #[error("etcdserver: permission not given")]
    PermissionNotGiven,
    #[error("etcdserver: permission denied")]
    PermissionDenied,
    #[error("etcdserver: role is not granted to the user")]
    RoleNotGranted,
    #[error("etcdserver: permission is not granted to the role")]
    PermissionNotGranted,
    #[error("etcdserver: authentication is not enabled")]
    AuthNotEnabled,
    #[error("etcdserver: invalid auth token")]
    InvalidAuthToken,
    #[error("etcdserver: invalid auth management")]
    InvalidAuthMgmt,
    /// The auth state changed between the request's check and its apply; the server that
    /// proposed it retries (clients never see it unless that keeps happening).
    #[error("etcdserver: revision of auth store is old")]
    AuthOldRevision,
    /// A password given for a user added with `--no-password`. etcd has no gRPC error for
    /// it, so clients see its plain Go error (code Unknown).
    #[error("auth: authentication failed, password was given for no password user")]
    NoPasswordUser,
}

impl AuthError {
    /// The status code etcd sends with this error.
    pub fn grpc_code(&self) -> GrpcCode {
        match self {
            AuthError::UserEmpty
            | AuthError::RoleEmpty
            | AuthError::AuthFailed
            | AuthError::PermissionNotGiven
            | AuthError::InvalidAuthMgmt
            | AuthError::AuthOldRevision => GrpcCode::InvalidArgument,
            AuthError::PermissionDenied => GrpcCode::PermissionDenied,
            AuthError::InvalidAuthToken => GrpcCode::Unauthenticated,
            AuthError::NoPasswordUser => GrpcCode::Unknown,
            AuthError::RootUserNotExist
            | AuthError::RootRoleNotExist
            | AuthError::UserAlreadyExist
            | AuthError::UserNotFound
            | AuthError::RoleAlreadyExist
            | AuthError::RoleNotFound
            | AuthError::RoleNotGranted
            | AuthError::PermissionNotGranted
            | AuthError::AuthNotEnabled => GrpcCode::FailedPrecondition,
        }
    }
}
