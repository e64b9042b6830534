//! The ZooKeeper driver: real ZooKeeper and the built-in Zab engine, through the
//! zookeeper-client crate.
//!
//! Every client has its own ZooKeeper session, which is its own TCP connection: a session
//! owns the client's ephemeral lock nodes and expires as a unit, so sharing one among
//! clients would make one client's crash (`abandon`) everyone's. There is therefore no
//! `conns` setting; the configuration refuses `--conns` below `--clients` for ZooKeeper.
//!
//! Keys are znode paths (the kv workload's `/coordbench/kv/00000001` as it is); recipes
//! keep their nodes under `/coordbench/` (`lock/`, `naive-lock/`, `election/`, `services/`).
//!
//! A coordinator made [`ZkCoordinator::with_freezable_sessions`] opens every session through
//! a pausable relay of its own ([`relay`]), so that [`Session::freeze`] can stop the session's
//! traffic, pings included; other runs connect directly and pay nothing for it.

mod discovery;
mod election;
mod errors;
mod follow;
pub mod four_letter;
mod lock;
mod pending;
mod queue;
mod relay;
mod session;
mod versioned;
mod watch;

use std::time::Duration;

use async_trait::async_trait;
use zookeeper_client::Client;

use crate::{ApiFamily, Coordinator, DriverError, Session, SessionOptions};
pub use errors::map_error;
// Shared with the zookeeper-async driver, which keeps the same paths and names.
use four_letter::{four_letter_word, version};
pub(crate) use queue::sequence;
pub(crate) use session::znode_path;
use session::ZkSession;

/// Znodes this driver creates for recipes live under this path.
pub const ROOT: &str = "/coordbench";

/// How to connect.
#[derive(Debug, Clone)]
pub struct ZkConfig {
    /// Servers as `host:port`.
    pub endpoints: Vec<String>,
    /// How long establishing a session may take before the target counts as unreachable.
    pub connect_timeout: Duration,
}

/// A reachable ZooKeeper-API target; sessions are opened per client.
pub struct ZkCoordinator {
    endpoints: Vec<String>,
    /// The connect string: endpoints joined by commas.
    cluster: String,
    connect_timeout: Duration,
    /// Sessions connect through a relay each, so they can be frozen.
    freezable: bool,
}

impl ZkCoordinator {
    /// Checks that a session can be established within the connect timeout, so an
    /// unreachable cluster fails here with a clear error rather than in every client.
    pub async fn connect(config: &ZkConfig) -> Result<Self, DriverError> {
        let endpoints: Vec<String> = config.endpoints.iter().map(|e| normalize(e)).collect();
        if endpoints.is_empty() {
            return Err(DriverError::Unsupported(
                "no ZooKeeper endpoints given".into(),
            ));
        }
        let coordinator = ZkCoordinator {
            cluster: endpoints.join(","),
            endpoints,
            connect_timeout: config.connect_timeout,
            freezable: false,
        };
        // Dropping the probe closes its session.
        establish(
            &coordinator.cluster,
            coordinator.connect_timeout,
            config.connect_timeout,
            false,
        )
        .await
        .map_err(|e| match e {
            DriverError::Unreachable { detail, .. } | DriverError::Server(detail) => {
                unreachable(&coordinator.cluster, &detail)
            }
            DriverError::Timeout(_) => {
                unreachable(&coordinator.cluster, "no session established in time")
            }
            other => other,
        })?;
        Ok(coordinator)
    }

    /// Opens every later session through a pausable relay of its own when `on`, so
    /// [`Session::freeze`] works (`--holder-pause`); without it, freeze is unsupported.
    pub fn with_freezable_sessions(mut self, on: bool) -> Self {
        self.freezable = on;
        self
    }
}

/// Establishes a new session on `cluster` with `session_timeout`, bounded by
/// `connect_timeout`. A `detached` session is not closed when its client is dropped: the
/// connection just ends and the server expires the session (how [`Session::abandon`]
/// works); a plain one is closed when its client is dropped.
pub(super) async fn establish(
    cluster: &str,
    connect_timeout: Duration,
    session_timeout: Duration,
    detached: bool,
) -> Result<Client, DriverError> {
    let mut connector = Client::connector()
        .with_session_timeout(session_timeout)
        .with_fail_eagerly();
    if detached {
        connector = connector.with_detached();
    }
    tokio::time::timeout(connect_timeout, connector.connect(cluster))
        .await
        .map_err(|_| DriverError::Timeout(connect_timeout))?
        .map_err(map_error)
}

#[async_trait]
impl Coordinator for ZkCoordinator {
    fn family(&self) -> ApiFamily {
        ApiFamily::ZooKeeper
    }

    async fn open_session(
        &self,
        client: usize,
        options: &SessionOptions,
    ) -> Result<Box<dyn Session>, DriverError> {
        let relay = match self.freezable {
            true => Some(relay::Relay::start(&self.endpoints).await.map_err(|e| {
                DriverError::Unreachable {
                    endpoint: "127.0.0.1 (session relay)".into(),
                    detail: format!("cannot open the session's relay: {e}"),
                }
            })?),
            false => None,
        };
        let via = relay
            .as_ref()
            .map_or_else(|| self.cluster.clone(), relay::Relay::connect_string);
        let zk = establish(&via, self.connect_timeout, options.ttl, true).await?;
        Ok(Box::new(ZkSession::new(
            zk,
            client,
            self.cluster.clone(),
            self.connect_timeout,
            relay,
        )))
    }

    /// From `srvr` (the one four-letter word ZooKeeper whitelists by default); "unknown"
    /// when no server answers it, since the client protocol does not carry a version.
    async fn server_version(&self) -> Result<String, DriverError> {
        for endpoint in &self.endpoints {
            if let Some(version) = four_letter_word(endpoint, "srvr")
                .await
                .ok()
                .and_then(|r| version(&r))
            {
                return Ok(version);
            }
        }
        Ok("unknown (no server answered srvr)".into())
    }
}

pub(crate) fn unreachable(cluster: &str, detail: &str) -> DriverError {
    DriverError::Unreachable {
        endpoint: cluster.to_string(),
        detail: format!("{detail} (is the cluster running? check --endpoints)"),
    }
}

/// Users may paste URLs (`http://host:port/`); ZooKeeper wants `host:port`.
pub(crate) fn normalize(endpoint: &str) -> String {
    let rest = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    rest.trim_end_matches('/').to_string()
}
