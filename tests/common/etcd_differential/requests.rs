//! A run's steps as etcd's protobuf requests: the run's names (keys, revisions, lease ids)
//! turned into what the server is sent.

use etcd_client::proto::{
    PbCompare, PbDeleteRequest, PbPutRequest, PbRangeRequest, PbTargetUnion, PbTxnOpRequest,
    PbTxnRequest, PbTxnRequestOp,
};

use super::normalise::Names;
use super::steps::{Compare, Delete, Put, Range, Target, Txn, TxnOp, Watch};
use super::wire::WatchCreateRequest;

/// etcd's CompareTarget values.
const VERSION: i32 = 0;
const CREATE: i32 = 1;
const MOD: i32 = 2;
const VALUE: i32 = 3;
const LEASE: i32 = 4;

impl Names {
    pub fn put_request(&self, p: &Put) -> PbPutRequest {
        PbPutRequest {
            key: self.key(p.key),
            value: p.value.clone().into_bytes(),
            lease: self.lease(p.lease),
            prev_kv: p.prev_kv,
            ignore_value: p.ignore_value,
            ignore_lease: p.ignore_lease,
        }
    }

    pub fn range_request(&self, r: &Range) -> PbRangeRequest {
        PbRangeRequest {
            key: self.key(r.keys.key),
            range_end: self.range_end(&r.keys),
            limit: r.limit,
            revision: self.rev(r.revision),
            sort_order: r.sort_order,
            sort_target: r.sort_target,
            serializable: r.serializable,
            keys_only: r.keys_only,
            count_only: r.count_only,
            min_mod_revision: self.rev(r.min_mod),
            max_mod_revision: self.rev(r.max_mod),
            min_create_revision: self.rev(r.min_create),
            max_create_revision: self.rev(r.max_create),
        }
    }

    pub fn delete_request(&self, d: &Delete) -> PbDeleteRequest {
        PbDeleteRequest {
            key: self.key(d.keys.key),
            range_end: self.range_end(&d.keys),
            prev_kv: d.prev_kv,
        }
    }

    pub fn txn_request(&self, t: &Txn) -> PbTxnRequest {
        let ops = |ops: &[TxnOp]| ops.iter().map(|op| self.txn_op(op)).collect();
        PbTxnRequest {
            compare: t.compare.iter().map(|c| self.compare(c)).collect(),
            success: ops(&t.success),
            failure: ops(&t.failure),
        }
    }

    fn txn_op(&self, op: &TxnOp) -> PbTxnRequestOp {
        let request = match op {
            TxnOp::Range(r) => Some(PbTxnOpRequest::RequestRange(self.range_request(r))),
            TxnOp::Put(p) => Some(PbTxnOpRequest::RequestPut(self.put_request(p))),
            TxnOp::Delete(d) => Some(PbTxnOpRequest::RequestDeleteRange(self.delete_request(d))),
            TxnOp::Txn(t) => Some(PbTxnOpRequest::RequestTxn(self.txn_request(t))),
            TxnOp::Empty => None,
        };
        PbTxnRequestOp { request }
    }

    fn compare(&self, c: &Compare) -> PbCompare {
        let (target, operand) = match &c.target {
            Target::Version(v) => (VERSION, Some(PbTargetUnion::Version(*v))),
            Target::Create(r) => (CREATE, Some(PbTargetUnion::CreateRevision(self.rev(*r)))),
            Target::Mod(r) => (MOD, Some(PbTargetUnion::ModRevision(self.rev(*r)))),
            Target::Value(v) => (VALUE, Some(PbTargetUnion::Value(v.clone().into_bytes()))),
            Target::Lease(l) => (LEASE, Some(PbTargetUnion::Lease(self.lease(*l)))),
            Target::Unset(t) => (*t, None),
        };
        PbCompare {
            result: c.result,
            target,
            key: self.key(c.keys.key),
            range_end: self.range_end(&c.keys),
            target_union: operand,
        }
    }

    pub fn watch_request(&self, w: &Watch) -> WatchCreateRequest {
        WatchCreateRequest {
            key: self.key(w.keys.key),
            range_end: self.range_end(&w.keys),
            start_revision: self.rev(w.start),
            progress_notify: w.progress_notify,
            filters: w.filters.clone(),
            prev_kv: w.prev_kv,
            watch_id: w.watch_id,
            fragment: w.fragment,
        }
    }
}
