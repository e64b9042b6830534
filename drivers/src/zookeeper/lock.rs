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
//!
//! [`fenced_put`] guards a write with the lock itself: a multi that checks the holder's
//! queue node at version 0 (lock nodes are never set) and sets the resource's data, so it
//! applies only while the node exists, i.e. while the lock is held. ZooKeeper's check
//! compares versions only, and the naive recipe's `holder` node is re-created at version 0
//! by every holder, so the naive recipe cannot be fenced this way (refused).

use super::client::{Client, CreateMode, Error, Op};

use super::errors::check_event;
use super::pending::Pending;
use super::queue::{self, Wake};
use super::session::{create_in_parent, ZkSession};
use super::{establish, map_error, ROOT};
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
        match create_in_parent(
            &zk,
            &holder,
            value.as_bytes(),
            CreateMode::Ephemeral,
            s.acl(),
        )
        .await
        {
            Ok((_, stat)) => {
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
        let (children, watcher) = zk.children_and_watch(&dir).await.map_err(map_error)?;
        // The listing is not kept through the wait (thousands of waiters would hold it).
        let held = children.iter().any(|c| c == "holder");
        drop(children);
        if held {
            let event = watcher.changed().await;
            s.counters.notifications(1);
            check_event(&event, "the lock")?;
        }
    }
}

/// Releases a lock by deleting its node. No version check is needed: the queue node's path
/// is unique to this session, the holder node is this session's ephemeral, and an expired
/// session can send nothing, so a delete that succeeds deletes this session's own node.
/// A release that lost its connection (e.g. a frozen session's relay just passed on the
/// server's close) is retried once the client reconnected or learned its session expired.
pub(super) async fn unlock(s: &mut ZkSession, guard: LockGuard) -> Result<(), DriverError> {
    let what = format!("lock {}", guard.name);
    match s.delete_own(guard.key.clone(), &what).await {
        Err(DriverError::Unreachable { .. }) => {
            let zk = s.zk()?.clone();
            s.reconnected(&zk).await;
            s.delete_own(guard.key, &what).await
        }
        other => other,
    }
}

/// Sets `resource`'s data to `value` if `guard`'s lock node still exists (see the module
/// doc). True if applied. When this session can no longer send (expired, abandoned), the
/// write goes through a fresh session, as an application whose client library reconnects
/// would send it: the check, not the expiry, must be what stops it.
pub(super) async fn fenced_put(
    s: &mut ZkSession,
    guard: &LockGuard,
    resource: &str,
    value: &[u8],
) -> Result<bool, DriverError> {
    let lock_node = String::from_utf8(guard.key.clone()).map_err(|_| {
        DriverError::Unsupported(format!("lock {} has a non-UTF-8 node path", guard.name))
    })?;
    if lock_node.starts_with(&format!("{ROOT}/naive-lock/")) {
        return Err(DriverError::Unsupported(
            "fenced_put cannot fence the naive recipe: every holder re-creates its holder node at version 0".into(),
        ));
    }
    if let Ok(zk) = s.zk().cloned() {
        // At most one retry, after a lost connection came back.
        for _ in 0..2 {
            s.counters.request();
            match check_and_set(&zk, &lock_node, resource, value).await {
                Err(Error::ConnectionLoss) if s.reconnected(&zk).await => continue,
                Err(Error::ConnectionLoss | Error::SessionExpired | Error::Closed) => break,
                other => return other.map_err(map_error),
            }
        }
    }
    let fresh = establish(
        &s.cluster,
        s.connect_timeout,
        s.connect_timeout,
        false,
        &s.access,
    )
    .await?;
    s.counters.request();
    // Dropping the plain client closes the fresh session.
    check_and_set(&fresh, &lock_node, resource, value)
        .await
        .map_err(map_error)
}

/// One multi: check `lock_node` at version 0, set `resource`. False if the check failed.
async fn check_and_set(
    zk: &Client,
    lock_node: &str,
    resource: &str,
    value: &[u8],
) -> Result<bool, Error> {
    let ops = [
        Op::Check {
            path: lock_node,
            version: 0,
        },
        Op::SetData {
            path: resource,
            data: value,
            version: -1,
        },
    ];
    match zk.multi(&ops).await? {
        Ok(()) => Ok(true),
        // The check (op 0) failed: the lock node is gone or not the holder's.
        Err((0, Error::NoNode | Error::BadVersion)) => Ok(false),
        Err((_, e)) => Err(e),
    }
}
