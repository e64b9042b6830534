//! One client's PostgreSQL session: its own connection, the advisory locks and leases it
//! holds, and the renewals of its leases.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};

use super::lock::{self, advisory_key};
use super::map_error;
use crate::{
    ClientCounters, Consistency, CounterHandle, DriverError, FreezeGate, LockGuard, LockRecipe,
    Session,
};

const PUT: &str = "INSERT INTO coordbench_kv (key, value) VALUES ($1, $2) \
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";
const GET: &str = "SELECT value FROM coordbench_kv WHERE key = $1";
/// Writes only while the lease row still names this token unexpired, the row share-locked
/// so a takeover waits for the write (or the write sees the takeover).
const FENCED_BY_LEASE: &str = "\
    WITH guard AS (SELECT 1 FROM coordbench_locks WHERE name = $3 AND token = $4 \
                   AND expires_at > clock_timestamp() FOR SHARE) \
    INSERT INTO coordbench_kv (key, value) SELECT $1, $2 FROM guard \
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";
/// Writes only while this backend holds the advisory lock (a bigint key is classid: high
/// 32 bits, objid: low 32 bits, objsubid 1).
const FENCED_BY_ADVISORY: &str = "\
    INSERT INTO coordbench_kv (key, value) SELECT $1, $2 WHERE EXISTS ( \
      SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() \
      AND granted AND objsubid = 1 AND classid::bigint = $3 AND objid::bigint = $4) \
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";

pub struct PgSession {
    client: Option<Arc<Client>>,
    connection: JoinHandle<()>,
    pub(super) ttl: Duration,
    pub(super) owner: String,
    pub(super) counters: CounterHandle,
    pub(super) freeze: FreezeGate,
    /// An advisory lock statement was sent and not answered (cut short): cancel it and
    /// release the session's advisory locks before anything else.
    pub(super) advisory_pending: bool,
    /// Held advisory locks: name -> key.
    pub(super) advisory_held: HashMap<String, i64>,
    /// Held leases: name -> (token, renewal task).
    pub(super) leases: HashMap<String, (i64, JoinHandle<()>)>,
}

impl PgSession {
    pub(super) fn new(client: Client, connection: JoinHandle<()>, ttl: Duration) -> Self {
        PgSession {
            client: Some(Arc::new(client)),
            connection,
            ttl,
            owner: format!("{:x}", rand::random::<u64>()),
            counters: CounterHandle::default(),
            freeze: FreezeGate::default(),
            advisory_pending: false,
            advisory_held: HashMap::new(),
            leases: HashMap::new(),
        }
    }

    pub(super) fn client(&self) -> Result<Arc<Client>, DriverError> {
        self.client
            .clone()
            .ok_or_else(|| DriverError::SessionExpired("the session was abandoned".into()))
    }

    /// After an advisory lock statement was cut short: cancels it if still waiting, and
    /// releases whatever advisory locks the session holds.
    async fn repair(&mut self) -> Result<(), DriverError> {
        if !self.advisory_pending {
            return Ok(());
        }
        let client = self.client()?;
        self.counters.request();
        let _ = client.cancel_token().cancel_query(NoTls).await;
        self.counters.request();
        client
            .execute("SELECT pg_advisory_unlock_all()", &[])
            .await
            .map_err(map_error)?;
        self.advisory_pending = false;
        self.advisory_held.clear();
        Ok(())
    }
}

#[async_trait]
impl Session for PgSession {
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        let client = self.client()?;
        self.counters.request();
        client
            .execute(PUT, &[&key, &value])
            .await
            .map_err(map_error)
            .map(drop)
    }

    /// One server: every committed write is visible to the next select, either consistency.
    async fn get(
        &mut self,
        key: &str,
        _consistency: Consistency,
    ) -> Result<Option<Vec<u8>>, DriverError> {
        let client = self.client()?;
        self.counters.request();
        let row = client.query_opt(GET, &[&key]).await.map_err(map_error)?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn lock(&mut self, name: &str, recipe: LockRecipe) -> Result<LockGuard, DriverError> {
        self.repair().await?;
        lock::lock(self, name, recipe).await
    }

    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError> {
        self.repair().await?;
        lock::advisory_unlock(self, &guard.name).await?;
        lock::end_lease(self, &guard.name).await
    }

    /// Stops lease renewals for `d`. An advisory lock is held as long as the connection
    /// lives, so a frozen holder keeps it (and its waiters wait).
    async fn freeze(&mut self, d: Duration) -> Result<(), DriverError> {
        self.freeze.pause(d).await;
        Ok(())
    }

    async fn fenced_put(
        &mut self,
        guard: &LockGuard,
        key: &str,
        value: &[u8],
    ) -> Result<bool, DriverError> {
        let client = self.client()?;
        self.counters.request();
        let applied = if self.advisory_held.contains_key(&guard.name) {
            let k = advisory_key(&guard.name);
            let (class, obj) = (k >> 32 & 0xffff_ffff, k & 0xffff_ffff);
            client
                .execute(FENCED_BY_ADVISORY, &[&key, &value, &class, &obj])
                .await
        } else {
            client
                .execute(FENCED_BY_LEASE, &[&key, &value, &guard.name, &guard.token])
                .await
        };
        Ok(applied.map_err(map_error)? == 1)
    }

    fn counters(&self) -> ClientCounters {
        self.counters.snapshot()
    }

    fn counter_handle(&self) -> Option<CounterHandle> {
        Some(self.counters.clone())
    }

    /// A crashed client: its connection closes (the server ends the backend and releases
    /// its advisory locks at once) and its leases stop being renewed (they expire at the
    /// TTL).
    fn abandon(&mut self) {
        for (_, (_, renewal)) in self.leases.drain() {
            renewal.abort();
        }
        self.client = None;
        self.connection.abort();
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        let names: Vec<String> = self.leases.keys().cloned().collect();
        for name in names {
            // A lease that already ran out needs no ending.
            match lock::end_lease(self, &name).await {
                Ok(()) | Err(DriverError::SessionExpired(_)) => {}
                Err(e) => return Err(e),
            }
        }
        // Ending the connection releases the advisory locks.
        self.abandon();
        Ok(())
    }
}

impl Drop for PgSession {
    fn drop(&mut self) {
        self.abandon();
    }
}
