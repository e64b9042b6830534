//! One client's etcd session: a lazily granted lease kept alive at TTL/3 by its connection's
//! keep-alive stream ([`super::lease_mux`]; paused while the session is frozen,
//! [`Session::freeze`]), watch handles on its connection's watch stream
//! ([`super::watch_mux`]), plus the key-value operations. The recipes live beside it:
//! locks in [`super::lock`], elections in [`super::election`], service registration in
//! [`super::registry`], watch handles in [`super::watch`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{KvClient, WatchOptions};

use super::lease_mux::KeptLease;
use super::watch_mux::Subscription;
use super::{election, map_error, registry, versioned, watch, Connection};
use crate::{
    CasOutcome, ClientCounters, Consistency, CounterHandle, DriverError, FreezeGate, LeaderWatch,
    Leadership, LockGuard, LockRecipe, MembersWatch, Registration, Session, ValueWatch, Versioned,
};

/// A granted lease, kept alive by the connection's [`LeaseMux`].
struct Lease {
    id: i64,
    /// Set by the keep-alive task when the lease is gone.
    expired: Arc<AtomicBool>,
}

pub(super) struct EtcdSession {
    /// The session's own handle for key-value calls (they take `&mut`).
    pub(super) kv: KvClient,
    /// The connection's client and streams.
    connection: Arc<Connection>,
    pub(super) client_id: usize,
    pub(super) counters: CounterHandle,
    ttl: Duration,
    lease: Option<Lease>,
    /// A lock or candidate key this session created whose acquisition was abandoned (the
    /// lock or campaign future was dropped, e.g. on timeout). It is deleted before the next
    /// lock, campaign or resign so the queue does not wait on a client that stopped waiting.
    pub(super) pending_key: Option<Vec<u8>>,
    /// Holds the lease keep-alive back while the session is frozen.
    freeze: FreezeGate,
}

impl EtcdSession {
    pub(super) fn new(connection: Arc<Connection>, client_id: usize, ttl: Duration) -> Self {
        EtcdSession {
            kv: connection.client.kv_client(),
            connection,
            client_id,
            counters: CounterHandle::default(),
            ttl,
            lease: None,
            pending_key: None,
            freeze: FreezeGate::default(),
        }
    }

    /// A watcher on the connection's shared watch stream; its requests and events count as
    /// this session's.
    pub(super) async fn subscribe(
        &mut self,
        key: Vec<u8>,
        options: WatchOptions,
    ) -> Result<Subscription, DriverError> {
        let connection = &self.connection;
        connection
            .watches
            .subscribe(&connection.client, key, options, &self.counters)
            .await
    }

    /// The session's lease, granted on first use. Fails if the lease has expired: locks held
    /// under it are gone and the caller must know.
    pub(super) async fn lease_id(&mut self) -> Result<i64, DriverError> {
        if let Some(lease) = &self.lease {
            if lease.expired.load(Ordering::Relaxed) {
                return Err(DriverError::SessionExpired(format!(
                    "lease {:x} expired",
                    lease.id
                )));
            }
            return Ok(lease.id);
        }
        // etcd's TTLs are whole seconds (and the server raises them to its minimum).
        let ttl_s = (self.ttl.as_millis() as i64 + 999) / 1000;
        self.counters.request();
        let mut lease_client = self.connection.client.lease_client();
        let granted = Box::pin(lease_client.grant(ttl_s.max(1), None))
            .await
            .map_err(map_error)?;
        let id = granted.id();
        let expired = Arc::new(AtomicBool::new(false));
        let kept = self.connection.leases.keep(KeptLease {
            id,
            interval: (self.ttl / 3).max(Duration::from_millis(100)),
            ttl: Duration::from_secs(granted.ttl().max(1) as u64),
            expired: expired.clone(),
            freeze: self.freeze.clone(),
            counters: self.counters.clone(),
        });
        if !kept {
            return Err(DriverError::Server(
                "the connection's lease keep-alive task has stopped".into(),
            ));
        }
        self.lease = Some(Lease { id, expired });
        Ok(id)
    }

    async fn delete_pending_key(&mut self) -> Result<(), DriverError> {
        if let Some(key) = self.pending_key.clone() {
            self.counters.request();
            Box::pin(self.kv.delete(key, None))
                .await
                .map_err(map_error)?;
            // Cleared only once deleted, so a cleanup that is itself dropped is retried.
            self.pending_key = None;
        }
        Ok(())
    }
}

#[async_trait]
impl Session for EtcdSession {
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        self.counters.request();
        self.kv.put(key, value, None).await.map_err(map_error)?;
        Ok(())
    }

    async fn read_versioned(
        &mut self,
        key: &str,
        consistency: Consistency,
    ) -> Result<Option<Versioned>, DriverError> {
        versioned::read(self, key, consistency).await
    }

    async fn compare_and_set(
        &mut self,
        key: &str,
        expected: i64,
        new: &[u8],
    ) -> Result<CasOutcome, DriverError> {
        versioned::compare_and_set(self, key, expected, new).await
    }

    async fn lock(&mut self, name: &str, recipe: LockRecipe) -> Result<LockGuard, DriverError> {
        self.delete_pending_key().await?;
        match recipe {
            LockRecipe::HerdFree => super::lock::lock_mutex(self, name).await,
            LockRecipe::Naive => super::lock::lock_naive(self, name).await,
            other => Err(other.unsupported(crate::ApiFamily::Etcd)),
        }
    }

    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError> {
        super::lock::unlock(self, guard).await
    }

    async fn freeze(&mut self, d: Duration) -> Result<(), DriverError> {
        self.freeze.pause(d).await;
        Ok(())
    }

    /// Needs no lease: a holder whose lease expired writes through the same connection, and
    /// the create-revision compare rejects it.
    async fn fenced_put(
        &mut self,
        guard: &LockGuard,
        key: &str,
        value: &[u8],
    ) -> Result<bool, DriverError> {
        super::lock::fenced_put(self, guard, key, value).await
    }

    async fn campaign(
        &mut self,
        election: &str,
        value: &[u8],
        recipe: LockRecipe,
    ) -> Result<Leadership, DriverError> {
        self.delete_pending_key().await?;
        election::campaign(self, election, value, recipe).await
    }

    async fn resign(&mut self, leadership: Leadership) -> Result<(), DriverError> {
        self.delete_pending_key().await?;
        election::resign(self, leadership).await
    }

    async fn observe(&mut self, election: &str) -> Result<Box<dyn LeaderWatch>, DriverError> {
        election::observe(self, election).await
    }

    async fn register(
        &mut self,
        service: &str,
        instance: &str,
        data: &[u8],
    ) -> Result<Registration, DriverError> {
        registry::register(self, service, instance, data).await
    }

    async fn deregister(&mut self, registration: Registration) -> Result<(), DriverError> {
        registry::deregister(self, registration).await
    }

    async fn watch_members(&mut self, service: &str) -> Result<Box<dyn MembersWatch>, DriverError> {
        registry::watch_members(self, service).await
    }

    async fn watch_value(&mut self, key: &str) -> Result<Box<dyn ValueWatch>, DriverError> {
        watch::follow_value(self, key).await
    }

    fn counters(&self) -> ClientCounters {
        self.counters.snapshot()
    }

    fn counter_handle(&self) -> Option<CounterHandle> {
        Some(self.counters.clone())
    }

    fn abandon(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.connection.leases.stop(lease.id);
        }
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        if let Some(lease) = self.lease.take() {
            self.connection.leases.stop(lease.id);
            self.counters.request();
            // Revoking deletes every key attached to the lease, including held locks.
            self.connection
                .client
                .lease_client()
                .revoke(lease.id)
                .await
                .map_err(map_error)?;
        }
        Ok(())
    }
}

impl Drop for EtcdSession {
    fn drop(&mut self) {
        if let Some(lease) = &self.lease {
            self.connection.leases.stop(lease.id);
        }
    }
}
