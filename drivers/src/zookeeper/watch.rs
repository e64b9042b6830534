//! Value watches over the ZooKeeper API ([`Session::watch_value`](crate::Session)): getData
//! with a one-shot watch on the key's znode (the path `put` and `get` use), and after each
//! event a new read with a new watch. The value returned is the one read after the event, so
//! versions written between the event and the read are coalesced (ZooKeeper's nature; the
//! workload counts them). A missing key is watched with exists, which fires on its creation.

use super::client::Error;
use async_trait::async_trait;

use super::follow::Follower;
use super::map_error;
use super::session::{znode_path, ZkSession};
use crate::{DriverError, ValueWatch};

/// Reads that may find the node created or deleted in between before one sticks; each retry
/// follows a change by another client, so more than a few means something is wrong.
const READ_ATTEMPTS: usize = 8;

pub(super) struct ZkValueWatch {
    follower: Follower,
    path: String,
}

/// A handle on `key`'s value; it reads nothing until its first `next()`.
pub(super) fn watch_value(s: &ZkSession, key: &str) -> Result<ZkValueWatch, DriverError> {
    Ok(ZkValueWatch {
        follower: Follower::new(s)?,
        path: znode_path(key).into_owned(),
    })
}

impl ZkValueWatch {
    /// Reads the value and arms a watch: getData's if the node exists, else exists'.
    async fn read(&mut self) -> Result<Option<Vec<u8>>, DriverError> {
        let zk = self.follower.client()?;
        for _ in 0..READ_ATTEMPTS {
            self.follower.counters.request();
            match zk.get_and_watch_data(&self.path).await {
                Ok((data, _, watcher)) => {
                    self.follower.arm(watcher);
                    return Ok(Some(data));
                }
                Err(Error::NoNode) => {}
                Err(e) => return Err(map_error(e)),
            }
            self.follower.counters.request();
            let (stat, watcher) = zk.exists_and_watch(&self.path).await.map_err(map_error)?;
            if stat.is_none() {
                self.follower.arm(watcher);
                return Ok(None);
            }
            // Created between the two reads: read its data.
        }
        Err(DriverError::Server(format!(
            "{} kept appearing and vanishing over {READ_ATTEMPTS} reads",
            self.path
        )))
    }
}

#[async_trait]
impl ValueWatch for ZkValueWatch {
    async fn next(&mut self) -> Result<Option<Vec<u8>>, DriverError> {
        self.follower.wait("a value change").await?;
        self.read().await
    }
}
