//! One client's ZooKeeper session: the key-value operations, abandon and close, and the
//! entry points of the recipes (locks in [`super::lock`], elections in [`super::election`],
//! registrations in [`super::discovery`], value watches in [`super::watch`]).
//!
//! Sessions are established *detached*: dropping the client ends its connection without a
//! closeSession request, so the server keeps the session (and its ephemeral nodes) until
//! the session timeout passes with no pings. That is what [`Session::abandon`] needs. A
//! clean [`Session::close`] sends closeSession itself. A session dropped without `close` is
//! thus abandoned.
//!
//! Watch handles hold only a weak reference to the client, so they never keep an abandoned
//! session's connection alive; once it is gone they fail as an expired session would.
//!
//! A session opened through a relay ([`super::relay`]) can be frozen: the relay stops
//! forwarding, pings included, and the server expires the session if the freeze outlasts
//! its timeout.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coordbench_zk_proto::proto::Stat;

use super::client::{Client, CreateMode, Error, SessionState};

use super::access::{NodeAcl, ZkAccess};
use super::pending::{self, Pending};
use super::relay::Relay;
use super::{discovery, election, lock, map_error, versioned, watch};
use crate::{
    CasOutcome, ClientCounters, Consistency, CounterHandle, DriverError, LeaderWatch, Leadership,
    LockGuard, LockRecipe, MembersWatch, Registration, Session, ValueWatch, Versioned,
};

pub(super) struct ZkSession {
    /// `None` once abandoned or closed. Shared (weakly) with the watch handles.
    client: Option<Arc<Client>>,
    pub(super) client_id: usize,
    pub(super) counters: CounterHandle,
    /// The connect string, to re-attach on close (directly, not through the relay).
    pub(super) cluster: String,
    pub(super) connect_timeout: Duration,
    /// The relay the session's connection runs through, if it can be frozen.
    relay: Option<Relay>,
    /// Credentials (re-sent by every connection of the session) and node ACL.
    pub(super) access: ZkAccess,
    /// An acquisition or campaign that was cancelled (its future dropped, e.g. on timeout)
    /// after it may have created its node; the node is deleted before the next recipe call
    /// so the queue does not wait on a client that stopped waiting.
    pub(super) pending: Option<Pending>,
}

impl ZkSession {
    pub(super) fn new(
        client: Client,
        client_id: usize,
        cluster: String,
        connect_timeout: Duration,
        relay: Option<Relay>,
        access: ZkAccess,
    ) -> Self {
        ZkSession {
            client: Some(Arc::new(client)),
            client_id,
            counters: CounterHandle::default(),
            cluster,
            connect_timeout,
            relay,
            access,
            pending: None,
        }
    }

    /// The ACL of the nodes this session creates.
    pub(super) fn acl(&self) -> NodeAcl {
        self.access.acl
    }

    /// After a request failed with a lost connection: waits (at most the connect timeout)
    /// until the client has reconnected or learned that its session is gone. True if it is
    /// connected again, so a retry can go through on this session.
    pub(super) async fn reconnected(&self, zk: &Client) -> bool {
        let mut state = zk.state_watcher();
        let settled = state.wait_for(|s| *s != SessionState::Disconnected);
        let _ = tokio::time::timeout(self.connect_timeout, settled).await;
        zk.state() == SessionState::Connected
    }

    /// The live client; once the session was abandoned or closed, an error of the kind a
    /// crashed-and-expired client would see.
    pub(super) fn zk(&self) -> Result<&Arc<Client>, DriverError> {
        self.client.as_ref().ok_or_else(|| {
            DriverError::SessionExpired("the session was abandoned or closed".into())
        })
    }

    /// Deletes a node this session created for a recipe (`key`, a lock's, leadership's or
    /// registration's path). Gone already means the session lost it (expired), as `what`.
    pub(super) async fn delete_own(&self, key: Vec<u8>, what: &str) -> Result<(), DriverError> {
        let path = String::from_utf8(key)
            .map_err(|_| DriverError::Unsupported(format!("{what} has a non-UTF-8 node path")))?;
        self.counters.request();
        match self.zk()?.delete(&path, None).await {
            Ok(()) => Ok(()),
            Err(Error::NoNode) => Err(DriverError::SessionExpired(format!(
                "{what} was lost before release (its node {path} is gone)"
            ))),
            Err(e) => Err(map_error(e)),
        }
    }

    async fn create_with_parents(
        &self,
        zk: &Client,
        path: &str,
        value: &[u8],
    ) -> Result<(), DriverError> {
        self.counters.request();
        match create_in_parent(zk, path, value, CreateMode::Persistent, self.acl()).await {
            Ok(_) => Ok(()),
            // Another writer created it first: write over it, as a put would.
            Err(Error::NodeExists) => {
                self.counters.request();
                zk.set_data(path, value, None)
                    .await
                    .map(drop)
                    .map_err(map_error)
            }
            Err(e) => Err(map_error(e)),
        }
    }
}

/// Creates `path` in `mode` with `acl`, creating its missing ancestors (persistent, with
/// the same ACL) first when the parent is missing. Returns the created path (a sequential
/// node's with its number) and Stat.
pub(super) async fn create_in_parent(
    zk: &Client,
    path: &str,
    value: &[u8],
    mode: CreateMode,
    acl: NodeAcl,
) -> Result<(String, Stat), Error> {
    let entries = acl.entries();
    match zk.create(path, value, mode, &entries).await {
        Err(Error::NoNode) => {
            let parent = path.rsplit_once('/').map_or("", |(parent, _)| parent);
            if parent.is_empty() {
                return Err(Error::NoNode);
            }
            zk.mkdir(parent, &entries).await?;
            zk.create(path, value, mode, &entries).await
        }
        other => other,
    }
}

/// kv keys are znode paths; a key without a leading slash is placed under the root.
pub(crate) fn znode_path(key: &str) -> std::borrow::Cow<'_, str> {
    if key.starts_with('/') {
        key.into()
    } else {
        format!("/{key}").into()
    }
}

#[async_trait]
impl Session for ZkSession {
    /// setData on the key's znode; creates it (and its parents) on first write.
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        let path = znode_path(key);
        let zk = self.zk()?;
        self.counters.request();
        match zk.set_data(&path, value, None).await {
            Ok(_) => Ok(()),
            Err(Error::NoNode) => self.create_with_parents(zk, &path, value).await,
            Err(e) => Err(map_error(e)),
        }
    }

    /// One create (its parents' too, the first time); a key that exists is an error, as
    /// the key was meant to be new.
    async fn create(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        let path = znode_path(key);
        let zk = self.zk()?;
        self.counters.request();
        create_in_parent(zk, &path, value, CreateMode::Persistent, self.acl())
            .await
            .map(drop)
            .map_err(map_error)
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
        pending::repair(self).await?;
        match recipe {
            LockRecipe::HerdFree => lock::lock_queue(self, name).await,
            LockRecipe::Naive => lock::lock_naive(self, name).await,
            other => Err(other.unsupported(crate::ApiFamily::ZooKeeper)),
        }
    }

    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError> {
        lock::unlock(self, guard).await
    }

    async fn freeze(&mut self, d: Duration) -> Result<(), DriverError> {
        let relay = self.relay.as_ref().ok_or_else(|| {
            DriverError::Unsupported(
                "freeze needs a session opened through the driver's relay (ZkCoordinator::with_freezable_sessions)".into(),
            )
        })?;
        relay.gate().pause(d).await;
        Ok(())
    }

    async fn fenced_put(
        &mut self,
        guard: &LockGuard,
        key: &str,
        value: &[u8],
    ) -> Result<bool, DriverError> {
        lock::fenced_put(self, guard, &znode_path(key), value).await
    }

    async fn campaign(
        &mut self,
        election: &str,
        value: &[u8],
        recipe: LockRecipe,
    ) -> Result<Leadership, DriverError> {
        election::campaign(self, election, value, recipe).await
    }

    async fn resign(&mut self, leadership: Leadership) -> Result<(), DriverError> {
        election::resign(self, leadership).await
    }

    async fn observe(&mut self, election: &str) -> Result<Box<dyn LeaderWatch>, DriverError> {
        Ok(Box::new(election::observe(self, election)?))
    }

    async fn register(
        &mut self,
        service: &str,
        instance: &str,
        data: &[u8],
    ) -> Result<Registration, DriverError> {
        discovery::register(self, service, instance, data).await
    }

    async fn deregister(&mut self, registration: Registration) -> Result<(), DriverError> {
        discovery::deregister(self, registration).await
    }

    async fn watch_members(&mut self, service: &str) -> Result<Box<dyn MembersWatch>, DriverError> {
        Ok(Box::new(discovery::watch_members(self, service)?))
    }

    async fn watch_value(&mut self, key: &str) -> Result<Box<dyn ValueWatch>, DriverError> {
        Ok(Box::new(watch::watch_value(self, key)?))
    }

    /// Requests and watch notifications. Pings are sent by the client's session task on its
    /// own and are not counted (keepalives stay 0).
    fn counters(&self) -> ClientCounters {
        self.counters.snapshot()
    }

    fn counter_handle(&self) -> Option<CounterHandle> {
        Some(self.counters.clone())
    }

    /// Drops the detached client: the connection closes without closeSession, pings stop,
    /// and the server expires the session (deleting its ephemeral nodes) after the timeout.
    fn abandon(&mut self) {
        self.pending = None;
        self.client = None;
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        self.pending = None;
        let Some(zk) = self.client.take() else {
            return Ok(());
        };
        // One retry: a connection lost before the answer leaves the session open, and the
        // client sends the retry on its next connection.
        for _ in 0..2 {
            self.counters.request();
            match tokio::time::timeout(self.connect_timeout, zk.close()).await {
                Err(_) => return Err(DriverError::Timeout(self.connect_timeout)),
                // Already expired: the server has released everything it held.
                Ok(Ok(())) | Ok(Err(Error::SessionExpired)) => return Ok(()),
                Ok(Err(Error::ConnectionLoss)) => continue,
                Ok(Err(e)) => return Err(map_error(e)),
            }
        }
        Err(map_error(Error::ConnectionLoss))
    }
}
