//! One client's zookeeper-async session: the key-value operations, abandon and close. Lock
//! recipes are in [`super::lock`].

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use zookeeper_async::{Acl, CreateMode, Stat, ZkError, ZkResult, ZooKeeper, ZooKeeperExt};

use super::lock::{self, Pending};
use super::map_error;
use crate::zookeeper::znode_path;
use crate::{
    ClientCounters, Consistency, CounterHandle, DriverError, LockGuard, LockRecipe, Session,
};

pub(super) struct AsyncZkSession {
    /// `None` once abandoned or closed.
    zk: Option<Arc<ZooKeeper>>,
    /// Bumped on every (re)connection: watches do not survive one (see [`super::state`]).
    pub(super) reconnected: watch::Receiver<u64>,
    pub(super) client_id: usize,
    /// Random, fixed for the session's life: names this session's lock nodes where the
    /// ZooKeeper driver uses the session id, which this crate does not expose.
    pub(super) tag: u64,
    pub(super) counters: CounterHandle,
    /// Bound on close().
    close_timeout: Duration,
    /// An acquisition that was cancelled after it may have created its node; the node is
    /// deleted before the next attempt so the queue does not wait on a client that left.
    pub(super) pending: Option<Pending>,
}

impl AsyncZkSession {
    pub(super) fn new(
        zk: Arc<ZooKeeper>,
        reconnected: watch::Receiver<u64>,
        client_id: usize,
        counters: CounterHandle,
        close_timeout: Duration,
    ) -> Self {
        AsyncZkSession {
            zk: Some(zk),
            reconnected,
            client_id,
            tag: RandomState::new().hash_one(client_id),
            counters,
            close_timeout,
            pending: None,
        }
    }

    /// The live client; once the session was abandoned or closed, an error of the kind a
    /// crashed-and-expired client would see.
    pub(super) fn zk(&self) -> Result<Arc<ZooKeeper>, DriverError> {
        self.zk.clone().ok_or_else(|| {
            DriverError::SessionExpired("the session was abandoned or closed".into())
        })
    }

    async fn create_with_parents(
        &self,
        zk: &ZooKeeper,
        path: &str,
        value: &[u8],
    ) -> Result<(), DriverError> {
        self.counters.request();
        match create_in_parent(zk, path, value, CreateMode::Persistent).await {
            Ok(_) => Ok(()),
            // Another writer created it first: write over it, as a put would.
            Err(ZkError::NodeExists) => {
                self.counters.request();
                zk.set_data(path, value.to_vec(), None)
                    .await
                    .map(drop)
                    .map_err(map_error)
            }
            Err(e) => Err(map_error(e)),
        }
    }
}

/// Creates `path` (create2, which returns the node's stat), creating its missing ancestors
/// (persistent) first when the parent is missing. Returns the created path and its stat.
pub(super) async fn create_in_parent(
    zk: &ZooKeeper,
    path: &str,
    value: &[u8],
    mode: CreateMode,
) -> ZkResult<(String, Stat)> {
    let create = || zk.create2(path, value.to_vec(), Acl::open_unsafe().clone(), mode);
    match create().await {
        Err(ZkError::NoNode) => {
            let parent = path.rsplit_once('/').map_or("", |(parent, _)| parent);
            if parent.is_empty() {
                return Err(ZkError::NoNode);
            }
            zk.ensure_path(parent).await?;
            create().await
        }
        other => other,
    }
}

#[async_trait]
impl Session for AsyncZkSession {
    /// setData on the key's znode; creates it (and its parents) on first write.
    async fn put(&mut self, key: &str, value: &[u8]) -> Result<(), DriverError> {
        let path = znode_path(key);
        let zk = self.zk()?;
        self.counters.request();
        match zk.set_data(&path, value.to_vec(), None).await {
            Ok(_) => Ok(()),
            Err(ZkError::NoNode) => self.create_with_parents(&zk, &path, value).await,
            Err(e) => Err(map_error(e)),
        }
    }

    /// Serializable only: getData from the connected server. The crate cannot send sync()
    /// or a multi, which the other reads need.
    async fn get(
        &mut self,
        key: &str,
        consistency: Consistency,
    ) -> Result<Option<Vec<u8>>, DriverError> {
        if consistency != Consistency::Serializable {
            return Err(DriverError::Unsupported(
                "zookeeper-async has no sync() and no multi, so only serializable reads; use --consistency serializable".into(),
            ));
        }
        let path = znode_path(key);
        let zk = self.zk()?;
        self.counters.request();
        match zk.get_data(&path, false).await {
            Ok((data, _)) => Ok(Some(data)),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(map_error(e)),
        }
    }

    async fn lock(&mut self, name: &str, recipe: LockRecipe) -> Result<LockGuard, DriverError> {
        lock::repair(self).await?;
        match recipe {
            LockRecipe::HerdFree => lock::lock_queue(self, name).await,
            LockRecipe::Naive => lock::lock_naive(self, name).await,
            other => Err(other.unsupported(crate::ApiFamily::ZooKeeper)),
        }
    }

    async fn unlock(&mut self, guard: LockGuard) -> Result<(), DriverError> {
        lock::unlock(self, guard).await
    }

    /// Requests, watch notifications and silent session re-establishments. Pings are sent
    /// by the crate on its own and are not counted (keepalives stay 0).
    fn counters(&self) -> ClientCounters {
        self.counters.snapshot()
    }

    fn counter_handle(&self) -> Option<CounterHandle> {
        Some(self.counters.clone())
    }

    /// Drops the handle without closing. The crate's connection task outlives it and keeps
    /// the session alive until the process exits, so unlike a crashed client's, what this
    /// session holds is not freed by expiry: the crate offers no way to silence it.
    fn abandon(&mut self) {
        self.pending = None;
        self.zk = None;
    }

    /// Sends closeSession. The crate answers as soon as the request is written, so the
    /// server may still be releasing what the session held when this returns.
    async fn close(&mut self) -> Result<(), DriverError> {
        self.pending = None;
        let Some(zk) = self.zk.take() else {
            return Ok(());
        };
        self.counters.request();
        tokio::time::timeout(self.close_timeout, zk.close())
            .await
            .map_err(|_| DriverError::Timeout(self.close_timeout))?
            .map_err(map_error)
    }
}

/// A session dropped without close() is closed in the background: left alone, the crate
/// would keep it alive (and its locks held) until the process exits.
impl Drop for AsyncZkSession {
    fn drop(&mut self) {
        let (Some(zk), Ok(runtime)) = (self.zk.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let bound = self.close_timeout;
        runtime.spawn(async move {
            let _ = tokio::time::timeout(bound, zk.close()).await;
        });
    }
}
