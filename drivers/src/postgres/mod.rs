//! The PostgreSQL driver: one connection (tokio-postgres) per session, so that
//! session-scoped advisory locks belong to their client, as in an application.
//!
//! Tables (created if missing when the coordinator connects): `coordbench_kv` (kv-put as an
//! upsert, kv-get as a select by key), `coordbench_locks` (the lease rows) and the
//! `coordbench_fence` sequence every recipe takes its fencing tokens from. The recipes are
//! in `lock.rs`.

mod lock;
mod session;

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::{Client, NoTls};

use crate::{ApiFamily, Coordinator, DriverError, Session, SessionOptions};

pub use session::PgSession;

/// The schema every session relies on.
const SCHEMA: &str = "\
    CREATE TABLE IF NOT EXISTS coordbench_kv (key text PRIMARY KEY, value bytea NOT NULL); \
    CREATE TABLE IF NOT EXISTS coordbench_locks (name text PRIMARY KEY, owner text NOT NULL, \
        expires_at timestamptz NOT NULL, token bigint NOT NULL); \
    CREATE SEQUENCE IF NOT EXISTS coordbench_fence;";

/// How the driver reaches the server.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// `postgres://user@host:port/db` URLs or bare `host:port` (user and database
    /// `postgres`); the first is used.
    pub endpoints: Vec<String>,
    pub connect_timeout: Duration,
}

/// `host:port` becomes `postgres://postgres@host:port/postgres`.
pub fn url(endpoint: &str) -> String {
    if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("postgres://postgres@{endpoint}/postgres")
    }
}

pub(crate) fn map_error(e: tokio_postgres::Error) -> DriverError {
    if e.is_closed() || e.as_db_error().is_none() {
        DriverError::Unreachable {
            endpoint: "postgres".into(),
            detail: e.to_string(),
        }
    } else {
        DriverError::Server(e.to_string())
    }
}

/// A connection to `endpoint` with its connection task running; the task ends when the
/// client is dropped or the handle aborted.
pub(crate) async fn open(
    endpoint: &str,
    timeout: Duration,
) -> Result<(Client, tokio::task::JoinHandle<()>), DriverError> {
    let url = url(endpoint);
    let connecting = tokio_postgres::connect(&url, NoTls);
    let (client, connection) = tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| DriverError::Unreachable {
            endpoint: endpoint.to_string(),
            detail: format!("no connection within {timeout:?}"),
        })?
        .map_err(|e| DriverError::Unreachable {
            endpoint: endpoint.to_string(),
            detail: e.to_string(),
        })?;
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((client, task))
}

/// The server's version (`SHOW server_version`): how provisioning and fault injection
/// know the server answers.
pub async fn server_version(endpoint: &str) -> Result<String, DriverError> {
    let (client, task) = open(endpoint, Duration::from_secs(1)).await?;
    let row = client
        .query_one("SHOW server_version", &[])
        .await
        .map_err(map_error);
    drop(client);
    task.abort();
    Ok(format!("PostgreSQL {}", row?.get::<_, String>(0)))
}

/// A [`crate::probe::Probe`] of the server: `SELECT 1` on a kept connection.
pub struct PgProbe {
    endpoint: String,
    conn: Option<(Client, tokio::task::JoinHandle<()>)>,
}

impl PgProbe {
    pub fn new(endpoint: &str) -> Self {
        PgProbe {
            endpoint: endpoint.to_string(),
            conn: None,
        }
    }
}

impl Drop for PgProbe {
    fn drop(&mut self) {
        if let Some((_, task)) = self.conn.take() {
            task.abort();
        }
    }
}

#[async_trait]
impl crate::probe::Probe for PgProbe {
    async fn ping(&mut self) -> bool {
        if self.conn.is_none() {
            self.conn = open(&self.endpoint, Duration::from_millis(500)).await.ok();
        }
        let Some((client, _)) = self.conn.as_ref() else {
            return false;
        };
        let answered = client.simple_query("SELECT 1").await.is_ok();
        if !answered {
            if let Some((_, task)) = self.conn.take() {
                task.abort();
            }
        }
        answered
    }
}

/// Connects sessions to one server.
pub struct PgCoordinator {
    endpoint: String,
    connect_timeout: Duration,
}

impl PgCoordinator {
    /// Connects once to create the schema.
    pub async fn connect(config: &PgConfig) -> Result<Self, DriverError> {
        let endpoint = match config.endpoints.as_slice() {
            [one] => one.clone(),
            _ => {
                return Err(DriverError::Unsupported(
                    "postgres takes exactly one endpoint".into(),
                ))
            }
        };
        let (client, task) = open(&endpoint, config.connect_timeout).await?;
        let created = client.batch_execute(SCHEMA).await.map_err(map_error);
        drop(client);
        task.abort();
        created?;
        Ok(PgCoordinator {
            endpoint,
            connect_timeout: config.connect_timeout,
        })
    }
}

#[async_trait]
impl Coordinator for PgCoordinator {
    fn family(&self) -> ApiFamily {
        ApiFamily::Postgres
    }

    async fn open_session(
        &self,
        _client: usize,
        options: &SessionOptions,
    ) -> Result<Box<dyn Session>, DriverError> {
        let (client, task) = open(&self.endpoint, self.connect_timeout).await?;
        Ok(Box::new(PgSession::new(client, task, options.ttl)))
    }

    async fn server_version(&self) -> Result<String, DriverError> {
        server_version(&self.endpoint).await
    }
}
