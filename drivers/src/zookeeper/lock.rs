//! Lock recipes over the ZooKeeper API.
//!
//! - `zk-recipe` (herd-free), ZooKeeper's lock recipe as Curator's InterProcessMutex runs
//!   it: each contender creates an ephemeral sequential child `<session>-lock-NNNNNNNNNN` of
//!   `/coordbench/lock/<name>`; the lowest sequence number holds; every other contender sets
//!   an exists-watch on its immediate predecessor only, and re-checks when it fires.
//! - `naive`: every waiter watches the children of `/coordbench/naive-lock/<name>` and, on
//!   every change, tries again to create the one ephemeral `holder` child, so one release
//!   wakes every waiter (the herd effect ZooKeeper's recipes page warns about).
//!
//! The fencing token is the lock node's czxid in both. The session id in the sequential
//! node's name (Curator's "protection") lets a cancelled acquisition find its node, whose
//! sequence number it never learned.

use zookeeper_client::{
    Acls, Client, CreateMode, CreateOptions, Error, EventType, SessionState, WatchedEvent,
};

use super::session::{create_in_parent, ZkSession};
use super::{map_error, ROOT};
use crate::{DriverError, LockGuard};

const EPHEMERAL: CreateOptions<'static> = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
const EPHEMERAL_SEQUENTIAL: CreateOptions<'static> =
    CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());

/// A node a cancelled acquisition may have left behind.
#[derive(Debug, Clone)]
pub(super) enum Pending {
    /// This session's sequential nodes under `dir`, recognised by their name `prefix`.
    Queue { dir: String, prefix: String },
    /// The naive recipe's holder node: ours only if this session owns it.
    Holder { path: String },
}

/// Deletes what a cancelled acquisition left. Kept pending if that fails, to retry later.
pub(super) async fn repair(s: &mut ZkSession) -> Result<(), DriverError> {
    let Some(pending) = s.pending.clone() else {
        return Ok(());
    };
    let zk = s.zk()?.clone();
    match pending {
        Pending::Queue { dir, prefix } => {
            s.counters.request();
            let children = match zk.list_children(&dir).await {
                Err(Error::NoNode) => Vec::new(),
                other => other.map_err(map_error)?,
            };
            for child in children.iter().filter(|c| c.starts_with(&prefix)) {
                s.counters.request();
                delete_if_present(&zk, &format!("{dir}/{child}"), None).await?;
            }
        }
        Pending::Holder { path } => {
            s.counters.request();
            let stat = zk.check_stat(&path).await.map_err(map_error)?;
            if let Some(stat) = stat.filter(|st| st.ephemeral_owner == zk.session_id().0) {
                s.counters.request();
                delete_if_present(&zk, &path, Some(stat.version)).await?;
            }
        }
    }
    s.pending = None;
    Ok(())
}

async fn delete_if_present(
    zk: &Client,
    path: &str,
    version: Option<i32>,
) -> Result<(), DriverError> {
    match zk.delete(path, version).await {
        Ok(()) | Err(Error::NoNode) => Ok(()),
        Err(e) => Err(map_error(e)),
    }
}

/// The sequence number that ends a sequential node's name.
pub(crate) fn sequence(name: &str) -> Option<i64> {
    name.rsplit('-').next()?.parse().ok()
}

/// Fails if a watch fired because the session ended rather than because the node changed.
fn check_session(event: &WatchedEvent) -> Result<(), DriverError> {
    match (event.event_type, event.session_state) {
        (EventType::Session, SessionState::Expired) => Err(DriverError::SessionExpired(
            "session expired while waiting for the lock".into(),
        )),
        (EventType::Session, state) if state.is_terminated() => Err(DriverError::Server(format!(
            "session ended ({state:?}) while waiting for the lock"
        ))),
        _ => Ok(()),
    }
}

/// The herd-free recipe.
pub(super) async fn lock_queue(s: &mut ZkSession, name: &str) -> Result<LockGuard, DriverError> {
    let zk = s.zk()?.clone();
    let dir = format!("{ROOT}/lock/{name}");
    let prefix = format!("{:016x}-lock-", zk.session_id().0);
    s.pending = Some(Pending::Queue {
        dir: dir.clone(),
        prefix: prefix.clone(),
    });
    s.counters.request();
    let (stat, seq) = create_in_parent(&zk, &format!("{dir}/{prefix}"), b"", &EPHEMERAL_SEQUENTIAL)
        .await
        .map_err(map_error)?;
    let me = format!("{prefix}{seq}");
    let my_seq = seq.into_i64();
    loop {
        s.counters.request();
        let children = zk.list_children(&dir).await.map_err(map_error)?;
        if !children.contains(&me) {
            s.pending = None;
            return Err(DriverError::SessionExpired(format!(
                "lock node {dir}/{me} vanished while waiting"
            )));
        }
        // The predecessor: the child with the highest sequence number below ours.
        let predecessor = children
            .iter()
            .filter_map(|c| sequence(c).filter(|&n| n < my_seq).map(|n| (n, c)))
            .max_by_key(|(n, _)| *n);
        let Some((_, predecessor)) = predecessor else {
            s.pending = None;
            let key = format!("{dir}/{me}").into_bytes();
            return Ok(LockGuard {
                name: name.to_string(),
                token: stat.czxid,
                key,
            });
        };
        s.counters.request();
        let (exists, watcher) = zk
            .check_and_watch_stat(&format!("{dir}/{predecessor}"))
            .await
            .map_err(map_error)?;
        if exists.is_some() {
            let event = watcher.changed().await;
            s.counters.notifications(1);
            check_session(&event)?;
        }
    }
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
            check_session(&event)?;
        }
    }
}

/// Releases a lock by deleting its node. No version check is needed: the queue node's path
/// is unique to this session, the holder node is this session's ephemeral, and an expired
/// session can send nothing, so a delete that succeeds deletes this session's own node.
pub(super) async fn unlock(s: &mut ZkSession, guard: LockGuard) -> Result<(), DriverError> {
    let path = String::from_utf8(guard.key).map_err(|_| {
        DriverError::Unsupported(format!("lock {} has a non-UTF-8 node path", guard.name))
    })?;
    s.counters.request();
    match s.zk()?.delete(&path, None).await {
        Ok(()) => Ok(()),
        Err(Error::NoNode) => Err(DriverError::SessionExpired(format!(
            "lock {} was lost before release (its node is gone)",
            guard.name
        ))),
        Err(e) => Err(map_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_are_read_from_the_end_of_the_name() {
        assert_eq!(sequence("00000000deadbeef-lock-0000000042"), Some(42));
        assert_eq!(
            sequence("00000000deadbeef-lock-0000000000000000042"),
            Some(42)
        );
        assert_eq!(sequence("holder"), None);
    }
}
