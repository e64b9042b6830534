//! The traits every driver implements: a [`Coordinator`] opens [`Session`]s, one per
//! simulated client, and a session offers key-value and recipe-level operations: locks,
//! leader election, service registration and watches.
//!
//! Watches are handles ([`LeaderWatch`], [`MembersWatch`], [`ValueWatch`]) a session hands
//! out; a session may hand out many (thousands of config watchers share a few sessions), and
//! each counts its notifications and requests into the session's counters.

use std::collections::BTreeSet;
use std::time::Duration;

use async_trait::async_trait;

use crate::{ApiFamily, ClientCounters, CounterHandle, DriverError, LockRecipe};

/// Read consistency for `get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// Reflects every write acknowledged before the read began: etcd's default read; on
    /// ZooKeeper a check-only multi (a transaction through the leader) before getData.
    #[default]
    Linearizable,
    /// Served from the local member's state, possibly stale.
    Serializable,
    /// ZooKeeper's sync() then getData, the fresh read its documentation suggests. It is not
    /// linearizable for a session on the leader: the leader answers the sync at once and
    /// may apply a committed write after a follower has acknowledged it. On the etcd API,
    /// which has no sync, it reads as `Linearizable`.
    Sync,
}

/// A key's value with its version: etcd's mod revision, a znode's data version. A version
/// changes with every write of the key, so a compare-and-set on it succeeds only if nobody
/// wrote the key since it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub value: Vec<u8>,
    pub version: i64,
}

/// What a compare-and-set did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CasOutcome {
    Applied,
    /// The key was no longer at the expected version. `current` is the value the server
    /// reported instead (`Some(None)`: the key is absent), or `None` when the API does not
    /// say (ZooKeeper's BadVersion).
    Rejected {
        current: Option<Option<Vec<u8>>>,
    },
}

/// Options for opening a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Lease / session TTL. Sessions refresh at a third of it.
    pub ttl: Duration,
}

/// A held lock. `token` is the fencing token: the lock key's create revision on the etcd
/// API, the lock node's czxid on ZooKeeper. Successive holders' tokens strictly increase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockGuard {
    pub name: String,
    pub token: i64,
    /// The key or path the driver must delete to release.
    pub key: Vec<u8>,
}

/// A leadership won by [`Session::campaign`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    pub election: String,
    /// Strictly increases across successive leaders of one election: the candidate key's
    /// create revision (etcd API) or the candidate node's czxid (ZooKeeper).
    pub token: i64,
    /// The key or path of this candidate; deleting it resigns.
    pub key: Vec<u8>,
}

/// The leader of an election as an observer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderView {
    /// The leader's [`Leadership::token`].
    pub token: i64,
    /// The value the leader campaigned with.
    pub value: Vec<u8>,
}

/// An instance registered by [`Session::register`]; it lives as long as the session (a
/// leased key or an ephemeral znode) unless deregistered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub service: String,
    pub instance: String,
    /// The key or path the driver deletes to deregister.
    pub key: Vec<u8>,
}

/// Follows who leads one election.
#[async_trait]
pub trait LeaderWatch: Send {
    /// The first call returns the current leader (`None` if there is none); each later call
    /// waits until the leader differs from the one last returned and returns the new one.
    async fn next(&mut self) -> Result<Option<LeaderView>, DriverError>;
}

/// Keeps a service's membership list current.
#[async_trait]
pub trait MembersWatch: Send {
    /// The first call returns the current instance names; each later call waits for the next
    /// change notification and returns the membership after it.
    async fn next(&mut self) -> Result<BTreeSet<String>, DriverError>;
}

/// Follows one key's value.
#[async_trait]
pub trait ValueWatch: Send {
    /// The first call returns the current value (`None` if absent); each later call waits for
    /// the next notification and returns the value it delivers or that is read after it. An
    /// etcd-style watch returns every version in order; a one-shot ZooKeeper watch returns
    /// the value read after the event, so versions written in between are coalesced.
    async fn next(&mut self) -> Result<Option<Vec<u8>>, DriverError>;
}

/// A connection to a target, shared by all clients of a run.
#[async_trait]
pub trait Coordinator: Send + Sync + 'static {
    /// The API family, which decides the recipe names.
    fn family(&self) -> ApiFamily;

    /// Opens the session of client `client` (0-based).
    async fn open_session(
        &self,
        client: usize,
        options: &SessionOptions,
    ) -> Result<Box<dyn Session>, DriverError>;

    /// The server's version string, for run.json.
    async fn server_version(&self) -> Result<String, DriverError>;

    /// Whether its sessions read each operation's intended start
    /// ([`crate::schedule::intended_start`]); the runner sets it only for those that do.
    fn books_intended_start(&self) -> bool {
        false
    }
}

/// One client's view of the target. Not shared between tasks.
#[async_trait]
pub trait Session: Send {
    /// Writes `value` under `key`.
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError>;

    /// Writes `value` under a `key` no one has written before (the ZooKeeper paper's
    /// creates). By default a put, which on a new key is one write already (etcd's put,
    /// redis's SET); the ZooKeeper driver sends one create instead of its put's setData
    /// that fails first.
    async fn create(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        self.put(key, value).await
    }

    /// Reads `key` (by default: [`Session::read_versioned`] without the version).
    async fn get(
        &mut self,
        key: &str,
        consistency: Consistency,
    ) -> Result<Option<Vec<u8>>, DriverError> {
        Ok(self
            .read_versioned(key, consistency)
            .await?
            .map(|v| v.value))
    }

    /// Reads `key` with its version (for [`Session::compare_and_set`]).
    async fn read_versioned(
        &mut self,
        key: &str,
        consistency: Consistency,
    ) -> Result<Option<Versioned>, DriverError> {
        let _ = (key, consistency);
        Err(DriverError::Unsupported(
            "read_versioned on this driver".into(),
        ))
    }

    /// Writes `new` under `key` only if the key is still at version `expected` (as
    /// [`Session::read_versioned`] returned it): an etcd Txn on the mod revision, a
    /// ZooKeeper setData with a version.
    async fn compare_and_set(
        &mut self,
        key: &str,
        expected: i64,
        new: &[u8],
    ) -> Result<CasOutcome, DriverError> {
        let _ = (key, expected, new);
        Err(DriverError::Unsupported(
            "compare_and_set on this driver".into(),
        ))
    }

    /// Blocks until this session holds lock `name`.
    async fn lock(&mut self, name: &str, recipe: LockRecipe) -> Result<LockGuard, DriverError>;

    /// Releases a lock this session holds.
    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError>;

    /// Freezes the session's own background traffic for `d`, as in a GC pause of the client
    /// process, and returns when it resumes: etcd's lease keep-alive stops sending;
    /// a ZooKeeper connection (opened through the driver's pausable relay) forwards nothing
    /// either way. A freeze longer than the TTL lets the server expire the session, and
    /// with it the locks this session believes it still holds.
    async fn freeze(&mut self, d: Duration) -> Result<(), DriverError> {
        let _ = d;
        Err(DriverError::Unsupported("freeze on this driver".into()))
    }

    /// Writes `value` under `key` only if `guard` still holds its lock, checked by the
    /// coordination service in the same transaction (etcd: the lock key's create revision
    /// is still `guard.token`; ZooKeeper: a multi that checks the lock node). Ok(true) if
    /// applied, Ok(false) if the guard rejected it. A session the server expired writes
    /// through a fresh one, so that the guard, not the expiry, decides.
    async fn fenced_put(
        &mut self,
        guard: &LockGuard,
        key: &str,
        value: &[u8],
    ) -> Result<bool, DriverError> {
        let _ = (guard, key, value);
        Err(DriverError::Unsupported("fenced_put on this driver".into()))
    }

    /// Campaigns in `election` with `value` and blocks until this session leads. The
    /// herd-free recipe waits only on its predecessor candidate; naive wakes on every change.
    async fn campaign(
        &mut self,
        election: &str,
        value: &[u8],
        recipe: LockRecipe,
    ) -> Result<Leadership, DriverError> {
        let _ = (election, value, recipe);
        Err(DriverError::Unsupported("campaign on this driver".into()))
    }

    /// Gives up a leadership (or a candidacy abandoned mid-campaign).
    async fn resign(&mut self, leadership: Leadership) -> Result<(), DriverError> {
        let _ = leadership;
        Err(DriverError::Unsupported("resign on this driver".into()))
    }

    /// A handle that follows the leader of `election`.
    async fn observe(&mut self, election: &str) -> Result<Box<dyn LeaderWatch>, DriverError> {
        let _ = election;
        Err(DriverError::Unsupported("observe on this driver".into()))
    }

    /// Registers `instance` of `service` for as long as this session lives.
    async fn register(
        &mut self,
        service: &str,
        instance: &str,
        data: &[u8],
    ) -> Result<Registration, DriverError> {
        let _ = (service, instance, data);
        Err(DriverError::Unsupported("register on this driver".into()))
    }

    /// Removes a registration.
    async fn deregister(&mut self, registration: Registration) -> Result<(), DriverError> {
        let _ = registration;
        Err(DriverError::Unsupported("deregister on this driver".into()))
    }

    /// A handle that keeps `service`'s membership current (a prefix watch on the etcd API,
    /// child watches on ZooKeeper).
    async fn watch_members(&mut self, service: &str) -> Result<Box<dyn MembersWatch>, DriverError> {
        let _ = service;
        Err(DriverError::Unsupported(
            "watch_members on this driver".into(),
        ))
    }

    /// A handle that follows `key`'s value.
    async fn watch_value(&mut self, key: &str) -> Result<Box<dyn ValueWatch>, DriverError> {
        let _ = key;
        Err(DriverError::Unsupported(
            "watch_value on this driver".into(),
        ))
    }

    /// Requests sent and notifications received so far, by this session and every handle it
    /// gave out.
    fn counters(&self) -> ClientCounters;

    /// A live handle on the same counters, readable while an operation of this session is in
    /// flight: the herd-effect figures sample waiters' counters at every release. `None` if
    /// the driver cannot share its counters.
    fn counter_handle(&self) -> Option<CounterHandle> {
        None
    }

    /// Stops refreshing the session without releasing anything, as a crashed client would:
    /// what it holds is freed only when the server expires the session.
    fn abandon(&mut self);

    /// Ends the session cleanly, releasing everything it holds.
    async fn close(&mut self) -> Result<(), DriverError>;
}
