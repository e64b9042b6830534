//! The part every watch handle shares ([`Follower`]): a weak reference to its session's
//! client, the session's counters, and the one-shot watch it set with its last read.
//!
//! A ZooKeeper watch fires once, so a handle follows a node by reading with a watch, waiting
//! for the event, and reading again with a new watch; what changes in between is coalesced.
//! The armed watch is kept in the handle, not in the `next()` future, so a cancelled `next()`
//! (the operation timeout) loses nothing: the next call waits on the same watch. A handle
//! with no armed watch (the first call, or one cancelled after the event) reads at once.
//!
//! Many handles of one session may watch the same path. The server keeps one watch per
//! connection and path; the client keeps every local watcher of the path and hands the one
//! event to each, so every handle is notified (and each counts its notification).

use std::pin::Pin;
use std::sync::{Arc, Weak};

use super::client::{Client, Error, Names, WatchedEvent, Watcher};
use futures::Future;

use super::access::NodeAcl;
use super::errors::check_event;
use super::map_error;
use super::session::ZkSession;
use crate::{CounterHandle, DriverError};

type Armed = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

pub(super) struct Follower {
    client: Weak<Client>,
    pub(super) counters: CounterHandle,
    armed: Option<Armed>,
    /// The ACL of a directory it creates to watch.
    acl: NodeAcl,
}

impl Follower {
    /// A follower on `s`'s client; fails if the session was abandoned or closed.
    pub(super) fn new(s: &ZkSession) -> Result<Follower, DriverError> {
        Ok(Follower {
            client: Arc::downgrade(s.zk()?),
            counters: s.counters.clone(),
            armed: None,
            acl: s.acl(),
        })
    }

    /// The session's client while the session lives.
    pub(super) fn client(&self) -> Result<Arc<Client>, DriverError> {
        self.client.upgrade().ok_or_else(|| {
            DriverError::SessionExpired("the session was abandoned or closed".into())
        })
    }

    /// Waits for the armed watch to fire, if one is armed; `waiting` names what for.
    pub(super) async fn wait(&mut self, waiting: &str) -> Result<(), DriverError> {
        let Some(armed) = self.armed.as_mut() else {
            return Ok(());
        };
        let event = armed.await;
        self.armed = None;
        self.counters.notifications(1);
        check_event(&event, waiting)
    }

    /// Keeps `watcher` for the next [`Follower::wait`].
    pub(super) fn arm(&mut self, watcher: Watcher) {
        self.armed = Some(Box::pin(watcher.changed()));
    }

    /// Lists `dir`'s children and arms a watch on them; a missing `dir` is created first
    /// (empty), so the watch has a node to live on.
    pub(super) async fn children(&mut self, dir: &str) -> Result<Names, DriverError> {
        let zk = self.client()?;
        self.counters.request();
        let (children, watcher) = match zk.children_and_watch(dir).await {
            Err(Error::NoNode) => {
                self.counters.request();
                zk.mkdir(dir, &self.acl.entries())
                    .await
                    .map_err(map_error)?;
                self.counters.request();
                zk.children_and_watch(dir).await
            }
            other => other,
        }
        .map_err(map_error)?;
        self.arm(watcher);
        Ok(children)
    }
}
