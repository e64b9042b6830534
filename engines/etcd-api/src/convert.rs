//! Conversions between etcd's protobuf messages (etcd-client's generated types) and the
//! kv state machine's types.
//!
//! Both sides are foreign to this crate, so these are plain functions rather than `From`
//! impls (the orphan rule). Requests are checked on the way in (an enum value etcd does not
//! define is an `InvalidArgument`); responses get their headers stamped on the way out.

use coordbench_kv as kv;
use etcd_client::proto::{
    PbCompactionRequest, PbCompare, PbCompareTarget, PbDeleteRequest, PbDeleteResponse, PbEvent,
    PbKeyValue, PbPutRequest, PbPutResponse, PbRangeRequest, PbRangeResponse, PbResponseHeader,
    PbResponseOp, PbTargetUnion, PbTxnOpRequest, PbTxnOpResponse, PbTxnRequest, PbTxnRequestOp,
    PbTxnResponse, PbWatchRequestUnion,
};
use etcd_client::{CompareOp, SortOrder, SortTarget};

use crate::error::ApiError;

/// What a member adds to every response header besides the revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub cluster_id: u64,
    pub member_id: u64,
    pub raft_term: u64,
}

impl Stamp {
    pub fn header(&self, revision: i64) -> PbResponseHeader {
        PbResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.member_id,
            revision,
            raft_term: self.raft_term,
        }
    }

    fn of(&self, h: &kv::ResponseHeader) -> Option<PbResponseHeader> {
        Some(self.header(h.revision))
    }
}

// ---- requests: protobuf -> kv ----

/// A Range whose sort options [`crate::check::range`] accepted.
pub fn range_request(r: PbRangeRequest) -> kv::RangeRequest {
    let sort_order = match SortOrder::try_from(r.sort_order) {
        Ok(SortOrder::Ascend) => kv::SortOrder::Ascend,
        Ok(SortOrder::Descend) => kv::SortOrder::Descend,
        Ok(SortOrder::None) | Err(_) => kv::SortOrder::None,
    };
    let sort_target = match SortTarget::try_from(r.sort_target) {
        Ok(SortTarget::Version) => kv::SortTarget::Version,
        Ok(SortTarget::Create) => kv::SortTarget::Create,
        Ok(SortTarget::Mod) => kv::SortTarget::Mod,
        Ok(SortTarget::Value) => kv::SortTarget::Value,
        Ok(SortTarget::Key) | Err(_) => kv::SortTarget::Key,
    };
    kv::RangeRequest {
        key: r.key,
        range_end: r.range_end,
        limit: r.limit,
        revision: r.revision,
        sort_order,
        sort_target,
        serializable: r.serializable,
        keys_only: r.keys_only,
        count_only: r.count_only,
        min_mod_revision: r.min_mod_revision,
        max_mod_revision: r.max_mod_revision,
        min_create_revision: r.min_create_revision,
        max_create_revision: r.max_create_revision,
    }
}

pub fn put_request(r: PbPutRequest) -> kv::PutRequest {
    kv::PutRequest {
        key: r.key,
        value: r.value,
        lease: r.lease,
        prev_kv: r.prev_kv,
        ignore_value: r.ignore_value,
        ignore_lease: r.ignore_lease,
    }
}

pub fn delete_request(r: PbDeleteRequest) -> kv::DeleteRangeRequest {
    kv::DeleteRangeRequest {
        key: r.key,
        range_end: r.range_end,
        prev_kv: r.prev_kv,
    }
}

pub fn compaction_request(r: PbCompactionRequest) -> kv::CompactionRequest {
    kv::CompactionRequest {
        revision: r.revision,
        physical: r.physical,
    }
}

/// A txn that [`crate::check::txn`] accepted (an op with no request inside is still
/// refused here, as etcd's "key not found").
pub fn txn_request(r: PbTxnRequest) -> Result<kv::TxnRequest, ApiError> {
    Ok(kv::TxnRequest {
        compare: r.compare.into_iter().map(compare).collect(),
        success: r
            .success
            .into_iter()
            .map(request_op)
            .collect::<Result<_, _>>()?,
        failure: r
            .failure
            .into_iter()
            .map(request_op)
            .collect::<Result<_, _>>()?,
    })
}

/// A compare's operand comes from `target_union`; when it is missing (or of another
/// target's type), etcd compares with the zero value of the `target`'s type. Results and
/// targets etcd does not define are kept as such: etcd compares them too (see
/// [`kv::CompareResult::Unknown`], [`kv::CompareTarget::Unknown`]).
fn compare(c: PbCompare) -> kv::Compare {
    let result = match CompareOp::try_from(c.result) {
        Ok(CompareOp::Equal) => kv::CompareResult::Equal,
        Ok(CompareOp::Greater) => kv::CompareResult::Greater,
        Ok(CompareOp::Less) => kv::CompareResult::Less,
        Ok(CompareOp::NotEqual) => kv::CompareResult::NotEqual,
        Err(_) => kv::CompareResult::Unknown,
    };
    let u = c.target_union;
    let target = match PbCompareTarget::try_from(c.target) {
        Ok(PbCompareTarget::Version) => kv::CompareTarget::Version(match u {
            Some(PbTargetUnion::Version(v)) => v,
            _ => 0,
        }),
        Ok(PbCompareTarget::Create) => kv::CompareTarget::Create(match u {
            Some(PbTargetUnion::CreateRevision(v)) => v,
            _ => 0,
        }),
        Ok(PbCompareTarget::Mod) => kv::CompareTarget::Mod(match u {
            Some(PbTargetUnion::ModRevision(v)) => v,
            _ => 0,
        }),
        Ok(PbCompareTarget::Value) => kv::CompareTarget::Value(match u {
            Some(PbTargetUnion::Value(v)) => v,
            _ => Vec::new(),
        }),
        Ok(PbCompareTarget::Lease) => kv::CompareTarget::Lease(match u {
            Some(PbTargetUnion::Lease(v)) => v,
            _ => 0,
        }),
        Err(_) => kv::CompareTarget::Unknown,
    };
    kv::Compare {
        result,
        target,
        key: c.key,
        range_end: c.range_end,
    }
}

/// An op with no request inside: etcd answers "key not found" (its `checkRequestOp`).
fn request_op(op: PbTxnRequestOp) -> Result<kv::RequestOp, ApiError> {
    Ok(match op.request {
        Some(PbTxnOpRequest::RequestRange(r)) => kv::RequestOp::Range(range_request(r)),
        Some(PbTxnOpRequest::RequestPut(p)) => kv::RequestOp::Put(put_request(p)),
        Some(PbTxnOpRequest::RequestDeleteRange(d)) => {
            kv::RequestOp::DeleteRange(delete_request(d))
        }
        Some(PbTxnOpRequest::RequestTxn(t)) => kv::RequestOp::Txn(txn_request(t)?),
        None => return Err(ApiError::Kv(kv::KvError::KeyNotFound)),
    })
}

/// One message of a watch stream, with the protobuf types left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchRequest {
    Create(kv::WatchCreateRequest),
    Cancel { watch_id: i64 },
    Progress,
}

/// etcd's `WatchCreateRequest.FilterType` values.
const FILTER_NOPUT: i32 = 0;
const FILTER_NODELETE: i32 = 1;

/// Converts a watch request; `None` for an empty one (etcd ignores it too). An empty key
/// becomes `"\0"`, the smallest key, as in etcd's watch server.
pub fn watch_request(u: Option<PbWatchRequestUnion>) -> Option<WatchRequest> {
    Some(match u? {
        PbWatchRequestUnion::CreateRequest(c) => WatchRequest::Create(kv::WatchCreateRequest {
            key: if c.key.is_empty() { vec![0] } else { c.key },
            range_end: c.range_end,
            start_revision: c.start_revision,
            progress_notify: c.progress_notify,
            filters: c
                .filters
                .iter()
                .filter_map(|f| match *f {
                    FILTER_NOPUT => Some(kv::WatchFilter::NoPut),
                    FILTER_NODELETE => Some(kv::WatchFilter::NoDelete),
                    _ => None,
                })
                .collect(),
            prev_kv: c.prev_kv,
            watch_id: c.watch_id,
        }),
        PbWatchRequestUnion::CancelRequest(c) => WatchRequest::Cancel {
            watch_id: c.watch_id,
        },
        PbWatchRequestUnion::ProgressRequest(_) => WatchRequest::Progress,
    })
}

// ---- responses: kv -> protobuf ----

pub fn key_value(kv: kv::KeyValue) -> PbKeyValue {
    PbKeyValue {
        key: kv.key,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        value: kv.value,
        lease: kv.lease,
    }
}

/// etcd's `mvccpb.Event.EventType` values.
const EVENT_PUT: i32 = 0;
const EVENT_DELETE: i32 = 1;

pub fn event(e: kv::Event) -> PbEvent {
    PbEvent {
        r#type: match e.kind {
            kv::EventKind::Put => EVENT_PUT,
            kv::EventKind::Delete => EVENT_DELETE,
        },
        kv: Some(key_value(e.kv)),
        prev_kv: e.prev_kv.map(key_value),
    }
}

pub fn range_response(r: kv::RangeResponse, s: &Stamp) -> PbRangeResponse {
    let header = s.of(&r.header);
    range_with(r, header)
}

fn range_with(r: kv::RangeResponse, header: Option<PbResponseHeader>) -> PbRangeResponse {
    PbRangeResponse {
        header,
        kvs: r.kvs.into_iter().map(key_value).collect(),
        more: r.more,
        count: r.count,
    }
}

pub fn put_response(r: kv::PutResponse, s: &Stamp) -> PbPutResponse {
    let header = s.of(&r.header);
    put_with(r, header)
}

fn put_with(r: kv::PutResponse, header: Option<PbResponseHeader>) -> PbPutResponse {
    PbPutResponse {
        header,
        prev_kv: r.prev_kv.map(key_value),
    }
}

pub fn delete_response(r: kv::DeleteRangeResponse, s: &Stamp) -> PbDeleteResponse {
    let header = s.of(&r.header);
    delete_with(r, header)
}

fn delete_with(r: kv::DeleteRangeResponse, header: Option<PbResponseHeader>) -> PbDeleteResponse {
    PbDeleteResponse {
        header,
        deleted: r.deleted,
        prev_kvs: r.prev_kvs.into_iter().map(key_value).collect(),
    }
}

pub fn txn_response(r: kv::TxnResponse, s: &Stamp) -> PbTxnResponse {
    let header = s.of(&r.header);
    txn_with(r, header)
}

/// The header of a response inside a txn: etcd sets its revision only (its member fills
/// in the ids of the txn's own header alone).
fn bare(h: &kv::ResponseHeader) -> Option<PbResponseHeader> {
    Some(PbResponseHeader {
        revision: h.revision,
        ..Default::default()
    })
}

fn txn_with(r: kv::TxnResponse, header: Option<PbResponseHeader>) -> PbTxnResponse {
    PbTxnResponse {
        header,
        succeeded: r.succeeded,
        responses: r
            .responses
            .into_iter()
            .map(|op| PbResponseOp {
                response: Some(match op {
                    kv::ResponseOp::Range(r) => {
                        let h = bare(&r.header);
                        PbTxnOpResponse::ResponseRange(range_with(r, h))
                    }
                    kv::ResponseOp::Put(r) => {
                        let h = bare(&r.header);
                        PbTxnOpResponse::ResponsePut(put_with(r, h))
                    }
                    kv::ResponseOp::DeleteRange(r) => {
                        let h = bare(&r.header);
                        PbTxnOpResponse::ResponseDeleteRange(delete_with(r, h))
                    }
                    kv::ResponseOp::Txn(r) => {
                        let h = bare(&r.header);
                        PbTxnOpResponse::ResponseTxn(txn_with(r, h))
                    }
                }),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_without_operand_uses_zero_value() {
        let c = compare(PbCompare {
            result: CompareOp::Greater as i32,
            target: PbCompareTarget::Mod as i32,
            key: b"k".to_vec(),
            range_end: Vec::new(),
            target_union: None,
        });
        assert_eq!(c.target, kv::CompareTarget::Mod(0));
        assert_eq!(c.result, kv::CompareResult::Greater);
        let c = compare(PbCompare {
            result: 9,
            target: 7,
            ..Default::default()
        });
        assert_eq!(
            (c.result, c.target),
            (kv::CompareResult::Unknown, kv::CompareTarget::Unknown)
        );
    }

    #[test]
    fn range_enums_converted() {
        let r = range_request(PbRangeRequest {
            key: b"a".to_vec(),
            sort_order: SortOrder::Descend as i32,
            sort_target: SortTarget::Create as i32,
            ..Default::default()
        });
        assert_eq!(
            (r.sort_order, r.sort_target),
            (kv::SortOrder::Descend, kv::SortTarget::Create)
        );
    }

    #[test]
    fn empty_txn_op_is_refused() {
        let t = PbTxnRequest {
            success: vec![PbTxnRequestOp { request: None }],
            ..Default::default()
        };
        assert!(matches!(
            txn_request(t),
            Err(ApiError::Kv(kv::KvError::KeyNotFound))
        ));
    }
}
