//! Maps zookeeper-async errors onto the driver's error kinds.

use std::time::Duration;

use zookeeper_async::ZkError;

use crate::DriverError;

/// Classifies a zookeeper-async error so results count it under the same kinds as the
/// ZooKeeper driver's.
pub fn map_error(error: ZkError) -> DriverError {
    match error {
        // Moved: the session was taken over by another connection; for this client it is gone.
        ZkError::SessionExpired | ZkError::SessionMoved => {
            DriverError::SessionExpired(error.to_string())
        }
        // The crate answers ConnectionLoss for every request it dropped when its connection
        // ended; it reconnects on its own.
        ZkError::ConnectionLoss => DriverError::Unreachable {
            endpoint: "zookeeper".into(),
            detail: "connection lost".into(),
        },
        ZkError::OperationTimeout => DriverError::Timeout(Duration::ZERO),
        ZkError::BadArguments | ZkError::Unimplemented => {
            DriverError::Unsupported(error.to_string())
        }
        other => DriverError::Server(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_fall_into_the_primary_drivers_kinds() {
        assert_eq!(map_error(ZkError::SessionExpired).kind(), "session_expired");
        assert_eq!(map_error(ZkError::ConnectionLoss).kind(), "unreachable");
        assert_eq!(map_error(ZkError::OperationTimeout).kind(), "timeout");
        assert_eq!(map_error(ZkError::NodeExists).kind(), "server");
        assert!(!map_error(ZkError::NoNode).to_string().contains('\n'));
    }
}
