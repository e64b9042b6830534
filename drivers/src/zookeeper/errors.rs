//! Maps the ZooKeeper client's errors, and watch events that say the session ended, onto
//! the driver's error kinds.

use std::time::Duration;

use super::client::{Error, EventType, SessionState, WatchedEvent};

use crate::DriverError;

/// Classifies a client error so results count it under a stable kind.
pub fn map_error(error: Error) -> DriverError {
    match error {
        // Moved: the session was taken over by another connection; for this client it is
        // gone. Closed: abandoned or closed, as a crashed client's session would be.
        Error::SessionExpired | Error::SessionMoved | Error::Closed => {
            DriverError::SessionExpired(error.to_string())
        }
        Error::ConnectionLoss | Error::Connect(_) => DriverError::Unreachable {
            endpoint: "zookeeper".into(),
            detail: one_line(&error.to_string()),
        },
        Error::Code(code) if code == coordbench_zk_proto::code::OPERATION_TIMEOUT => {
            DriverError::Timeout(Duration::ZERO)
        }
        Error::BadArguments(_) | Error::Unimplemented => {
            DriverError::Unsupported(error.to_string())
        }
        other => DriverError::Server(one_line(&other.to_string())),
    }
}

/// Fails if a watch fired because the session ended rather than because its node changed;
/// `waiting` says what the caller was waiting for.
pub(super) fn check_event(event: &WatchedEvent, waiting: &str) -> Result<(), DriverError> {
    match (event.event_type, event.session_state) {
        (EventType::Session, SessionState::Expired) => Err(DriverError::SessionExpired(format!(
            "session expired while waiting for {waiting}"
        ))),
        // Our own abandon or close dropped the client.
        (EventType::Session, SessionState::Closed) => Err(DriverError::SessionExpired(format!(
            "the session was abandoned or closed while waiting for {waiting}"
        ))),
        (EventType::Session, state) if state.is_terminated() => Err(DriverError::Server(format!(
            "session ended ({state:?}) while waiting for {waiting}"
        ))),
        _ => Ok(()),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
