//! The second ZooKeeper driver, over the zookeeper-async crate: the same servers, paths,
//! recipes and fencing tokens as the ZooKeeper driver ([`crate::zookeeper`]), so the
//! two client libraries compare on equal terms (`--zk-client async`).
//!
//! Where the crate differs, and what this driver does about it:
//! - When the server says a session expired, the crate silently opens a new one
//!   (the ZooKeeper driver's client reports the expiry and stops). A lock holder then loses its lock (its
//!   ephemeral node went with the old session) without an error. Sessions count these
//!   re-establishments ([`state`]) so results can show them.
//! - It has no sync() and no multi: only serializable reads; the other reads are unsupported.
//! - It exposes no session id: lock nodes carry a random per-session tag instead.
//! - It tries servers in the order given (the ZooKeeper driver's client shuffles them), so each client's
//!   connect string is rotated by its index to spread sessions over the ensemble.
//! - Its connection task outlives the handle: a client dropped without close() keeps its
//!   session alive, pinging, until the process exits. Sessions are closed explicitly (also
//!   on drop), and `abandon` cannot make the server expire a session.
//! - After its first reconnect, its read deadline is twice ⌊2/3 of the session timeout⌋ in
//!   whole seconds, zero below 1.5 s: it then reconnects endlessly (hundreds of times a
//!   second, measured). The configuration refuses shorter TTLs.

mod errors;
mod lock;
mod session;
mod state;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use zookeeper_async::{WatchedEvent, ZooKeeper};

use crate::zookeeper::four_letter::{four_letter_word, version};
use crate::zookeeper::{normalize, unreachable, ZkConfig};
use crate::{ApiFamily, Coordinator, CounterHandle, DriverError, Session, SessionOptions};
pub use errors::map_error;
use session::AsyncZkSession;

/// The shortest session timeout the crate keeps a connection alive with (see above).
pub const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(1500);

/// Pause between the crate's connection attempts; without one it retries a refused
/// connection in a hot loop.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// A reachable ZooKeeper-API target for zookeeper-async sessions, one per client.
pub struct AsyncZkCoordinator {
    endpoints: Vec<String>,
    connect_timeout: Duration,
}

/// A connected client and the receiver of its connection epoch ([`state::track`]).
struct Connected {
    zk: Arc<ZooKeeper>,
    epoch: tokio::sync::watch::Receiver<u64>,
}

impl AsyncZkCoordinator {
    /// Checks that a session can be established within the connect timeout, so an
    /// unreachable cluster fails here with a clear error rather than in every client.
    pub async fn connect(config: &ZkConfig) -> Result<Self, DriverError> {
        let endpoints: Vec<String> = config.endpoints.iter().map(|e| normalize(e)).collect();
        if endpoints.is_empty() {
            return Err(DriverError::Unsupported(
                "no ZooKeeper endpoints given".into(),
            ));
        }
        if config.access != crate::zookeeper::ZkAccess::default() {
            // zookeeper-async forgets addauth when it reconnects or replaces a session.
            return Err(DriverError::Unsupported(
                "zookeeper-async cannot keep credentials, node ACLs or a chroot; use the ZooKeeper driver".into(),
            ));
        }
        let coordinator = AsyncZkCoordinator {
            endpoints,
            connect_timeout: config.connect_timeout,
        };
        let cluster = coordinator.endpoints.join(",");
        let probe = coordinator
            .establish(0, config.connect_timeout, CounterHandle::default())
            .await
            .map_err(|e| match e {
                DriverError::Unreachable { detail, .. } | DriverError::Server(detail) => {
                    unreachable(&cluster, &detail)
                }
                DriverError::Timeout(_) => unreachable(&cluster, "no session established in time"),
                other => other,
            })?;
        let _ = tokio::time::timeout(coordinator.connect_timeout, probe.zk.close()).await;
        Ok(coordinator)
    }

    /// Client `client`'s connect string: the endpoints rotated to start at `client`'s share.
    fn connect_string(&self, client: usize) -> String {
        let first = client % self.endpoints.len();
        let rotated: Vec<&str> = self.endpoints[first..]
            .iter()
            .chain(&self.endpoints[..first])
            .map(String::as_str)
            .collect();
        rotated.join(",")
    }

    /// Establishes a session with `session_timeout`, bounded by the connect timeout in all.
    async fn establish(
        &self,
        client: usize,
        session_timeout: Duration,
        counters: CounterHandle,
    ) -> Result<Connected, DriverError> {
        let deadline = Instant::now() + self.connect_timeout;
        let timed_out = |_| DriverError::Timeout(self.connect_timeout);
        let cluster = self.connect_string(client);
        let connect = ZooKeeper::connect_with_retry_time(
            &cluster,
            session_timeout,
            // Only unclaimed node events reach the default watcher; recipes use their own.
            |_: WatchedEvent| {},
            RECONNECT_PAUSE,
        );
        let zk = tokio::time::timeout_at(deadline, connect)
            .await
            .map_err(timed_out)?
            .map_err(map_error)?;
        let epoch = state::track(&zk, counters);
        // connect returns once TCP is up; the first answer arrives after the handshake.
        match tokio::time::timeout_at(deadline, zk.exists("/", false)).await {
            Ok(Ok(_)) => Ok(Connected {
                zk: Arc::new(zk),
                epoch,
            }),
            failed => {
                // Unclosed, the crate's task would go on reconnecting as long as the process.
                let _ = tokio::time::timeout(RECONNECT_PAUSE * 5, zk.close()).await;
                Err(match failed {
                    Ok(Err(e)) => map_error(e),
                    _ => DriverError::Timeout(self.connect_timeout),
                })
            }
        }
    }
}

#[async_trait]
impl Coordinator for AsyncZkCoordinator {
    fn family(&self) -> ApiFamily {
        ApiFamily::ZooKeeper
    }

    async fn open_session(
        &self,
        client: usize,
        options: &SessionOptions,
    ) -> Result<Box<dyn Session>, DriverError> {
        let counters = CounterHandle::default();
        let Connected { zk, epoch } = self
            .establish(client, options.ttl, counters.clone())
            .await?;
        Ok(Box::new(AsyncZkSession::new(
            zk,
            epoch,
            client,
            counters,
            self.connect_timeout,
        )))
    }

    /// From `srvr`, as the ZooKeeper driver does.
    async fn server_version(&self) -> Result<String, DriverError> {
        for endpoint in &self.endpoints {
            if let Some(version) = four_letter_word(endpoint, "srvr", None)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_starts_at_its_own_server() {
        let c = AsyncZkCoordinator {
            endpoints: vec!["a:1".into(), "b:2".into(), "c:3".into()],
            connect_timeout: Duration::from_secs(1),
        };
        assert_eq!(c.connect_string(0), "a:1,b:2,c:3");
        assert_eq!(c.connect_string(1), "b:2,c:3,a:1");
        assert_eq!(c.connect_string(5), "c:3,a:1,b:2");
    }
}
