//! The create-revision queue under a key prefix that etcd's concurrency package builds both
//! its Mutex and its Election on: each session puts `<prefix><lease>` under its lease, the
//! lowest create revision is at the head, and a herd-free waiter waits only for the deletion
//! of the key just ahead of it (etcd's `waitDeletes`).
//!
//! The recipes here and in [`super::lock`] and [`super::election`] await their etcd-client
//! calls from the heap (`Box::pin`): an async function keeps room for the largest future it
//! awaits, an etcd-client call's several KB, and at 10,000 contenders nearly every session
//! waits on a small watch instead (106 MB of lock futures in a heap profile).

use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse, WatchOptions,
};

use super::map_error;
use super::prefix_view::Change;
use super::session::EtcdSession;
use crate::DriverError;

/// A session's place in a queue.
pub(super) struct Place {
    pub key: String,
    /// The key's create revision: its rank, and the fencing / leadership token.
    pub rev: i64,
    /// Whether the key was at the head when it was created (or found).
    pub at_head: bool,
    /// The revision that creation (or finding) happened at: a wait must watch from after it.
    pub read_rev: i64,
}

/// Puts this session's key under `prefix` with `value` unless it is there already (a retry
/// after a dropped attempt reuses it), reading the head in the same transaction. The key is
/// recorded as the session's `pending_key` until the caller clears it, so an attempt dropped
/// at any later await point is cleaned up by the session's next call.
pub(super) async fn enqueue(
    s: &mut EtcdSession,
    prefix: &str,
    value: &[u8],
) -> Result<Place, DriverError> {
    let lease = s.lease_id().await?;
    let key = format!("{prefix}{lease:016x}");
    let head = TxnOp::get(
        prefix,
        Some(
            GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Ascend)
                .with_limit(1),
        ),
    );
    let txn = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([
            TxnOp::put(
                key.clone(),
                value,
                Some(PutOptions::new().with_lease(lease)),
            ),
            head.clone(),
        ])
        .or_else([TxnOp::get(key.clone(), None), head]);
    s.pending_key = Some(key.clone().into_bytes());
    s.counters.request();
    let resp = Box::pin(s.kv.txn(txn)).await.map_err(map_error)?;
    let header_rev = resp.header().map(|h| h.revision()).unwrap_or(0);
    let ops = resp.op_responses();
    let rev = if resp.succeeded() {
        header_rev
    } else {
        match ops.first() {
            Some(TxnOpResponse::Get(g)) => {
                g.kvs().first().map(|kv| kv.create_revision()).unwrap_or(0)
            }
            _ => 0,
        }
    };
    let head_rev = match ops.get(1) {
        Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.create_revision()),
        _ => None,
    };
    if rev == 0 {
        return Err(DriverError::Server(format!(
            "queue key {key} vanished while it was being created"
        )));
    }
    Ok(Place {
        key,
        rev,
        at_head: head_rev == Some(rev),
        read_rev: header_rev,
    })
}

/// After waiting: the key may have gone with an expired lease meanwhile. Clears the
/// session's `pending_key` either way (a vanished key needs no cleanup).
pub(super) async fn confirm_still_queued(
    s: &mut EtcdSession,
    place: &Place,
) -> Result<(), DriverError> {
    s.counters.request();
    let mine = Box::pin(s.kv.get(place.key.clone(), None))
        .await
        .map_err(map_error)?;
    s.pending_key = None;
    if mine.kvs().is_empty() {
        return Err(DriverError::SessionExpired(format!(
            "queue key {} expired while waiting",
            place.key
        )));
    }
    Ok(())
}

/// The herd-free wait: until no key under `prefix` has a create revision below `my_rev`,
/// watching only the nearest predecessor each time.
pub(super) async fn wait_for_predecessors(
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
        let resp = Box::pin(s.kv.get(prefix, Some(options)))
            .await
            .map_err(map_error)?;
        let Some(predecessor) = resp.kvs().first() else {
            return Ok(());
        };
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        wait_for_delete(s, predecessor.key().to_vec(), rev + 1).await?;
    }
}

/// Watches `key` from `start_revision` until a delete event for it arrives, on the
/// connection's shared watch stream: a stream per waiter cost 3 KB a contender at 10,000.
pub(super) async fn wait_for_delete(
    s: &mut EtcdSession,
    key: Vec<u8>,
    start_revision: i64,
) -> Result<(), DriverError> {
    let options = WatchOptions::new().with_start_revision(start_revision);
    let mut watcher = Box::pin(s.subscribe(key, options)).await?;
    loop {
        let changes = watcher.next().await?;
        if changes.iter().any(|c| matches!(c, Change::Delete { .. })) {
            return Ok(());
        }
    }
}

/// Deletes `key` if it still has create revision `token`, so a holder whose lease expired
/// cannot delete its successor's key. `what` names the holding in the error.
pub(super) async fn delete_if_created_at(
    s: &mut EtcdSession,
    key: &[u8],
    token: i64,
    what: &str,
) -> Result<(), DriverError> {
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, token)])
        .and_then([TxnOp::delete(key, None::<DeleteOptions>)]);
    s.counters.request();
    let resp = Box::pin(s.kv.txn(txn)).await.map_err(map_error)?;
    if !resp.succeeded() {
        return Err(DriverError::SessionExpired(format!(
            "{what} was lost before release (its key is gone or re-created)"
        )));
    }
    Ok(())
}
