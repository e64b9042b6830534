//! The Redis driver: sessions over independent Redis instances (RESP through the `redis`
//! crate's tokio connection manager, which reconnects after a killed instance comes back).
//!
//! Keys and locks are spread over the instances by a stable hash of their name
//! ([`home`]), as an application with several unreplicated instances would shard them;
//! Redlock uses every instance. kv-put and kv-get are SET and GET on the key's instance.
//! The lock recipes (`lock.rs`): `set-nx` and `set-nx-notify` (SET NX PX on the lock's
//! instance; waiters poll with backoff, or wait on keyspace notifications) and `redlock`
//! (a majority of instances within the validity time). Fencing tokens come from INCR of a
//! counter beside the lock key, in the same script as the SET NX.

mod lock;
mod scripts;
mod session;

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::ConnectionManager;
use redis::{AsyncConnectionConfig, Client};

use crate::{ApiFamily, Coordinator, DriverError, Session, SessionOptions};

pub use session::RedisSession;

/// How the driver reaches the instances.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://host:port` URLs or bare `host:port`, one per instance.
    pub endpoints: Vec<String>,
    pub connect_timeout: Duration,
}

/// Connections to a set of independent instances; each session opens its own.
pub struct RedisCoordinator {
    endpoints: Vec<String>,
    clients: Vec<Client>,
    connect_timeout: Duration,
}

/// `host:port` becomes `redis://host:port`.
pub fn url(endpoint: &str) -> String {
    if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("redis://{endpoint}")
    }
}

fn client(endpoint: &str) -> Result<Client, DriverError> {
    Client::open(url(endpoint)).map_err(|e| DriverError::Unsupported(format!("{endpoint}: {e}")))
}

/// A driver error from a Redis error, naming the instance for unreachable ones.
pub(crate) fn map_error(e: redis::RedisError) -> DriverError {
    if e.is_timeout() {
        DriverError::Timeout(Duration::ZERO)
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        DriverError::Unreachable {
            endpoint: "redis".into(),
            detail: e.to_string(),
        }
    } else {
        DriverError::Server(e.to_string())
    }
}

/// The instance a key or lock name lives on among `n` (FNV-1a, stable across runs and
/// processes, so attached runs agree).
pub fn home(name: &str, n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % n.max(1) as u64) as usize
}

/// The server version an instance reports (`INFO server`), within the connection's
/// timeouts: how provisioning and fault injection know an instance answers.
pub async fn server_version(endpoint: &str) -> Result<String, DriverError> {
    let client = client(endpoint)?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(1)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(map_error)?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .map_err(map_error)?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map_or_else(
            || "redis (unknown version)".into(),
            |v| format!("redis {}", v.trim()),
        ))
}

/// A [`crate::probe::Probe`] of one instance: PING on a kept connection.
pub struct RedisProbe {
    endpoint: String,
    conn: Option<redis::aio::MultiplexedConnection>,
}

impl RedisProbe {
    pub fn new(endpoint: &str) -> Self {
        RedisProbe {
            endpoint: endpoint.to_string(),
            conn: None,
        }
    }
}

#[async_trait]
impl crate::probe::Probe for RedisProbe {
    async fn ping(&mut self) -> bool {
        if self.conn.is_none() {
            let Ok(client) = client(&self.endpoint) else {
                return false;
            };
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(Duration::from_millis(500)))
                .set_response_timeout(None);
            self.conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .ok();
        }
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let answered = redis::cmd("PING").query_async::<String>(conn).await.is_ok();
        if !answered {
            self.conn = None;
        }
        answered
    }
}

impl RedisCoordinator {
    /// Checks every instance answers, then keeps their clients for sessions.
    pub async fn connect(config: &RedisConfig) -> Result<Self, DriverError> {
        if config.endpoints.is_empty() {
            return Err(DriverError::Unsupported(
                "redis needs at least one endpoint".into(),
            ));
        }
        let mut clients = Vec::with_capacity(config.endpoints.len());
        for endpoint in &config.endpoints {
            tokio::time::timeout(config.connect_timeout, server_version(endpoint))
                .await
                .map_err(|_| DriverError::Unreachable {
                    endpoint: endpoint.clone(),
                    detail: "no answer".into(),
                })?
                .map_err(|e| DriverError::Unreachable {
                    endpoint: endpoint.clone(),
                    detail: e.to_string(),
                })?;
            clients.push(client(endpoint)?);
        }
        Ok(RedisCoordinator {
            endpoints: config.endpoints.clone(),
            clients,
            connect_timeout: config.connect_timeout,
        })
    }

    async fn manager(&self, client: &Client) -> Result<ConnectionManager, DriverError> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.connect_timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(200));
        ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(map_error)
    }
}

#[async_trait]
impl Coordinator for RedisCoordinator {
    fn family(&self) -> ApiFamily {
        ApiFamily::Redis
    }

    async fn open_session(
        &self,
        client: usize,
        options: &SessionOptions,
    ) -> Result<Box<dyn Session>, DriverError> {
        let mut conns = Vec::with_capacity(self.clients.len());
        for c in &self.clients {
            conns.push(self.manager(c).await?);
        }
        Ok(Box::new(RedisSession::new(
            client,
            conns,
            self.clients.clone(),
            options.ttl,
        )))
    }

    async fn server_version(&self) -> Result<String, DriverError> {
        server_version(&self.endpoints[0]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_spread_over_instances_stably() {
        assert_eq!(home("lock-0", 1), 0);
        let homes: Vec<usize> = (0..30).map(|i| home(&format!("k{i}"), 3)).collect();
        assert!((0..3).all(|i| homes.contains(&i)), "{homes:?}");
        assert_eq!(home("k1", 3), home("k1", 3));
        assert_eq!(url("127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }
}
