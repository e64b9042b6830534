//! The null target: an in-process coordinator that does no I/O.
//!
//! It measures the load generator's own cost (what a run would report against an infinitely
//! fast server). Locks are real in-process mutexes, so lock workloads and their checker run
//! on it too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::{
    ApiFamily, ClientCounters, Consistency, Coordinator, CounterHandle, DriverError, LockGuard,
    LockRecipe, Session, SessionOptions,
};

/// Per lock name, the last fencing token handed out.
type LockTable = Mutex<HashMap<String, Arc<AsyncMutex<i64>>>>;

/// The null coordinator. Cheap to create; every session shares its lock table.
#[derive(Default)]
pub struct NullCoordinator {
    locks: Arc<LockTable>,
}

impl NullCoordinator {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Coordinator for NullCoordinator {
    fn family(&self) -> ApiFamily {
        ApiFamily::Null
    }

    async fn open_session(
        &self,
        _client: usize,
        _options: &SessionOptions,
    ) -> Result<Box<dyn Session>, DriverError> {
        Ok(Box::new(NullSession {
            locks: self.locks.clone(),
            held: HashMap::new(),
            counters: CounterHandle::default(),
        }))
    }

    async fn server_version(&self) -> Result<String, DriverError> {
        Ok(concat!("null-", env!("CARGO_PKG_VERSION")).to_string())
    }
}

struct NullSession {
    locks: Arc<LockTable>,
    held: HashMap<String, OwnedMutexGuard<i64>>,
    counters: CounterHandle,
}

impl NullSession {
    fn lock_cell(&self, name: &str) -> Arc<AsyncMutex<i64>> {
        // A poisoned table only means another client panicked mid-insert; the map is intact.
        let mut table = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        table.entry(name.to_string()).or_default().clone()
    }
}

#[async_trait]
impl Session for NullSession {
    async fn put(&mut self, _key: &str, _value: &[u8]) -> Result<(), DriverError> {
        self.counters.request();
        Ok(())
    }

    async fn get(&mut self, _key: &str, _c: Consistency) -> Result<Option<Vec<u8>>, DriverError> {
        self.counters.request();
        Ok(None)
    }

    async fn lock(&mut self, name: &str, _recipe: LockRecipe) -> Result<LockGuard, DriverError> {
        if self.held.contains_key(name) {
            return Err(DriverError::Unsupported(format!(
                "lock {name} is already held by this session"
            )));
        }
        self.counters.request();
        let mut guard = self.lock_cell(name).lock_owned().await;
        *guard += 1;
        let token = *guard;
        self.held.insert(name.to_string(), guard);
        Ok(LockGuard {
            name: name.to_string(),
            token,
            key: name.as_bytes().to_vec(),
        })
    }

    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError> {
        self.counters.request();
        match self.held.remove(&guard.name) {
            Some(_) => Ok(()),
            None => Err(DriverError::Unsupported(format!(
                "lock {} is not held",
                guard.name
            ))),
        }
    }

    fn counters(&self) -> ClientCounters {
        self.counters.snapshot()
    }

    fn abandon(&mut self) {
        // An abandoned null session releases at once: there is no server to expire it.
        self.held.clear();
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        self.held.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn opts() -> SessionOptions {
        SessionOptions {
            ttl: Duration::from_secs(2),
        }
    }

    #[tokio::test]
    async fn tokens_increase_and_a_second_holder_waits_for_the_first() {
        let c = NullCoordinator::new();
        let mut a = c.open_session(0, &opts()).await.unwrap();
        let mut b = c.open_session(1, &opts()).await.unwrap();
        let ga = a.lock("l", LockRecipe::HerdFree).await.unwrap();
        let waiter = tokio::spawn(async move {
            let g = b.lock("l", LockRecipe::HerdFree).await.unwrap();
            g.token
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "second client acquired a held lock");
        a.unlock(ga.clone()).await.unwrap();
        let tb = waiter.await.unwrap();
        assert!(tb > ga.token);
    }
}
