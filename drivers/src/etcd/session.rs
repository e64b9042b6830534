//! One client's etcd session: a lazily granted lease kept alive at TTL/3 (paused while the
//! session is frozen, [`Session::freeze`]), one watch stream shared by its watch handles,
//! plus the key-value operations. The recipes live beside it:
//! locks in [`super::lock`], elections in [`super::election`], service registration in
//! [`super::registry`], watch handles in [`super::watch`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, WatchOptions};
use tokio::task::JoinHandle;

use super::watch_mux::{Subscription, WatchMux};
use super::{election, map_error, registry, versioned, watch};
use crate::{
    CasOutcome, ClientCounters, Consistency, CounterHandle, DriverError, FreezeGate, LeaderWatch,
    Leadership, LockGuard, LockRecipe, MembersWatch, Registration, Session, ValueWatch, Versioned,
};

/// A granted lease and the task that refreshes it.
struct Lease {
    id: i64,
    keepalive: JoinHandle<()>,
    /// Set by the keep-alive task when the server reports the lease gone.
    expired: Arc<AtomicBool>,
}

pub(super) struct EtcdSession {
    pub(super) client: Client,
    pub(super) client_id: usize,
    pub(super) counters: CounterHandle,
    ttl: Duration,
    lease: Option<Lease>,
    /// A lock or candidate key this session created whose acquisition was abandoned (the
    /// lock or campaign future was dropped, e.g. on timeout). It is deleted before the next
    /// lock, campaign or resign so the queue does not wait on a client that stopped waiting.
    pub(super) pending_key: Option<Vec<u8>>,
    /// The watch stream this session's watch handles share, opened on first use.
    watches: Option<WatchMux>,
    /// Holds the lease keep-alive back while the session is frozen.
    freeze: FreezeGate,
}

impl EtcdSession {
    pub(super) fn new(client: Client, client_id: usize, ttl: Duration) -> Self {
        EtcdSession {
            client,
            client_id,
            counters: CounterHandle::default(),
            ttl,
            lease: None,
            pending_key: None,
            watches: None,
            freeze: FreezeGate::default(),
        }
    }

    /// A watcher on the session's shared watch stream, (re)opening the stream if needed.
    pub(super) async fn subscribe(
        &mut self,
        key: Vec<u8>,
        options: WatchOptions,
    ) -> Result<Subscription, DriverError> {
        if let Some(mux) = self.watches.as_ref().filter(|m| m.is_open()) {
            self.counters.request();
            return mux.subscribe(key, options).await;
        }
        let (mux, first) =
            WatchMux::open(self.client.clone(), self.counters.clone(), key, options).await?;
        self.watches = Some(mux);
        Ok(first)
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
        let granted = self
            .client
            .lease_grant(ttl_s.max(1), None)
            .await
            .map_err(map_error)?;
        let id = granted.id();
        let expired = Arc::new(AtomicBool::new(false));
        let keepalive = KeepAlive {
            client: self.client.clone(),
            id,
            interval: (self.ttl / 3).max(Duration::from_millis(100)),
            counters: self.counters.clone(),
            expired: expired.clone(),
            freeze: self.freeze.clone(),
        };
        let granted_ttl = Duration::from_secs(granted.ttl().max(1) as u64);
        let keepalive = tokio::spawn(keep_alive(keepalive, granted_ttl));
        self.lease = Some(Lease {
            id,
            keepalive,
            expired,
        });
        Ok(id)
    }

    async fn delete_pending_key(&mut self) -> Result<(), DriverError> {
        if let Some(key) = self.pending_key.clone() {
            self.counters.request();
            self.client.delete(key, None).await.map_err(map_error)?;
            // Cleared only once deleted, so a cleanup that is itself dropped is retried.
            self.pending_key = None;
        }
        Ok(())
    }
}

/// Retry cadence of a keep-alive stream that broke.
const KEEPALIVE_RETRY: Duration = Duration::from_millis(200);

/// How one lease's keep-alives are sent.
struct KeepAlive {
    client: Client,
    id: i64,
    /// Between refreshes while the stream works.
    interval: Duration,
    counters: CounterHandle,
    /// Set when the lease is gone: the server said so, or its TTL passed unrefreshed.
    expired: Arc<AtomicBool>,
    freeze: FreezeGate,
}

/// Refreshes the lease every `interval` until the task is aborted or the lease is gone. A
/// stream that breaks (its member went down) is reopened, through another member if need
/// be, as etcd's clientv3 does: the lease counts as lost only when the server answers that
/// it is (TTL 0) or when its TTL has passed since the last refresh the server acknowledged,
/// not at the first broken stream, or every leader failover would end every session.
async fn keep_alive(k: KeepAlive, granted_ttl: Duration) {
    let mut deadline = tokio::time::Instant::now() + granted_ttl;
    let mut stream = None;
    loop {
        let healthy = stream.is_some();
        tokio::time::sleep(if healthy { k.interval } else { KEEPALIVE_RETRY }).await;
        // A paused client sends nothing; it learns what the pause cost afterwards.
        k.freeze.thawed().await;
        let sent = tokio::time::Instant::now();
        if sent >= deadline {
            k.expired.store(true, Ordering::Relaxed);
            return;
        }
        let bound = deadline - sent;
        if stream.is_none() {
            let mut client = k.client.clone();
            stream = tokio::time::timeout(bound, client.lease_keep_alive(k.id))
                .await
                .ok()
                .and_then(Result::ok);
        }
        let Some((keeper, responses)) = stream.as_mut() else {
            continue;
        };
        k.counters.keepalive();
        let answer = tokio::time::timeout(bound, async {
            keeper.keep_alive().await.ok()?;
            responses.message().await.ok().flatten()
        })
        .await
        .ok()
        .flatten();
        match answer {
            Some(resp) if resp.ttl() > 0 => {
                deadline = sent + Duration::from_secs(resp.ttl() as u64);
            }
            Some(_) => {
                k.expired.store(true, Ordering::Relaxed);
                return;
            }
            None => stream = None,
        }
    }
}

#[async_trait]
impl Session for EtcdSession {
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        self.counters.request();
        self.client.put(key, value, None).await.map_err(map_error)?;
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
            lease.keepalive.abort();
        }
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        // The shared watch stream ends once the handles still using it are dropped.
        self.watches = None;
        if let Some(lease) = self.lease.take() {
            lease.keepalive.abort();
            self.counters.request();
            // Revoking deletes every key attached to the lease, including held locks.
            self.client
                .lease_revoke(lease.id)
                .await
                .map_err(map_error)?;
        }
        Ok(())
    }
}

impl Drop for EtcdSession {
    fn drop(&mut self) {
        if let Some(lease) = &self.lease {
            lease.keepalive.abort();
        }
    }
}
