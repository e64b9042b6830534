//! Lock recipes over the etcd v3 API.
//!
//! - `etcd-mutex` (herd-free), as etcd's concurrency Mutex: each contender queues
//!   `<prefix>/<lease>` under its lease ([`super::queue`]); the lowest create revision
//!   holds; every other contender waits only for the deletion of the key just ahead of it.
//! - `naive`: every waiter watches the one lock key and retries a create-if-absent
//!   transaction on every release, so one release wakes all waiters (the herd).
//!
//! The fencing token is the lock key's create revision in both, and [`fenced_put`] guards a
//! write with it: a transaction that puts only while the lock key still has that create
//! revision (the check Jepsen's etcd 3.4.3 analysis and etcd's own lock documentation point
//! to for writes a lock protects).

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use super::queue::{self, wait_for_delete};
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
    let prefix = mutex_prefix(name);
    let place = queue::enqueue(s, &prefix, b"").await?;
    if !place.at_head {
        queue::wait_for_predecessors(s, &prefix, place.rev).await?;
        queue::confirm_still_queued(s, &place).await?;
    }
    s.pending_key = None;
    Ok(LockGuard {
        name: name.to_string(),
        token: place.rev,
        key: place.key.into_bytes(),
    })
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
        let resp = Box::pin(s.kv.txn(txn)).await.map_err(map_error)?;
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

/// Releases a lock: deletes its key, but only if it is still ours (same create revision).
pub(super) async fn unlock(s: &mut EtcdSession, guard: LockGuard) -> Result<(), DriverError> {
    let what = format!("lock {}", guard.name);
    queue::delete_if_created_at(s, &guard.key, guard.token, &what).await
}

/// Puts `value` under `key` if `guard`'s lock key still has create revision `guard.token`
/// (not deleted by an expired lease, not re-created by a later holder). True if applied.
pub(super) async fn fenced_put(
    s: &mut EtcdSession,
    guard: &LockGuard,
    key: &str,
    value: &[u8],
) -> Result<bool, DriverError> {
    let txn = Txn::new()
        .when([Compare::create_revision(
            guard.key.clone(),
            CompareOp::Equal,
            guard.token,
        )])
        .and_then([TxnOp::put(key, value, None)]);
    s.counters.request();
    let resp = Box::pin(s.kv.txn(txn)).await.map_err(map_error)?;
    Ok(resp.succeeded())
}
