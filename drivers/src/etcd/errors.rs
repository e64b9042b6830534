//! Maps etcd-client errors onto the driver's error kinds.

use etcd_client::Error;
use tonic::Code;

use crate::DriverError;

/// Classifies an etcd-client error so results count it under a stable kind.
pub fn map_error(error: Error) -> DriverError {
    match error {
        Error::TransportError(e) => DriverError::Unreachable {
            endpoint: "etcd".into(),
            detail: one_line(&e.to_string()),
        },
        Error::IoError(e) => DriverError::Unreachable {
            endpoint: "etcd".into(),
            detail: one_line(&e.to_string()),
        },
        Error::GRpcStatus(status) => {
            let message = one_line(status.message());
            match status.code() {
                Code::DeadlineExceeded => DriverError::Timeout(std::time::Duration::ZERO),
                _ if message.contains("no leader") || message.contains("leader changed") => {
                    DriverError::NoLeader(message)
                }
                _ if message.contains("requested lease not found") => {
                    DriverError::SessionExpired(message)
                }
                Code::Unauthenticated | Code::PermissionDenied => DriverError::Denied(message),
                _ if is_auth_refusal(&message) => DriverError::Denied(message),
                Code::Unavailable => DriverError::Unreachable {
                    endpoint: "etcd".into(),
                    detail: message,
                },
                code => DriverError::Server(format!("{code:?}: {message}")),
            }
        }
        other => DriverError::Server(one_line(&other.to_string())),
    }
}

/// etcd's auth refusals sent with other codes (InvalidArgument, FailedPrecondition).
fn is_auth_refusal(message: &str) -> bool {
    [
        "user name is empty",
        "authentication failed",
        "invalid auth token",
        "authentication is not enabled",
        "permission denied",
    ]
    .iter()
    .any(|m| message.contains(m))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
