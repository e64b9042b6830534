//! The traits every driver implements: a [`Coordinator`] opens [`Session`]s, one per
//! simulated client, and a session offers key-value and recipe-level operations.

use std::time::Duration;

use async_trait::async_trait;

use crate::{ApiFamily, ClientCounters, DriverError, LockRecipe};

/// Read consistency for `get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// Reflects every write acknowledged before the read began (etcd's default; a sync()
    /// before the read on ZooKeeper).
    #[default]
    Linearizable,
    /// Served from the local member's state, possibly stale.
    Serializable,
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
}

/// One client's view of the target. Not shared between tasks.
#[async_trait]
pub trait Session: Send {
    /// Writes `value` under `key`.
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError>;

    /// Reads `key`.
    async fn get(
        &mut self,
        key: &str,
        consistency: Consistency,
    ) -> Result<Option<Vec<u8>>, DriverError>;

    /// Blocks until this session holds lock `name`.
    async fn lock(&mut self, name: &str, recipe: LockRecipe) -> Result<LockGuard, DriverError>;

    /// Releases a lock this session holds.
    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError>;

    /// Requests sent and notifications received so far.
    fn counters(&self) -> ClientCounters;

    /// Stops refreshing the session without releasing anything, as a crashed client would:
    /// what it holds is freed only when the server expires the session.
    fn abandon(&mut self);

    /// Ends the session cleanly, releasing everything it holds.
    async fn close(&mut self) -> Result<(), DriverError>;
}
