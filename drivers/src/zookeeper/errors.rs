//! Maps zookeeper-client errors onto the driver's error kinds.

use std::time::Duration;

use zookeeper_client::Error;

use crate::DriverError;

/// Classifies a zookeeper-client error so results count it under a stable kind.
pub fn map_error(error: Error) -> DriverError {
    match error {
        // Moved: the session was taken over by another connection; for this client it is gone.
        Error::SessionExpired | Error::SessionMoved => {
            DriverError::SessionExpired(error.to_string())
        }
        Error::ConnectionLoss | Error::NoHosts => DriverError::Unreachable {
            endpoint: "zookeeper".into(),
            detail: error.to_string(),
        },
        Error::Timeout => DriverError::Timeout(Duration::ZERO),
        Error::BadArguments(_) | Error::Unimplemented => {
            DriverError::Unsupported(error.to_string())
        }
        // Socket-level failures arrive as custom errors carrying the io::Error.
        Error::Custom(_) => DriverError::Unreachable {
            endpoint: "zookeeper".into(),
            detail: one_line(&error.to_string()),
        },
        other => DriverError::Server(one_line(&other.to_string())),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
