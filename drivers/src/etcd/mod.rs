//! The etcd v3 driver: real etcd and the built-in Raft engine, through the etcd-client crate.
//!
//! One [`EtcdCoordinator`] holds `conns` transports ([`transport`]: an HTTP/2 connection
//! to every endpoint, calls balanced over them); client `i` uses transport `i % conns`, so
//! many clients can share few connections as in etcd's own benchmark tool.
//!
//! Recipes follow etcd's concurrency package: locks ([`lock`]) and elections ([`election`])
//! queue by create revision under a prefix ([`queue`]); service instances are leased keys
//! ([`registry`]). The sessions on one connection ([`Connection`]) share its lease
//! keep-alive stream ([`lease_mux`]) and its watch stream ([`watch_mux`]), as a clientv3
//! client's sessions do, so thousands of sessions, config watchers or lock waiters need no
//! more HTTP/2 streams than connections.
//!
//! Secured clusters ([`EtcdSecurity`]): `https://` endpoints are dialled over TLS by the
//! transport, and with a user etcd-client authenticates each connection's client once and
//! sends the token with every call, re-authenticating when a token is refused (etcd's
//! simple tokens expire after 5 idle minutes).

mod election;
mod errors;
mod lease_mux;
mod lock;
mod prefix_view;
mod queue;
mod registry;
mod session;
pub mod transport;
mod versioned;
mod watch;
mod watch_mux;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coordbench_tls::rustls::ClientConfig;
use etcd_client::{Client, ConnectOptions, GetOptions};

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
    /// TLS and user, for secured clusters.
    pub security: EtcdSecurity,
}

/// How the driver reaches a secured cluster: TLS for `https://` endpoints (bare
/// `host:port` endpoints then mean https), and an etcd user.
#[derive(Clone, Default)]
pub struct EtcdSecurity {
    pub tls: Option<Arc<ClientConfig>>,
    pub user: Option<EtcdUser>,
}

/// An etcd user and its password; `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdUser {
    pub name: String,
    password: String,
}

impl EtcdUser {
    pub fn new(name: impl Into<String>, password: impl Into<String>) -> Self {
        EtcdUser {
            name: name.into(),
            password: password.into(),
        }
    }

    /// The password, for etcd's Authenticate (and for creating the user).
    pub fn password(&self) -> &str {
        &self.password
    }
}

impl std::fmt::Debug for EtcdUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EtcdUser({})", self.name)
    }
}

impl std::fmt::Debug for EtcdSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdSecurity")
            .field("tls", &self.tls.is_some())
            .field("user", &self.user)
            .finish()
    }
}

impl EtcdSecurity {
    /// etcd-client's options for this user: authenticate at once, renew refused tokens.
    fn options(&self) -> Option<ConnectOptions> {
        self.user.as_ref().map(|u| {
            ConnectOptions::new()
                .with_user(u.name.clone(), u.password.clone())
                .with_auto_token_refresh(true)
        })
    }

    fn dialing(&self, connect_timeout: Duration) -> Dialing {
        Dialing {
            connect_timeout,
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(5),
            tls: self.tls.clone(),
        }
    }
}

/// One etcd-client over one transport to `endpoints` with `security`, as provisioning and
/// fault injection use to ask members for their status. Fails within about the connect
/// timeout when no endpoint answers (or authentication fails).
pub async fn connect_client(
    endpoints: &[String],
    security: &EtcdSecurity,
    connect_timeout: Duration,
) -> Result<Client, DriverError> {
    let endpoints: Vec<String> = endpoints
        .iter()
        .map(|e| normalize(e, security.tls.is_some()))
        .collect();
    let shown = endpoints.join(",");
    let transport = Transport::connect(&endpoints, security.dialing(connect_timeout))
        .await
        .map_err(|e| transport_error(&shown, e))?;
    let client = transport.etcd_client_with(security.options());
    tokio::time::timeout(connect_timeout, client)
        .await
        .map_err(|_| unreachable(&shown, "no answer to Authenticate"))?
        .map_err(|e| authenticate_error(&shown, security, e))
}

/// What every session on one connection shares. A session holds only its own key-value
/// handle beside it: a whole `Client` per session (a boxed service per sub-client) was
/// 3.7 KB a session at 10,000 lock contenders.
struct Connection {
    client: Client,
    /// The lease keep-alive stream.
    leases: lease_mux::LeaseMux,
    /// The watch stream.
    watches: watch_mux::SharedWatch,
}

impl Connection {
    fn new(client: Client) -> Connection {
        Connection {
            leases: lease_mux::LeaseMux::start(client.clone()),
            watches: watch_mux::SharedWatch::default(),
            client,
        }
    }
}

/// A connected etcd-API target.
pub struct EtcdCoordinator {
    connections: Vec<Arc<Connection>>,
    endpoints: Vec<String>,
    connect_timeout: Duration,
}

impl EtcdCoordinator {
    /// Connects and checks that some member answers within the connect timeout, so an
    /// unreachable endpoint fails here with a clear error rather than hanging a run.
    pub async fn connect(config: &EtcdConfig) -> Result<Self, DriverError> {
        if config.endpoints.is_empty() {
            return Err(DriverError::Unsupported("no etcd endpoints given".into()));
        }
        let mut connections = Vec::with_capacity(config.conns.max(1));
        for _ in 0..config.conns.max(1) {
            let client =
                connect_client(&config.endpoints, &config.security, config.connect_timeout).await?;
            connections.push(Arc::new(Connection::new(client)));
        }
        let tls = config.security.tls.is_some();
        let coordinator = EtcdCoordinator {
            connections,
            endpoints: config.endpoints.iter().map(|e| normalize(e, tls)).collect(),
            connect_timeout: config.connect_timeout,
        };
        coordinator.server_version().await?;
        coordinator.check_access(&config.security).await?;
        Ok(coordinator)
    }

    /// A read under the driver's key prefix, so a cluster that wants a user (or a user
    /// without permission there) fails the connect in one line rather than every operation.
    async fn check_access(&self, security: &EtcdSecurity) -> Result<(), DriverError> {
        let mut client = self.client(0);
        let read = client.get(
            KEY_PREFIX,
            Some(GetOptions::new().with_prefix().with_count_only()),
        );
        let answer = tokio::time::timeout(self.connect_timeout, read)
            .await
            .map_err(|_| unreachable(&self.endpoints.join(","), "no answer to a read"))?;
        match answer.map_err(map_error) {
            Ok(_) => Ok(()),
            Err(DriverError::Denied(why)) => Err(DriverError::Denied(match &security.user {
                None => format!("the cluster refused a read without a user ({why}); pass --user NAME[:PASSWORD]"),
                Some(u) => format!("user {} may not read {KEY_PREFIX} ({why}); grant it readwrite on the keyspace", u.name),
            })),
            Err(other) => Err(other),
        }
    }

    /// A client handle on connection `i % conns`.
    pub fn client(&self, i: usize) -> Client {
        self.connection(i).client.clone()
    }

    fn connection(&self, i: usize) -> &Arc<Connection> {
        &self.connections[i % self.connections.len()]
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
            self.connection(client).clone(),
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
    // A TLS failure names its own fix; the cluster is running.
    let hint = if detail.starts_with("TLS") || detail.contains("TLS:") {
        ""
    } else {
        " (is the cluster running? check --endpoints)"
    };
    DriverError::Unreachable {
        endpoint: endpoints.to_string(),
        detail: format!("{detail}{hint}"),
    }
}

fn transport_error(endpoints: &str, e: TransportError) -> DriverError {
    match e {
        TransportError::BadEndpoint { .. } => DriverError::Unsupported(e.to_string()),
        TransportError::Unreachable { detail } => unreachable(endpoints, &detail),
    }
}

/// A failed client setup: with a user that is Authenticate, whose refusal names the user.
fn authenticate_error(
    endpoints: &str,
    security: &EtcdSecurity,
    e: etcd_client::Error,
) -> DriverError {
    match (map_error(e), &security.user) {
        (DriverError::Denied(why), Some(u)) => {
            DriverError::Denied(format!(
                "authenticating as etcd user {}: {why} (check the password: --user NAME:PASSWORD or $COORDBENCH_ETCD_PASSWORD)",
                u.name
            ))
        }
        (DriverError::Unreachable { detail, .. }, _) => unreachable(endpoints, &detail),
        (other, Some(u)) => {
            DriverError::Denied(format!("authenticating as etcd user {}: {other}", u.name))
        }
        (other, None) => other,
    }
}

/// URLs want a scheme; users often write `host:port` (https when TLS is configured).
fn normalize(endpoint: &str, tls: bool) -> String {
    if endpoint.contains("://") {
        endpoint.to_string()
    } else if tls {
        format!("https://{endpoint}")
    } else {
        format!("http://{endpoint}")
    }
}
