//! Lock recipes over the etcd v3 API.
//!
//! - `etcd-mutex` (herd-free), as etcd's concurrency Mutex: each contender puts
//!   `<prefix>/<lease>` under its lease; the lowest create revision holds; every other
//!   contender waits only for the deletion of the key with the next-lower create revision.
//! - `naive`: every waiter watches the one lock key and retries a create-if-absent
//!   transaction on every release, so one release wakes all waiters (the herd).
//!
//! The fencing token is the lock key's create revision in both.

use etcd_client::{
    Compare, CompareOp, DeleteOptions, EventType, GetOptions, PutOptions, SortOrder, SortTarget,
    Txn, TxnOp, TxnOpResponse, WatchOptions,
};

use super::session::EtcdSession;
use super::{map_error, KEY_PREFIX};
use crate::{DriverError, LockGuard};

fn mutex_prefix(name: &str) -> String {
    format!("{KEY_PREFIX}lock/{name}/")
}

fn naive_key(name: &str) -> String {
    format!("{KEY_PREFIX}naive-lock/{name}")
}

/// The herd-free recipe.
pub(super) async fn lock_mutex(s: &mut EtcdSession, name: &str) -> Result<LockGuard, DriverError> {
    let lease = s.lease_id().await?;
    let prefix = mutex_prefix(name);
    let key = format!("{prefix}{lease:016x}");
    let owner = TxnOp::get(
        prefix.clone(),
        Some(
            GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Ascend)
                .with_limit(1),
        ),
    );
    // Create our key if absent (a retry after a dropped attempt reuses it), and read the
    // current owner in the same transaction.
    let txn = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([
            TxnOp::put(key.clone(), "", Some(PutOptions::new().with_lease(lease))),
            owner.clone(),
        ])
        .or_else([TxnOp::get(key.clone(), None), owner]);
    s.pending_key = Some(key.clone().into_bytes());
    s.counters.request();
    let resp = s.client.txn(txn).await.map_err(map_error)?;
    let header_rev = resp.header().map(|h| h.revision()).unwrap_or(0);
    let ops = resp.op_responses();
    let my_rev = if resp.succeeded() {
        header_rev
    } else {
        match ops.first() {
            Some(TxnOpResponse::Get(g)) => {
                g.kvs().first().map(|kv| kv.create_revision()).unwrap_or(0)
            }
            _ => 0,
        }
    };
    let owner_rev = match ops.get(1) {
        Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.create_revision()),
        _ => None,
    };
    if my_rev == 0 {
        return Err(DriverError::Server(format!(
            "lock key {key} vanished during acquisition"
        )));
    }
    if owner_rev != Some(my_rev) {
        wait_for_predecessors(s, &prefix, my_rev).await?;
        // Our key may have gone with an expired lease while we waited.
        s.counters.request();
        let mine = s.client.get(key.clone(), None).await.map_err(map_error)?;
        if mine.kvs().is_empty() {
            s.pending_key = None;
            return Err(DriverError::SessionExpired(format!(
                "lock key {key} expired while waiting"
            )));
        }
    }
    s.pending_key = None;
    Ok(LockGuard {
        name: name.to_string(),
        token: my_rev,
        key: key.into_bytes(),
    })
}

/// Waits until no key under `prefix` has a create revision below `my_rev`, watching only
/// the nearest predecessor each time.
async fn wait_for_predecessors(
    s: &mut EtcdSession,
    prefix: &str,
    my_rev: i64,
) -> Result<(), DriverError> {
    loop {
        let options = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Descend)
            .with_max_create_revision(my_rev - 1)
            .with_limit(1);
        s.counters.request();
        let resp = s
            .client
            .get(prefix, Some(options))
            .await
            .map_err(map_error)?;
        let Some(predecessor) = resp.kvs().first() else {
            return Ok(());
        };
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        wait_for_delete(s, predecessor.key().to_vec(), rev + 1).await?;
    }
}

/// Watches `key` from `start_revision` until a delete event for it arrives.
async fn wait_for_delete(
    s: &mut EtcdSession,
    key: Vec<u8>,
    start_revision: i64,
) -> Result<(), DriverError> {
    s.counters.request();
    let options = WatchOptions::new().with_start_revision(start_revision);
    let mut stream = s
        .client
        .watch(key, Some(options))
        .await
        .map_err(map_error)?;
    loop {
        let Some(resp) = stream.message().await.map_err(map_error)? else {
            return Err(DriverError::Server(
                "watch stream closed by the server".into(),
            ));
        };
        if resp.canceled() {
            return Err(DriverError::Server(format!(
                "watch canceled: {}",
                resp.cancel_reason()
            )));
        }
        let events = resp.events();
        s.counters.notifications(events.len() as u64);
        if events.iter().any(|e| e.event_type() == EventType::Delete) {
            return Ok(());
        }
    }
}

/// The naive recipe.
pub(super) async fn lock_naive(s: &mut EtcdSession, name: &str) -> Result<LockGuard, DriverError> {
    let lease = s.lease_id().await?;
    let key = naive_key(name);
    let value = format!("client-{}", s.client_id);
    loop {
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                value.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        s.counters.request();
        let resp = s.client.txn(txn).await.map_err(map_error)?;
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        if resp.succeeded() {
            return Ok(LockGuard {
                name: name.to_string(),
                token: rev,
                key: key.into_bytes(),
            });
        }
        wait_for_delete(s, key.clone().into_bytes(), rev + 1).await?;
    }
}

/// Releases a lock: deletes its key, but only if it is still ours (same create revision),
/// so a holder whose lease expired cannot delete its successor's key.
pub(super) async fn unlock(s: &mut EtcdSession, guard: LockGuard) -> Result<(), DriverError> {
    let txn = Txn::new()
        .when([Compare::create_revision(
            guard.key.clone(),
            CompareOp::Equal,
            guard.token,
        )])
        .and_then([TxnOp::delete(guard.key.clone(), None::<DeleteOptions>)]);
    s.counters.request();
    let resp = s.client.txn(txn).await.map_err(map_error)?;
    if !resp.succeeded() {
        return Err(DriverError::SessionExpired(format!(
            "lock {} was lost before release (its key is gone or re-created)",
            guard.name
        )));
    }
    Ok(())
}
