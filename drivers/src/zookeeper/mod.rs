//! The ZooKeeper driver: real ZooKeeper and the built-in Zab engine, through the driver's
//! own client ([`client`]: sessions over ZooKeeper's wire protocol).
//!
//! Every client has its own ZooKeeper session, which is its own TCP connection: a session
//! owns the client's ephemeral lock nodes and expires as a unit, so sharing one among
//! clients would make one client's crash (`abandon`) everyone's. There is therefore no
//! `conns` setting; the configuration refuses `--conns` below `--clients` for ZooKeeper.
//!
//! Keys are znode paths (the kv workload's `/coordbench/kv/00000001` as it is); recipes
//! keep their nodes under `/coordbench/` (`lock/`, `naive-lock/`, `election/`, `services/`).
//!
//! Every session authenticates with the run's credentials before its first request, and
//! every node it creates gets the run's ACL, under the run's chroot ([`access`]).
//!
//! A coordinator made [`ZkCoordinator::with_freezable_sessions`] opens every session through
//! a pausable relay of its own ([`relay`]), so that [`Session::freeze`] can stop the session's
//! traffic, pings included; other runs connect directly and pay nothing for it.

pub mod access;
pub mod client;
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
pub mod tls;
mod versioned;
mod watch;

use std::time::Duration;

use async_trait::async_trait;
use client::{Client, Options};

use crate::{ApiFamily, Coordinator, DriverError, Session, SessionOptions};
pub use access::{NodeAcl, ZkAccess};
pub use errors::map_error;
pub use tls::ZkTls;
// Shared with the zookeeper-async driver, which keeps the same paths and names.
use four_letter::{four_letter_word, version};
pub(crate) use queue::sequence;
pub(crate) use session::znode_path;
use session::ZkSession;

/// Passes over the endpoints a new session's connection makes, within the connect timeout.
const PASSES: u32 = 8;
/// The pause after the first pass; it doubles after each, up to [`MAX_PASS_PAUSE`].
const PASS_PAUSE: Duration = Duration::from_millis(100);
const MAX_PASS_PAUSE: Duration = Duration::from_secs(1);

/// Znodes this driver creates for recipes live under this path.
pub const ROOT: &str = "/coordbench";

/// How to connect.
#[derive(Debug, Clone)]
pub struct ZkConfig {
    /// Servers as `host:port`.
    pub endpoints: Vec<String>,
    /// How long establishing a session may take before the target counts as unreachable.
    pub connect_timeout: Duration,
    /// Credentials, node ACL and chroot (default: anonymous, open, at the root).
    pub access: ZkAccess,
}

/// A reachable ZooKeeper-API target; sessions are opened per client.
pub struct ZkCoordinator {
    endpoints: Vec<String>,
    /// The connect string: endpoints joined by commas, then the chroot.
    cluster: String,
    access: ZkAccess,
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
        let hosts = endpoints.join(",");
        let coordinator = ZkCoordinator {
            cluster: config.access.connect_string(&hosts),
            endpoints,
            connect_timeout: config.connect_timeout,
            freezable: false,
            access: config.access.clone(),
        };
        // An authentication failure is said as it is; anything else as unreachable.
        let unreachable_as = |cluster: &str, e: Probed| match e {
            Probed::Auth(e) => e,
            Probed::Other(
                DriverError::Unreachable { detail, .. } | DriverError::Server(detail),
            ) => unreachable(cluster, &detail),
            Probed::Other(DriverError::Timeout(_)) => {
                unreachable(cluster, "no session established in time")
            }
            Probed::Other(other) => other,
        };
        // Dropping a probe closes its session.
        let root = match coordinator.probe(&hosts).await {
            Ok(root) => root,
            Err(e) => {
                return Err(coordinator
                    .explain_tls(&hosts)
                    .await
                    .unwrap_or_else(|| unreachable_as(&hosts, e)))
            }
        };
        coordinator
            .access
            .ensure_chroot(&root)
            .await
            .map_err(|e| access_error(&coordinator.access, e))?;
        // A request (not only the handshake) shows whether the cluster accepts the session.
        coordinator
            .probe(&coordinator.cluster)
            .await
            .map_err(|e| unreachable_as(&coordinator.cluster, e))?;
        Ok(coordinator)
    }

    /// Why the first server refuses TLS, when it does (see [`four_letter::diagnose_tls`]).
    async fn explain_tls(&self, hosts: &str) -> Option<DriverError> {
        let tls = self.access.tls.as_ref()?;
        let endpoint = self.endpoints.first()?;
        let detail = four_letter::diagnose_tls(endpoint, tls).await?;
        Some(DriverError::Unreachable {
            endpoint: hosts.to_string(),
            detail,
        })
    }

    /// A session on `cluster` that has answered one request.
    async fn probe(&self, cluster: &str) -> Result<Client, Probed> {
        let credentials = self.access.digest.is_some();
        let zk = establish(
            cluster,
            self.connect_timeout,
            self.connect_timeout,
            false,
            &self.access,
        )
        .await
        .map_err(|e| Probed::classify(e, credentials))?;
        zk.exists("/")
            .await
            .map_err(|e| Probed::classify(map_error(e), credentials))?;
        Ok(zk)
    }

    /// Opens every later session through a pausable relay of its own when `on`, so
    /// [`Session::freeze`] works (`--holder-pause`); without it, freeze is unsupported.
    pub fn with_freezable_sessions(mut self, on: bool) -> Self {
        self.freezable = on;
        self
    }
}

/// Establishes a new session on `cluster` with `session_timeout`, bounded by
/// `connect_timeout` (up to [`PASSES`] passes over the endpoints), with the run's `access`
/// (addauth first, TLS). A `detached` session is not closed when its client is dropped:
/// the connection just ends and the server expires the session (how [`Session::abandon`]
/// works); a plain one is closed when its client is dropped.
pub(super) async fn establish(
    cluster: &str,
    connect_timeout: Duration,
    session_timeout: Duration,
    detached: bool,
    access: &ZkAccess,
) -> Result<Client, DriverError> {
    let deadline = tokio::time::Instant::now() + connect_timeout;
    let mut passes = 0;
    let mut pause = PASS_PAUSE;
    loop {
        passes += 1;
        let options = Options {
            session_timeout,
            connect_timeout,
            detached,
            ..Options::default()
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let attempt = tokio::time::timeout(left, access.connect(options, cluster))
            .await
            .map_err(|_| DriverError::Timeout(connect_timeout))?
            .map_err(map_error);
        match attempt {
            // One pass over the endpoints failed (the client tries each once): a server
            // still busy after starting, or a TLS handshake slow on a loaded machine.
            // Another pass, after a growing pause, while the connect timeout lasts, as
            // ZooKeeper's own clients keep trying their hosts.
            Err(DriverError::Unreachable { .. }) if passes < PASSES && !left.is_zero() => {
                tokio::time::sleep(pause.min(left)).await;
                pause = (pause * 2).min(MAX_PASS_PAUSE);
            }
            other => return other,
        }
    }
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
        let via = relay.as_ref().map_or_else(
            || self.cluster.clone(),
            |r| self.access.connect_string(&r.connect_string()),
        );
        let zk = establish(&via, self.connect_timeout, options.ttl, true, &self.access).await?;
        Ok(Box::new(ZkSession::new(
            zk,
            client,
            self.cluster.clone(),
            self.connect_timeout,
            relay,
            self.access.clone(),
        )))
    }

    /// From `srvr` (the one four-letter word ZooKeeper whitelists by default); "unknown"
    /// when no server answers it, since the client protocol does not carry a version.
    async fn server_version(&self) -> Result<String, DriverError> {
        for endpoint in &self.endpoints {
            if let Some(version) = four_letter_word(endpoint, "srvr", self.access.tls.as_ref())
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

/// Why a probe session failed: refused authentication, or anything else.
enum Probed {
    Auth(DriverError),
    Other(DriverError),
}

impl Probed {
    /// An authentication failure (AuthFailed, NoAuth) becomes one line that says what to
    /// change.
    fn classify(e: DriverError, had_credentials: bool) -> Probed {
        let text = e.to_string();
        if !(text.contains("AuthFailed") || text.contains("NoAuth") || text.contains("auth")) {
            return Probed::Other(e);
        }
        Probed::Auth(DriverError::Server(if had_credentials {
            "the cluster refused the credentials of --zk-auth (authentication failed or not authorized)".into()
        } else {
            "the cluster requires authentication: pass --zk-auth digest:USER:PASSWORD".into()
        }))
    }
}

/// Why the chroot could not be made ready, in one line.
fn access_error(access: &ZkAccess, e: client::Error) -> DriverError {
    let chroot = access.chroot.as_deref().unwrap_or("/");
    match e {
        client::Error::NoAuth => DriverError::Server(format!(
            "cannot create the chroot {chroot}: not authorized (its parent's ACL; check --zk-auth)"
        )),
        other => DriverError::Server(format!("cannot create the chroot {chroot}: {other}")),
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
