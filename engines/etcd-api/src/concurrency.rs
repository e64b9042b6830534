//! etcd's concurrency recipes (clientv3/concurrency `Mutex` and `Election`) run inside the
//! server, as etcd's v3lock and v3election servers run them, over the same txn, range and
//! watch paths that clients use.
//!
//! A contender owns the key `<name>/<lease in hex>` (attached to its lease); the owner is
//! the key with the lowest create revision. A waiter watches the key created just before
//! its own until it is deleted, then re-checks (etcd's `waitDeletes`). If a wait is
//! abandoned (client cancels, error), the contender's key is removed, as etcd's client
//! does on a canceled context. Every read and write runs as the calling user, as etcd's
//! servers run the recipes with the caller's token: a user needs READ on the prefix and
//! WRITE on its own key.

use std::sync::Arc;

use coordbench_kv::{
    prefix_end, Command, Compare, CompareResult, CompareTarget, DeleteRangeRequest, Event,
    EventKind, KeyValue, PutRequest, RangeRequest, RangeResponse, RequestOp, ResponseOp, SortOrder,
    SortTarget, TxnRequest, TxnResponse, WatchCreateRequest, WatchFilter,
};
use coordbench_node::Replicator;

use crate::core::{Caller, Core};
use crate::error::ApiError;
use crate::fanout::{CancelSignal, Created, Subscriber};
use crate::state_machine::KvStateMachine;

/// Batches an internal waiter may have queued (it consumes them at once).
const WAITER_BUFFER: usize = 16;

/// etcd's errors of these recipes (plain Go errors, so gRPC code Unknown).
pub(crate) const ERR_NOT_LEADER: &str = "election: not leader";
pub(crate) const ERR_NO_LEADER: &str = "election: no leader";
pub(crate) const ERR_SESSION_EXPIRED: &str = "mutex: session is expired";

/// `<name>/`: the prefix of every contender's key.
pub(crate) fn prefix_of(name: &[u8]) -> Vec<u8> {
    let mut p = name.to_vec();
    p.push(b'/');
    p
}

/// A contender's key: the prefix and the lease id as Go's `%x` prints an int64.
pub(crate) fn contender_key(prefix: &[u8], lease: i64) -> Vec<u8> {
    let hex = if lease < 0 {
        format!("-{:x}", lease.unsigned_abs())
    } else {
        format!("{lease:x}")
    };
    [prefix, hex.as_bytes()].concat()
}

fn get(key: &[u8]) -> RangeRequest {
    RangeRequest {
        key: key.to_vec(),
        ..Default::default()
    }
}

/// The key under `prefix` created first (`clientv3.WithFirstCreate`).
pub(crate) fn first_created(prefix: &[u8]) -> RangeRequest {
    RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        limit: 1,
        sort_order: SortOrder::Ascend,
        sort_target: SortTarget::Create,
        ..Default::default()
    }
}

/// The key under `prefix` created last at or before `max_create_revision`.
fn last_created_up_to(prefix: &[u8], max_create_revision: i64) -> RangeRequest {
    RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        limit: 1,
        sort_order: SortOrder::Descend,
        sort_target: SortTarget::Create,
        max_create_revision,
        ..Default::default()
    }
}

fn created_at(key: &[u8], revision: i64) -> Compare {
    Compare {
        result: CompareResult::Equal,
        target: CompareTarget::Create(revision),
        key: key.to_vec(),
        range_end: Vec::new(),
    }
}

fn range_at(t: &TxnResponse, i: usize) -> Result<&RangeResponse, ApiError> {
    match t.responses.get(i) {
        Some(ResponseOp::Range(r)) => Ok(r),
        _ => Err(ApiError::Internal(
            "txn answer lacks a range response".into(),
        )),
    }
}

/// Proposes `cmd` if dropped while armed: the cleanup of an abandoned wait.
struct Cleanup<R: Replicator<KvStateMachine>> {
    core: Arc<Core<R>>,
    who: Caller,
    cmd: Option<Command>,
}

impl<R: Replicator<KvStateMachine>> Cleanup<R> {
    fn disarm(mut self) {
        self.cmd = None;
    }
}

impl<R: Replicator<KvStateMachine>> Drop for Cleanup<R> {
    fn drop(&mut self) {
        if let (Some(cmd), Ok(rt)) = (self.cmd.take(), tokio::runtime::Handle::try_current()) {
            let core = self.core.clone();
            let who = self.who.take();
            rt.spawn(async move {
                if let Err(e) = core.propose(&who, cmd).await {
                    tracing::debug!(error = %e, "cleanup of an abandoned lock/election wait failed");
                }
            });
        }
    }
}

/// A watch on this member's fan-out for a server-side wait.
pub(crate) struct InternalWatch {
    sub: Subscriber,
    signal: CancelSignal,
}

impl InternalWatch {
    /// Events of the next batch; `None` if the watch was lost (then re-check by reading).
    pub async fn next(&mut self) -> Option<Vec<Event>> {
        tokio::select! {
            b = self.sub.recv() => b.map(|b| b.into_iter().flat_map(|d| d.events).collect()),
            () = self.signal.wait() => None,
        }
    }
}

impl<R: Replicator<KvStateMachine>> Core<R> {
    /// Watches from `req.start_revision`; the replay comes back with the watch. `None` when
    /// the start is compacted (the caller re-reads instead).
    pub fn internal_watch(&self, req: &WatchCreateRequest) -> Option<(InternalWatch, Vec<Event>)> {
        let sub = self.watches.register(WAITER_BUFFER);
        match self.replicator.read(|sm| sub.create(sm.store(), req)) {
            Created::Watching { replay, .. } => {
                let signal = sub.cancel_signal();
                Some((InternalWatch { sub, signal }, replay))
            }
            _ => None,
        }
    }

    /// Returns once `key` is deleted at or after `revision`, or once the watch cannot be
    /// kept (the caller re-checks).
    async fn wait_delete(&self, key: &[u8], revision: i64) -> Result<(), ApiError> {
        let req = WatchCreateRequest {
            key: key.to_vec(),
            start_revision: revision,
            filters: vec![WatchFilter::NoPut],
            ..Default::default()
        };
        let Some((mut watch, replay)) = self.internal_watch(&req) else {
            return Ok(());
        };
        if !replay.is_empty() {
            return Ok(());
        }
        loop {
            match self.until_shutdown(watch.next()).await? {
                Some(events) if events.is_empty() => continue,
                _ => return Ok(()),
            }
        }
    }

    /// etcd's `waitDeletes`: until no key under `prefix` was created at or before
    /// `max_create_revision`.
    async fn wait_deletes(
        &self,
        who: &Caller,
        prefix: &[u8],
        max_create_revision: i64,
    ) -> Result<(), ApiError> {
        loop {
            let r = self
                .range(who, last_created_up_to(prefix, max_create_revision))
                .await?;
            let Some(last) = r.kvs.first() else {
                return Ok(());
            };
            self.wait_delete(&last.key, r.header.revision).await?;
        }
    }

    /// v3lock `Lock`: returns the response revision and the owned key.
    pub async fn lock(
        self: &Arc<Self>,
        who: &Caller,
        name: &[u8],
        lease: i64,
    ) -> Result<(i64, Vec<u8>), ApiError> {
        let prefix = prefix_of(name);
        let key = contender_key(&prefix, lease);
        let t = self
            .txn(
                who,
                TxnRequest {
                    compare: vec![created_at(&key, 0)],
                    success: vec![
                        RequestOp::Put(PutRequest {
                            key: key.clone(),
                            lease,
                            ..Default::default()
                        }),
                        RequestOp::Range(first_created(&prefix)),
                    ],
                    failure: vec![
                        RequestOp::Range(get(&key)),
                        RequestOp::Range(first_created(&prefix)),
                    ],
                },
            )
            .await?;
        let my_rev = if t.succeeded {
            t.header.revision
        } else {
            let mine = range_at(&t, 0)?.kvs.first();
            mine.map(|kv| kv.create_revision)
                .ok_or_else(|| ApiError::Internal("lock key vanished inside a txn".into()))?
        };
        if range_at(&t, 1)?
            .kvs
            .first()
            .is_none_or(|o| o.create_revision == my_rev)
        {
            return Ok((t.header.revision, key));
        }
        let cleanup = Cleanup {
            core: self.clone(),
            who: who.clone(),
            cmd: Some(Command::DeleteRange(DeleteRangeRequest {
                key: key.clone(),
                ..Default::default()
            })),
        };
        self.wait_deletes(who, &prefix, my_rev - 1).await?;
        let mine = self.range(who, get(&key)).await?;
        cleanup.disarm();
        if mine.kvs.is_empty() {
            // The lease expired while waiting.
            return Err(ApiError::Unknown(ERR_SESSION_EXPIRED.into()));
        }
        Ok((mine.header.revision, key))
    }

    /// v3lock `Unlock`.
    pub async fn unlock(&self, who: &Caller, key: &[u8]) -> Result<i64, ApiError> {
        let r = self
            .delete(
                who,
                DeleteRangeRequest {
                    key: key.to_vec(),
                    ..Default::default()
                },
            )
            .await?;
        Ok(r.header.revision)
    }

    /// v3election `Campaign`: returns the response revision, the key and its create revision.
    pub async fn campaign(
        self: &Arc<Self>,
        who: &Caller,
        name: &[u8],
        lease: i64,
        value: &[u8],
    ) -> Result<(i64, Vec<u8>, i64), ApiError> {
        let prefix = prefix_of(name);
        let key = contender_key(&prefix, lease);
        let t = self
            .txn(
                who,
                TxnRequest {
                    compare: vec![created_at(&key, 0)],
                    success: vec![RequestOp::Put(PutRequest {
                        key: key.clone(),
                        value: value.to_vec(),
                        lease,
                        ..Default::default()
                    })],
                    failure: vec![RequestOp::Range(get(&key))],
                },
            )
            .await?;
        let mut leader_rev = t.header.revision;
        if !t.succeeded {
            let kv = range_at(&t, 0)?
                .kvs
                .first()
                .ok_or_else(|| ApiError::Internal("campaign key vanished inside a txn".into()))?;
            leader_rev = kv.create_revision;
            if kv.value != value {
                if let Err(e) = self.proclaim(who, &key, leader_rev, value).await {
                    let _ = self.resign(who, &key, leader_rev).await;
                    return Err(e);
                }
            }
        }
        let cleanup = Cleanup {
            core: self.clone(),
            who: who.clone(),
            cmd: Some(Command::Txn(resign_txn(&key, leader_rev))),
        };
        self.wait_deletes(who, &prefix, leader_rev - 1).await?;
        cleanup.disarm();
        Ok((t.header.revision, key, leader_rev))
    }

    /// v3election `Proclaim`: a new value for the leader key, if it is still ours.
    pub async fn proclaim(
        &self,
        who: &Caller,
        key: &[u8],
        rev: i64,
        value: &[u8],
    ) -> Result<i64, ApiError> {
        let t = self
            .txn(
                who,
                TxnRequest {
                    compare: vec![created_at(key, rev)],
                    success: vec![RequestOp::Put(PutRequest {
                        key: key.to_vec(),
                        value: value.to_vec(),
                        ignore_lease: true,
                        ..Default::default()
                    })],
                    failure: Vec::new(),
                },
            )
            .await?;
        if !t.succeeded {
            return Err(ApiError::Unknown(ERR_NOT_LEADER.into()));
        }
        Ok(t.header.revision)
    }

    /// v3election `Resign`: deletes the key if it is still the one created at `rev`.
    pub async fn resign(&self, who: &Caller, key: &[u8], rev: i64) -> Result<i64, ApiError> {
        Ok(self.txn(who, resign_txn(key, rev)).await?.header.revision)
    }

    /// v3election `Leader`: the first-created key under the election's prefix.
    pub async fn leader(&self, who: &Caller, name: &[u8]) -> Result<(i64, KeyValue), ApiError> {
        let r = self.range(who, first_created(&prefix_of(name))).await?;
        let revision = r.header.revision;
        let kv = r
            .kvs
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::Unknown(ERR_NO_LEADER.into()))?;
        Ok((revision, kv))
    }

    /// Waits for the first put under `prefix` at or after `revision` (Observe with no
    /// leader); `None` if the watch was lost.
    pub async fn wait_put(
        &self,
        prefix: &[u8],
        revision: i64,
    ) -> Result<Option<KeyValue>, ApiError> {
        let req = WatchCreateRequest {
            key: prefix.to_vec(),
            range_end: prefix_end(prefix),
            start_revision: revision,
            filters: vec![WatchFilter::NoDelete],
            ..Default::default()
        };
        let Some((mut watch, mut events)) = self.internal_watch(&req) else {
            return Ok(None);
        };
        loop {
            if let Some(ev) = events.into_iter().find(|e| e.kind == EventKind::Put) {
                return Ok(Some(ev.kv));
            }
            match self.until_shutdown(watch.next()).await? {
                Some(more) => events = more,
                None => return Ok(None),
            }
        }
    }
}

fn resign_txn(key: &[u8], rev: i64) -> TxnRequest {
    TxnRequest {
        compare: vec![created_at(key, rev)],
        success: vec![RequestOp::DeleteRange(DeleteRangeRequest {
            key: key.to_vec(),
            ..Default::default()
        })],
        failure: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_as_go_formats_them() {
        assert_eq!(
            contender_key(b"l/", 0x694d_77aa_9e6b_0c3a),
            b"l/694d77aa9e6b0c3a".to_vec()
        );
        assert_eq!(contender_key(b"l/", -31), b"l/-1f".to_vec());
        assert_eq!(prefix_of(b"lock"), b"lock/".to_vec());
    }
}
