//! Lock recipes over the ZooKeeper API.
//!
//! - `zk-recipe` (herd-free), ZooKeeper's lock recipe as Curator's InterProcessMutex runs
//!   it: each contender creates an ephemeral sequential child `<session>-lock-NNNNNNNNNN` of
//!   `/coordbench/lock/<name>`; the lowest sequence number holds; every other contender sets
//!   a getData watch on its immediate predecessor only, and re-checks when it fires (the
//!   queue itself is [`super::queue`], shared with elections).
//! - `naive`: every waiter watches the children of `/coordbench/naive-lock/<name>` and, on
//!   every change, tries again to create the one ephemeral `holder` child, so one release
//!   wakes every waiter (the herd effect ZooKeeper's recipes page warns about).
//!
//! The fencing token is the lock node's czxid in both. A cancelled acquisition's node is
//! removed later ([`super::pending`]).

use zookeeper_client::Error;

use super::errors::check_event;
use super::pending::Pending;
use super::queue::{self, Wake};
use super::session::{create_in_parent, ZkSession, EPHEMERAL};
use super::{map_error, ROOT};
use crate::{DriverError, LockGuard};

/// The herd-free recipe.
pub(super) async fn lock_queue(s: &mut ZkSession, name: &str) -> Result<LockGuard, DriverError> {
    let place = queue::join(s, format!("{ROOT}/lock/{name}"), "lock", b"").await?;
    queue::wait_first(s, &place, Wake::Predecessor, "the lock").await?;
    Ok(LockGuard {
        name: name.to_string(),
        token: place.czxid,
        key: place.path().into_bytes(),
    })
}

/// The naive recipe.
pub(super) async fn lock_naive(s: &mut ZkSession, name: &str) -> Result<LockGuard, DriverError> {
    let zk = s.zk()?.clone();
    let dir = format!("{ROOT}/naive-lock/{name}");
    let holder = format!("{dir}/holder");
    let value = format!("client-{}", s.client_id);
    loop {
        s.pending = Some(Pending::Holder {
            path: holder.clone(),
        });
        s.counters.request();
        match create_in_parent(&zk, &holder, value.as_bytes(), &EPHEMERAL).await {
            Ok((stat, _)) => {
                s.pending = None;
                return Ok(LockGuard {
                    name: name.to_string(),
                    token: stat.czxid,
                    key: holder.into_bytes(),
                });
            }
            Err(Error::NodeExists) => s.pending = None,
            Err(e) => return Err(map_error(e)),
        }
        s.counters.request();
        let (children, _, watcher) = zk.get_and_watch_children(&dir).await.map_err(map_error)?;
        if children.iter().any(|c| c == "holder") {
            let event = watcher.changed().await;
            s.counters.notifications(1);
            check_event(&event, "the lock")?;
        }
    }
}

/// Releases a lock by deleting its node. No version check is needed: the queue node's path
/// is unique to this session, the holder node is this session's ephemeral, and an expired
/// session can send nothing, so a delete that succeeds deletes this session's own node.
pub(super) async fn unlock(s: &mut ZkSession, guard: LockGuard) -> Result<(), DriverError> {
    s.delete_own(guard.key, &format!("lock {}", guard.name))
        .await
}
