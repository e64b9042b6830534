//! The null target: an in-process coordinator that does no I/O.
//!
//! It measures the load generator's own cost (what a run would report against an infinitely
//! fast server), and it gives every workload a real, if trivial, server to run against:
//! keys live in one versioned map (which can be told to lose writes), locks are in-process mutexes, elections are queues of candidates with increasing tokens
//! (herd-free candidates are woken only by their predecessor's leaving, naive ones by every
//! change), registrations form one shared membership per service, and value watches see
//! every version of a watched key. An abandoned session keeps what it holds for its TTL, as
//! a server would until it expires the session; a session frozen for longer than its TTL
//! ([`Session::freeze`]) loses its locks at the TTL, as a server would expire it, and its
//! guards stop passing [`Session::fenced_put`].

mod election;
mod registry;
mod service;
mod store;
mod values;

pub use service::ServiceModel;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::{
    ApiFamily, CasOutcome, ClientCounters, Consistency, Coordinator, CounterHandle, DriverError,
    LeaderWatch, Leadership, LockGuard, LockRecipe, MembersWatch, Registration, Session,
    SessionOptions, ValueWatch, Versioned,
};

/// Per lock name, the last fencing token handed out.
type LockTable = Mutex<HashMap<String, Arc<AsyncMutex<i64>>>>;
/// Per lock name, the token of its current holder (absent while free).
type Holders = Mutex<HashMap<String, i64>>;

/// What every session of one coordinator shares: the "server state".
#[derive(Default)]
struct Shared {
    locks: LockTable,
    holders: Holders,
    elections: election::Elections,
    services: registry::Services,
    values: values::Values,
    store: store::Store,
    /// An injected service time for kv requests (`NullCoordinator::with_service`).
    service: Option<service::ServiceQueue>,
    /// Election tokens, increasing across all elections like a revision.
    next_token: AtomicI64,
}

/// A poisoned table only means another client panicked mid-update; the map is intact.
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The null coordinator. Cheap to create; every session shares its state.
#[derive(Default)]
pub struct NullCoordinator {
    shared: Arc<Shared>,
}

impl NullCoordinator {
    pub fn new() -> Self {
        Self::default()
    }

    /// A null target that acknowledges every put but keeps only all but every `n`-th: the
    /// fault that lost-write detection must catch.
    pub fn losing_writes(n: u64) -> Self {
        NullCoordinator {
            shared: Arc::new(Shared {
                store: store::Store::losing_every(n),
                ..Shared::default()
            }),
        }
    }

    /// A null target whose kv requests (put, read, compare-and-set) each take
    /// `model.time` of one of `model.concurrency` servers: its capacity is known exactly.
    pub fn with_service(model: ServiceModel) -> Self {
        NullCoordinator {
            shared: Arc::new(Shared {
                service: Some(service::ServiceQueue::new(model)),
                ..Shared::default()
            }),
        }
    }
}

#[async_trait]
impl Coordinator for NullCoordinator {
    fn family(&self) -> ApiFamily {
        ApiFamily::Null
    }

    /// The service-time model books requests at their intended start.
    fn books_intended_start(&self) -> bool {
        self.shared.service.is_some()
    }

    async fn open_session(
        &self,
        _client: usize,
        options: &SessionOptions,
    ) -> Result<Box<dyn Session>, DriverError> {
        Ok(Box::new(NullSession {
            shared: self.shared.clone(),
            ttl: options.ttl,
            holdings: Holdings::default(),
            counters: CounterHandle::default(),
            expired: false,
        }))
    }

    async fn server_version(&self) -> Result<String, DriverError> {
        Ok(concat!("null-", env!("CARGO_PKG_VERSION")).to_string())
    }
}

/// Everything a session holds, released together on close or expiry.
#[derive(Default)]
struct Holdings {
    locks: HashMap<String, OwnedMutexGuard<i64>>,
    /// (election, token) of leaderships and candidacies.
    candidacies: Vec<(String, i64)>,
    /// (service, instance).
    registrations: Vec<(String, String)>,
}

impl Holdings {
    fn release(self, shared: &Shared) {
        for (election, token) in self.candidacies {
            shared.elections.withdraw(&election, token);
        }
        for (service, instance) in self.registrations {
            shared.services.remove(&service, &instance);
        }
        for (name, guard) in self.locks {
            release_lock(shared, &name, guard);
        }
    }
}

/// Frees lock `name` held by `guard`: it no longer passes fenced writes, and the next
/// waiter acquires it.
fn release_lock(shared: &Shared, name: &str, guard: OwnedMutexGuard<i64>) {
    let mut holders = locked(&shared.holders);
    if holders.get(name) == Some(&*guard) {
        holders.remove(name);
    }
    drop(guard);
}

struct NullSession {
    shared: Arc<Shared>,
    ttl: Duration,
    holdings: Holdings,
    counters: CounterHandle,
    /// Set when a freeze outlasted the TTL: the "server" expired the session.
    expired: bool,
}

impl NullSession {
    /// Waits out the injected service time, if any.
    async fn served(&self) {
        if let Some(queue) = &self.shared.service {
            queue.serve().await;
        }
    }

    fn lock_cell(&self, name: &str) -> Arc<AsyncMutex<i64>> {
        let mut table = locked(&self.shared.locks);
        table.entry(name.to_string()).or_default().clone()
    }
}

#[async_trait]
impl Session for NullSession {
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        self.counters.request();
        self.served().await;
        self.shared.store.put(key, value);
        self.shared.values.put(key, value);
        Ok(())
    }

    async fn read_versioned(
        &mut self,
        key: &str,
        _c: Consistency,
    ) -> Result<Option<Versioned>, DriverError> {
        self.counters.request();
        self.served().await;
        Ok(self.shared.store.get(key))
    }

    async fn compare_and_set(
        &mut self,
        key: &str,
        expected: i64,
        new: &[u8],
    ) -> Result<CasOutcome, DriverError> {
        self.counters.request();
        self.served().await;
        let outcome = self.shared.store.compare_and_set(key, expected, new);
        if outcome == CasOutcome::Applied {
            self.shared.values.put(key, new);
        }
        Ok(outcome)
    }

    async fn lock(&mut self, name: &str, _recipe: LockRecipe) -> Result<LockGuard, DriverError> {
        if self.expired {
            return Err(DriverError::SessionExpired(
                "the session expired while frozen".into(),
            ));
        }
        if self.holdings.locks.contains_key(name) {
            return Err(DriverError::Unsupported(format!(
                "lock {name} is already held by this session"
            )));
        }
        self.counters.request();
        let mut guard = self.lock_cell(name).lock_owned().await;
        *guard += 1;
        let token = *guard;
        locked(&self.shared.holders).insert(name.to_string(), token);
        self.holdings.locks.insert(name.to_string(), guard);
        Ok(LockGuard {
            name: name.to_string(),
            token,
            key: name.as_bytes().to_vec(),
        })
    }

    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError> {
        self.counters.request();
        match self.holdings.locks.remove(&guard.name) {
            Some(held) => {
                release_lock(&self.shared, &guard.name, held);
                Ok(())
            }
            None if self.expired => Err(DriverError::SessionExpired(format!(
                "lock {} was lost when the session expired",
                guard.name
            ))),
            None => Err(DriverError::Unsupported(format!(
                "lock {} is not held",
                guard.name
            ))),
        }
    }

    /// A freeze past the TTL: the session's holdings are freed at the TTL, as a server
    /// hearing nothing would expire the session.
    async fn freeze(&mut self, d: Duration) -> Result<(), DriverError> {
        if d < self.ttl {
            tokio::time::sleep(d).await;
            return Ok(());
        }
        tokio::time::sleep(self.ttl).await;
        std::mem::take(&mut self.holdings).release(&self.shared);
        self.expired = true;
        tokio::time::sleep(d - self.ttl).await;
        Ok(())
    }

    async fn fenced_put(
        &mut self,
        guard: &LockGuard,
        key: &str,
        value: &[u8],
    ) -> Result<bool, DriverError> {
        self.counters.request();
        // Checked and written under the holders' lock, as one transaction.
        let holders = locked(&self.shared.holders);
        let holds = holders.get(&guard.name) == Some(&guard.token);
        if holds {
            self.shared.values.put(key, value);
        }
        Ok(holds)
    }

    async fn campaign(
        &mut self,
        election: &str,
        value: &[u8],
        recipe: LockRecipe,
    ) -> Result<Leadership, DriverError> {
        self.counters.request();
        let token = self.shared.next_token.fetch_add(1, Ordering::Relaxed) + 1;
        let candidacy = self
            .shared
            .elections
            .enter(election, token, value.to_vec(), recipe);
        candidacy.wait_to_lead(&self.counters).await;
        self.holdings
            .candidacies
            .push((election.to_string(), token));
        Ok(Leadership {
            election: election.to_string(),
            token,
            key: format!("{election}/{token}").into_bytes(),
        })
    }

    async fn resign(&mut self, leadership: Leadership) -> Result<(), DriverError> {
        self.counters.request();
        let held = (leadership.election.clone(), leadership.token);
        let before = self.holdings.candidacies.len();
        self.holdings.candidacies.retain(|c| *c != held);
        if self.holdings.candidacies.len() == before {
            return Err(DriverError::SessionExpired(format!(
                "leadership {} of {} is not held",
                leadership.token, leadership.election
            )));
        }
        self.shared
            .elections
            .withdraw(&leadership.election, leadership.token);
        Ok(())
    }

    async fn observe(&mut self, election: &str) -> Result<Box<dyn LeaderWatch>, DriverError> {
        self.counters.request();
        Ok(Box::new(
            self.shared
                .elections
                .observe(election, self.counters.clone()),
        ))
    }

    async fn register(
        &mut self,
        service: &str,
        instance: &str,
        _data: &[u8],
    ) -> Result<Registration, DriverError> {
        self.counters.request();
        self.shared.services.insert(service, instance);
        self.holdings
            .registrations
            .push((service.to_string(), instance.to_string()));
        Ok(Registration {
            service: service.to_string(),
            instance: instance.to_string(),
            key: format!("{service}/{instance}").into_bytes(),
        })
    }

    async fn deregister(&mut self, registration: Registration) -> Result<(), DriverError> {
        self.counters.request();
        let held = (registration.service.clone(), registration.instance.clone());
        self.holdings.registrations.retain(|r| *r != held);
        self.shared
            .services
            .remove(&registration.service, &registration.instance);
        Ok(())
    }

    async fn watch_members(&mut self, service: &str) -> Result<Box<dyn MembersWatch>, DriverError> {
        self.counters.request();
        Ok(Box::new(
            self.shared.services.watch(service, self.counters.clone()),
        ))
    }

    async fn watch_value(&mut self, key: &str) -> Result<Box<dyn ValueWatch>, DriverError> {
        self.counters.request();
        Ok(Box::new(
            self.shared.values.watch(key, self.counters.clone()),
        ))
    }

    fn counters(&self) -> ClientCounters {
        self.counters.snapshot()
    }

    fn counter_handle(&self) -> Option<CounterHandle> {
        Some(self.counters.clone())
    }

    fn abandon(&mut self) {
        let holdings = std::mem::take(&mut self.holdings);
        let shared = self.shared.clone();
        match tokio::runtime::Handle::try_current() {
            // What a server does: keep the session's holdings until it expires.
            Ok(runtime) => {
                let ttl = self.ttl;
                runtime.spawn(async move {
                    tokio::time::sleep(ttl).await;
                    holdings.release(&shared);
                });
            }
            Err(_) => holdings.release(&shared),
        }
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        std::mem::take(&mut self.holdings).release(&self.shared);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn opts() -> SessionOptions {
        SessionOptions {
            ttl: Duration::from_millis(200),
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

    #[tokio::test]
    async fn a_freeze_past_the_ttl_loses_the_lock_and_its_fenced_writes() {
        let c = NullCoordinator::new();
        let mut a = c.open_session(0, &opts()).await.unwrap();
        let mut b = c.open_session(1, &opts()).await.unwrap();
        let ga = a.lock("l", LockRecipe::HerdFree).await.unwrap();
        assert!(a.fenced_put(&ga, "r", b"a1").await.unwrap());
        let frozen = Instant::now();
        let (paused, gb) = tokio::join!(a.freeze(opts().ttl * 2), async {
            b.lock("l", LockRecipe::HerdFree).await.unwrap()
        });
        paused.unwrap();
        assert!(frozen.elapsed() >= opts().ttl * 2);
        assert!(b.fenced_put(&gb, "r", b"b1").await.unwrap());
        assert!(
            !a.fenced_put(&ga, "r", b"a2").await.unwrap(),
            "stale write applied"
        );
        let lost = a.unlock(ga).await.unwrap_err();
        assert_eq!(lost.kind(), "session_expired", "{lost}");
    }

    #[tokio::test]
    async fn a_freeze_within_the_ttl_keeps_the_lock() {
        let c = NullCoordinator::new();
        let mut a = c.open_session(0, &opts()).await.unwrap();
        let ga = a.lock("l", LockRecipe::HerdFree).await.unwrap();
        a.freeze(opts().ttl / 4).await.unwrap();
        assert!(a.fenced_put(&ga, "r", b"a").await.unwrap());
        a.unlock(ga).await.unwrap();
    }

    #[tokio::test]
    async fn an_abandoned_lock_is_released_only_after_the_ttl() {
        let c = NullCoordinator::new();
        let mut a = c.open_session(0, &opts()).await.unwrap();
        let mut b = c.open_session(1, &opts()).await.unwrap();
        a.lock("l", LockRecipe::HerdFree).await.unwrap();
        let abandoned = Instant::now();
        a.abandon();
        b.lock("l", LockRecipe::HerdFree).await.unwrap();
        assert!(abandoned.elapsed() >= opts().ttl);
    }
}
