//! One client's Redis session: a connection per instance, the locks it holds and their
//! renewal tasks, and (for `set-nx-notify`) a pub/sub connection to the lock's instance.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, PubSub};
use redis::Client;

use super::lock::{self, Held};
use super::scripts::FENCED_SET;
use super::{home, map_error};
use crate::{
    ClientCounters, Consistency, CounterHandle, DriverError, FreezeGate, LockGuard, LockRecipe,
    Session,
};

pub struct RedisSession {
    client: usize,
    pub(super) conns: Vec<ConnectionManager>,
    clients: Vec<Client>,
    pub(super) ttl: Duration,
    pub(super) counters: CounterHandle,
    pub(super) freeze: FreezeGate,
    /// By lock key.
    pub(super) held: HashMap<String, Held>,
    acquisitions: u64,
    /// A random word of this session, so owners differ across sessions and runs.
    nonce: u64,
}

impl RedisSession {
    pub(super) fn new(
        client: usize,
        conns: Vec<ConnectionManager>,
        clients: Vec<Client>,
        ttl: Duration,
    ) -> Self {
        RedisSession {
            client,
            conns,
            clients,
            ttl,
            counters: CounterHandle::default(),
            freeze: FreezeGate::default(),
            held: HashMap::new(),
            acquisitions: 0,
            nonce: rand::random(),
        }
    }

    /// A value no other acquisition uses: what the lock key holds while this one holds it.
    pub(super) fn new_owner(&mut self) -> String {
        self.acquisitions += 1;
        format!("{}:{:x}:{}", self.client, self.nonce, self.acquisitions)
    }

    /// A pub/sub connection to instance `i` subscribed to `key`'s keyspace events (turned
    /// on for deletions and expiries if the server has them off).
    pub(super) async fn subscribe(&mut self, i: usize, key: &str) -> Result<PubSub, DriverError> {
        self.counters.request();
        let _: Result<(), _> = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("Kgx")
            .query_async(&mut self.conns[i])
            .await;
        let mut pubsub = self.clients[i]
            .get_async_pubsub()
            .await
            .map_err(map_error)?;
        self.counters.request();
        pubsub
            .subscribe(format!("__keyspace@0__:{key}"))
            .await
            .map_err(map_error)?;
        Ok(pubsub)
    }

    pub(super) async fn unsubscribe(&mut self, mut pubsub: PubSub, key: &str) {
        self.counters.request();
        let _ = pubsub.unsubscribe(format!("__keyspace@0__:{key}")).await;
    }

    /// Releases a lock this session holds or may hold (an acquisition cut short).
    async fn release(&mut self, key: &str) -> Result<bool, DriverError> {
        let Some(held) = self.held.remove(key) else {
            return Ok(false);
        };
        if let Some(task) = held.renewal {
            task.abort();
        }
        let bound = self.ttl.max(Duration::from_secs(1));
        let released = lock::release_on(self, key, &held.owner, &held.instances, bound).await;
        Ok(released > 0)
    }

    /// Releases locks left by acquisitions cut short (no renewal task yet).
    async fn release_pending(&mut self) -> Result<(), DriverError> {
        let pending: Vec<String> = self
            .held
            .iter()
            .filter(|(_, h)| h.renewal.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        for key in pending {
            self.release(&key).await?;
        }
        Ok(())
    }

    fn conn_for(&mut self, key: &str) -> &mut ConnectionManager {
        let i = home(key, self.conns.len());
        &mut self.conns[i]
    }
}

#[async_trait]
impl Session for RedisSession {
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        self.counters.request();
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async::<()>(self.conn_for(key))
            .await
            .map_err(map_error)
    }

    /// Redis serves every read from the instance's memory, so both consistencies read the
    /// same: the one instance that holds the key.
    async fn get(
        &mut self,
        key: &str,
        _consistency: Consistency,
    ) -> Result<Option<Vec<u8>>, DriverError> {
        self.counters.request();
        redis::cmd("GET")
            .arg(key)
            .query_async(self.conn_for(key))
            .await
            .map_err(map_error)
    }

    async fn lock(&mut self, name: &str, recipe: LockRecipe) -> Result<LockGuard, DriverError> {
        self.release_pending().await?;
        lock::lock(self, name, recipe).await
    }

    /// Fails with `SessionExpired` when no instance still held the lock for this owner:
    /// it expired (renewals stopped by a pause, or failed) before the release.
    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError> {
        let key = String::from_utf8_lossy(&guard.key).into_owned();
        if self.release(&key).await? {
            return Ok(());
        }
        Err(DriverError::SessionExpired(format!(
            "lock {} expired before its release",
            guard.name
        )))
    }

    /// Stops the renewals for `d` (they resume after it); past the TTL the lock expires.
    async fn freeze(&mut self, d: Duration) -> Result<(), DriverError> {
        self.freeze.pause(d).await;
        Ok(())
    }

    /// SET only while the guard's owner still holds the lock, in one script on each
    /// instance of the lock (Redlock: applied if a majority applied it).
    async fn fenced_put(
        &mut self,
        guard: &LockGuard,
        key: &str,
        value: &[u8],
    ) -> Result<bool, DriverError> {
        let lock_key = String::from_utf8_lossy(&guard.key).into_owned();
        let Some(held) = self.held.get(&lock_key) else {
            return Ok(false);
        };
        let (owner, instances) = (held.owner.clone(), held.instances.clone());
        let mut applied = 0;
        for &i in &instances {
            self.counters.request();
            let done: i64 = FENCED_SET
                .key(&lock_key)
                .key(key)
                .arg(&owner)
                .arg(value)
                .invoke_async(&mut self.conns[i])
                .await
                .map_err(map_error)?;
            applied += done;
        }
        Ok(applied as usize > instances.len() / 2)
    }

    fn counters(&self) -> ClientCounters {
        self.counters.snapshot()
    }

    fn counter_handle(&self) -> Option<CounterHandle> {
        Some(self.counters.clone())
    }

    /// A crashed client: renewals stop, nothing is released; its locks expire at the TTL.
    fn abandon(&mut self) {
        for (_, held) in self.held.drain() {
            if let Some(task) = held.renewal {
                task.abort();
            }
        }
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        let keys: Vec<String> = self.held.keys().cloned().collect();
        for key in keys {
            self.release(&key).await?;
        }
        Ok(())
    }
}

impl Drop for RedisSession {
    fn drop(&mut self) {
        self.abandon();
    }
}
