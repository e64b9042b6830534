//! The etcd v3 driver: real etcd and the built-in Raft engine, through the etcd-client crate.
//!
//! One [`EtcdCoordinator`] holds `conns` transports ([`transport`]: an HTTP/2 connection
//! to every endpoint, calls balanced over them); client `i` uses transport `i % conns`, so
//! many clients can share few connections as in etcd's own benchmark tool.
//!
//! Recipes follow etcd's concurrency package: locks ([`lock`]) and elections ([`election`])
//! queue by create revision under a prefix ([`queue`]); service instances are leased keys
//! ([`registry`]). A session's watch handles ([`watch`]) share one watch stream
//! ([`watch_mux`]), so thousands of config watchers need no more HTTP/2 streams than sessions.

mod election;
mod errors;
mod lock;
mod prefix_view;
mod queue;
mod registry;
mod session;
pub mod transport;
mod versioned;
mod watch;
mod watch_mux;

use std::time::Duration;

use async_trait::async_trait;
use etcd_client::Client;

use crate::{ApiFamily, Coordinator, DriverError, Session, SessionOptions};
pub use errors::map_error;
use session::EtcdSession;
use transport::{Dialing, Transport, TransportError};

/// Keys this driver creates for recipes live under this prefix.
pub const KEY_PREFIX: &str = "/coordbench/";

/// How to connect.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// Client URLs (`http://127.0.0.1:2379`) or `host:port`.
    pub endpoints: Vec<String>,
    /// Number of gRPC connections shared by the clients (at least 1).
    pub conns: usize,
    /// How long a connection attempt may take before the target counts as unreachable.
    pub connect_timeout: Duration,
}

/// A connected etcd-API target.
pub struct EtcdCoordinator {
    clients: Vec<Client>,
    endpoints: Vec<String>,
    connect_timeout: Duration,
}

impl EtcdCoordinator {
    /// Connects and checks that some member answers within the connect timeout, so an
    /// unreachable endpoint fails here with a clear error rather than hanging a run.
    pub async fn connect(config: &EtcdConfig) -> Result<Self, DriverError> {
        let endpoints: Vec<String> = config.endpoints.iter().map(|e| normalize(e)).collect();
        let shown = endpoints.join(",");
        if endpoints.is_empty() {
            return Err(DriverError::Unsupported("no etcd endpoints given".into()));
        }
        let dialing = Dialing {
            connect_timeout: config.connect_timeout,
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(5),
        };
        let mut clients = Vec::with_capacity(config.conns.max(1));
        for _ in 0..config.conns.max(1) {
            let transport = Transport::connect(&endpoints, dialing)
                .await
                .map_err(|e| match e {
                    TransportError::BadEndpoint { .. } => DriverError::Unsupported(e.to_string()),
                    TransportError::Unreachable { detail } => unreachable(&shown, &detail),
                })?;
            let client = transport
                .etcd_client()
                .await
                .map_err(|e| unreachable(&shown, &e.to_string()))?;
            clients.push(client);
        }
        let coordinator = EtcdCoordinator {
            clients,
            endpoints,
            connect_timeout: config.connect_timeout,
        };
        coordinator.server_version().await?;
        Ok(coordinator)
    }

    /// A client handle on connection `i % conns`.
    pub fn client(&self, i: usize) -> Client {
        self.clients[i % self.clients.len()].clone()
    }
}

#[async_trait]
impl Coordinator for EtcdCoordinator {
    fn family(&self) -> ApiFamily {
        ApiFamily::Etcd
    }

    async fn open_session(
        &self,
        client: usize,
        options: &SessionOptions,
    ) -> Result<Box<dyn Session>, DriverError> {
        Ok(Box::new(EtcdSession::new(
            self.client(client),
            client,
            options.ttl,
        )))
    }

    async fn server_version(&self) -> Result<String, DriverError> {
        let shown = self.endpoints.join(",");
        let mut client = self.client(0);
        let status = tokio::time::timeout(self.connect_timeout, client.status())
            .await
            .map_err(|_| unreachable(&shown, "no answer to a status request"))?
            .map_err(|e| match map_error(e) {
                DriverError::Unreachable { detail, .. } => unreachable(&shown, &detail),
                other => other,
            })?;
        Ok(status.version().to_string())
    }
}

fn unreachable(endpoints: &str, detail: &str) -> DriverError {
    DriverError::Unreachable {
        endpoint: endpoints.to_string(),
        detail: format!("{detail} (is the cluster running? check --endpoints)"),
    }
}

/// URLs want a scheme; users often write `host:port`.
fn normalize(endpoint: &str) -> String {
    if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("http://{endpoint}")
    }
}
