//! The checks etcd's gRPC layer makes on a KV request before it reaches the state machine
//! (its v3rpc `checkRangeRequest`, `checkPutRequest`, `checkDeleteRequest`,
//! `checkTxnRequest`), in etcd's order, so that a request with several faults is refused
//! for the same one: in a txn, too many ops first, then the compares' keys, then each op
//! of the success and then the failure branch; a nested txn may hold only the ops its
//! parent leaves under the limit. The state machine repeats what it needs on apply (see
//! `coordbench_kv::txn`).

use coordbench_kv::txn::MAX_TXN_OPS;
use coordbench_kv::KvError;
use etcd_client::proto::{
    PbDeleteRequest, PbPutRequest, PbRangeRequest, PbTxnOpRequest, PbTxnRequest, PbTxnRequestOp,
};
use etcd_client::{SortOrder, SortTarget};

use crate::error::ApiError;

fn invalid_sort() -> ApiError {
    ApiError::InvalidArgument("etcdserver: invalid sort option".into())
}

pub fn range(r: &PbRangeRequest) -> Result<(), ApiError> {
    if r.key.is_empty() {
        return Err(KvError::EmptyKey.into());
    }
    SortOrder::try_from(r.sort_order).map_err(|_| invalid_sort())?;
    SortTarget::try_from(r.sort_target).map_err(|_| invalid_sort())?;
    Ok(())
}

pub fn put(r: &PbPutRequest) -> Result<(), ApiError> {
    if r.key.is_empty() {
        return Err(KvError::EmptyKey.into());
    }
    if r.ignore_value && !r.value.is_empty() {
        return Err(KvError::ValueProvided.into());
    }
    if r.ignore_lease && r.lease != 0 {
        return Err(KvError::LeaseProvided.into());
    }
    Ok(())
}

pub fn delete(r: &PbDeleteRequest) -> Result<(), ApiError> {
    if r.key.is_empty() {
        return Err(KvError::EmptyKey.into());
    }
    Ok(())
}

/// A top-level txn, with etcd's default `--max-txn-ops`.
pub fn txn(r: &PbTxnRequest) -> Result<(), ApiError> {
    txn_within(r, MAX_TXN_OPS)
}

fn txn_within(r: &PbTxnRequest, max_ops: usize) -> Result<(), ApiError> {
    let ops = r.compare.len().max(r.success.len()).max(r.failure.len());
    if ops > max_ops {
        return Err(KvError::TooManyOps.into());
    }
    if r.compare.iter().any(|c| c.key.is_empty()) {
        return Err(KvError::EmptyKey.into());
    }
    for op in r.success.iter().chain(&r.failure) {
        request_op(op, max_ops - ops)?;
    }
    Ok(())
}

/// An op with no request inside is etcd's "key not found".
fn request_op(op: &PbTxnRequestOp, max_ops: usize) -> Result<(), ApiError> {
    match &op.request {
        Some(PbTxnOpRequest::RequestRange(r)) => range(r),
        Some(PbTxnOpRequest::RequestPut(p)) => put(p),
        Some(PbTxnOpRequest::RequestDeleteRange(d)) => delete(d),
        Some(PbTxnOpRequest::RequestTxn(t)) => txn_within(t, max_ops),
        None => Err(KvError::KeyNotFound.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_client::proto::PbCompare;

    fn put_op(key: &[u8]) -> PbTxnRequestOp {
        PbTxnRequestOp {
            request: Some(PbTxnOpRequest::RequestPut(PbPutRequest {
                key: key.to_vec(),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn faults_are_reported_in_etcds_order() {
        let r = PbRangeRequest {
            sort_order: 9,
            ..Default::default()
        };
        assert!(matches!(range(&r), Err(ApiError::Kv(KvError::EmptyKey))));
        let r = PbRangeRequest {
            key: b"k".to_vec(),
            sort_target: 9,
            ..Default::default()
        };
        assert_eq!(
            range(&r).unwrap_err().to_string(),
            "etcdserver: invalid sort option"
        );
        let t = PbTxnRequest {
            compare: vec![PbCompare::default()],
            success: vec![PbTxnRequestOp { request: None }],
            failure: vec![put_op(b""); MAX_TXN_OPS + 1],
        };
        assert!(matches!(txn(&t), Err(ApiError::Kv(KvError::TooManyOps))));
        let t = PbTxnRequest {
            failure: vec![put_op(b"")],
            ..t
        };
        assert!(matches!(txn(&t), Err(ApiError::Kv(KvError::EmptyKey))));
    }

    #[test]
    fn a_nested_txn_holds_what_its_parent_leaves() {
        let nested = |n: usize| PbTxnRequestOp {
            request: Some(PbTxnOpRequest::RequestTxn(PbTxnRequest {
                success: vec![put_op(b"k"); n],
                ..Default::default()
            })),
        };
        let outer = |n: usize| PbTxnRequest {
            success: vec![nested(n); 100],
            ..Default::default()
        };
        assert!(txn(&outer(MAX_TXN_OPS - 100)).is_ok());
        assert!(matches!(
            txn(&outer(MAX_TXN_OPS - 99)),
            Err(ApiError::Kv(KvError::TooManyOps))
        ));
    }
}
