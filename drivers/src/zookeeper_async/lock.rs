//! The ZooKeeper driver's lock recipes ([`crate::zookeeper`]'s `lock.rs`: same paths,
//! node names, watches and fencing token) over zookeeper-async.
//!
//! Two things differ because of the crate. Node names carry the session's random tag where
//! the other driver uses the session id (not exposed here). And a waiter also wakes when the
//! crate reconnects: the server drops a connection's watches and the crate does not
//! re-register them, so a waiter would otherwise sleep through its predecessor's release.
//!
//! A holder whose session the crate silently replaced has lost its node; nothing tells it
//! until it releases, and then only because the release finds the node gone (or, for the
//! naive recipe's shared `holder` path, another session's node: the czxid check below).

use tokio::sync::oneshot;
use zookeeper_async::{CreateMode, WatchedEvent, ZkError, ZooKeeper};

use super::map_error;
use super::session::{create_in_parent, AsyncZkSession};
use crate::zookeeper::{sequence, ROOT};
use crate::{DriverError, LockGuard};

/// A node a cancelled acquisition may have left behind.
#[derive(Debug, Clone)]
pub(super) enum Pending {
    /// This session's sequential nodes under `dir`, recognised by their name `prefix`.
    Queue { dir: String, prefix: String },
    /// The naive recipe's holder node: ours only if it holds our `value`.
    Holder { path: String, value: String },
}

/// Deletes what a cancelled acquisition left. Kept pending if that fails, to retry later.
pub(super) async fn repair(s: &mut AsyncZkSession) -> Result<(), DriverError> {
    let Some(pending) = s.pending.clone() else {
        return Ok(());
    };
    let zk = s.zk()?;
    match pending {
        Pending::Queue { dir, prefix } => {
            s.counters.request();
            let children = match zk.get_children(&dir, false).await {
                Err(ZkError::NoNode) => Vec::new(),
                other => other.map_err(map_error)?,
            };
            for child in children.iter().filter(|c| c.starts_with(&prefix)) {
                s.counters.request();
                delete_if_present(&zk, &format!("{dir}/{child}"), None).await?;
            }
        }
        Pending::Holder { path, value } => {
            s.counters.request();
            match zk.get_data(&path, false).await {
                Ok((data, stat)) if data == value.as_bytes() => {
                    s.counters.request();
                    delete_if_present(&zk, &path, Some(stat.version)).await?;
                }
                Ok(_) | Err(ZkError::NoNode) => {}
                Err(e) => return Err(map_error(e)),
            }
        }
    }
    s.pending = None;
    Ok(())
}

async fn delete_if_present(
    zk: &ZooKeeper,
    path: &str,
    version: Option<i32>,
) -> Result<(), DriverError> {
    match zk.delete(path, version).await {
        Ok(()) | Err(ZkError::NoNode) => Ok(()),
        Err(e) => Err(map_error(e)),
    }
}

/// A one-shot watch: the callback to hand the crate, and the receiver to wait on.
fn one_shot_watch() -> (
    impl FnOnce(WatchedEvent) + Send + 'static,
    oneshot::Receiver<WatchedEvent>,
) {
    let (tx, rx) = oneshot::channel();
    (move |event| drop(tx.send(event)), rx)
}

/// Waits until the watch fires (a notification) or the crate reconnects (the watch is then
/// gone on the server, so the caller must look again).
async fn wait(
    s: &mut AsyncZkSession,
    fired: oneshot::Receiver<WatchedEvent>,
) -> Result<(), DriverError> {
    tokio::select! {
        event = fired => {
            event.map_err(|_| DriverError::Server("the client library dropped a watch".into()))?;
            s.counters.notifications(1);
        }
        changed = s.reconnected.changed() => {
            changed.map_err(|_| DriverError::SessionExpired("the session ended while waiting for the lock".into()))?;
        }
    }
    Ok(())
}

/// The herd-free recipe.
pub(super) async fn lock_queue(
    s: &mut AsyncZkSession,
    name: &str,
) -> Result<LockGuard, DriverError> {
    let zk = s.zk()?;
    let dir = format!("{ROOT}/lock/{name}");
    let prefix = format!("{:016x}-lock-", s.tag);
    s.pending = Some(Pending::Queue {
        dir: dir.clone(),
        prefix: prefix.clone(),
    });
    s.counters.request();
    let (path, stat) = create_in_parent(
        &zk,
        &format!("{dir}/{prefix}"),
        b"",
        CreateMode::EphemeralSequential,
    )
    .await
    .map_err(map_error)?;
    let me = path.rsplit('/').next().unwrap_or_default().to_string();
    let my_seq = sequence(&me)
        .ok_or_else(|| DriverError::Server(format!("unexpected lock node name {path}")))?;
    loop {
        s.counters.request();
        let children = zk.get_children(&dir, false).await.map_err(map_error)?;
        if !children.contains(&me) {
            s.pending = None;
            return Err(DriverError::SessionExpired(format!(
                "lock node {path} vanished while waiting"
            )));
        }
        // The predecessor: the child with the highest sequence number below ours.
        let predecessor = children
            .iter()
            .filter_map(|c| sequence(c).filter(|&n| n < my_seq).map(|n| (n, c)))
            .max_by_key(|(n, _)| *n);
        let Some((_, predecessor)) = predecessor else {
            s.pending = None;
            return Ok(LockGuard {
                name: name.to_string(),
                token: stat.czxid,
                key: path.into_bytes(),
            });
        };
        // Reconnections from here on wake the wait.
        s.reconnected.borrow_and_update();
        let (callback, fired) = one_shot_watch();
        s.counters.request();
        let exists = zk
            .exists_w(&format!("{dir}/{predecessor}"), callback)
            .await
            .map_err(map_error)?;
        if exists.is_some() {
            wait(s, fired).await?;
        }
    }
}

/// The naive recipe.
pub(super) async fn lock_naive(
    s: &mut AsyncZkSession,
    name: &str,
) -> Result<LockGuard, DriverError> {
    let zk = s.zk()?;
    let dir = format!("{ROOT}/naive-lock/{name}");
    let holder = format!("{dir}/holder");
    let value = format!("client-{}-{:016x}", s.client_id, s.tag);
    loop {
        s.pending = Some(Pending::Holder {
            path: holder.clone(),
            value: value.clone(),
        });
        s.counters.request();
        match create_in_parent(&zk, &holder, value.as_bytes(), CreateMode::Ephemeral).await {
            Ok((_, stat)) => {
                s.pending = None;
                return Ok(LockGuard {
                    name: name.to_string(),
                    token: stat.czxid,
                    key: holder.into_bytes(),
                });
            }
            Err(ZkError::NodeExists) => s.pending = None,
            Err(e) => return Err(map_error(e)),
        }
        s.reconnected.borrow_and_update();
        let (callback, fired) = one_shot_watch();
        s.counters.request();
        let children = zk.get_children_w(&dir, callback).await.map_err(map_error)?;
        if children.iter().any(|c| c == "holder") {
            wait(s, fired).await?;
        }
    }
}

/// Releases a lock by deleting its node. The queue node's path is unique to this session.
/// The naive holder path is shared, and after a silent re-establishment it may be another
/// session's node, so it is deleted only if its czxid is our fencing token (checked and
/// deleted on one session in order: a node we see as ours cannot belong to a session that
/// expired before the current one began).
pub(super) async fn unlock(s: &mut AsyncZkSession, guard: LockGuard) -> Result<(), DriverError> {
    let path = String::from_utf8(guard.key).map_err(|_| {
        DriverError::Unsupported(format!("lock {} has a non-UTF-8 node path", guard.name))
    })?;
    let lost = || {
        DriverError::SessionExpired(format!(
            "lock {} was lost before release (its node is gone)",
            guard.name
        ))
    };
    let zk = s.zk()?;
    let version = if path.starts_with(&format!("{ROOT}/naive-lock/")) {
        s.counters.request();
        match zk.exists(&path, false).await.map_err(map_error)? {
            Some(stat) if stat.czxid == guard.token => Some(stat.version),
            _ => return Err(lost()),
        }
    } else {
        None
    };
    s.counters.request();
    match zk.delete(&path, version).await {
        Ok(()) => Ok(()),
        Err(ZkError::NoNode) => Err(lost()),
        Err(e) => Err(map_error(e)),
    }
}
