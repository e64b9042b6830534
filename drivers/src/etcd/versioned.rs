//! Versioned reads and compare-and-set over the etcd v3 API, for the register workload: the
//! version is the key's mod revision, and a compare-and-set is one Txn that puts if the mod
//! revision is unchanged and otherwise reads the key, so a rejection reports what it saw.

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};

use super::map_error;
use super::session::EtcdSession;
use crate::{CasOutcome, Consistency, DriverError, Versioned};

pub(super) async fn read(
    s: &mut EtcdSession,
    key: &str,
    consistency: Consistency,
) -> Result<Option<Versioned>, DriverError> {
    let options = match consistency {
        Consistency::Linearizable | Consistency::Sync => None,
        Consistency::Serializable => Some(GetOptions::new().with_serializable()),
    };
    s.counters.request();
    let mut resp = s.kv.get(key, options).await.map_err(map_error)?;
    Ok(resp.take_kvs().into_iter().next().map(|kv| Versioned {
        version: kv.mod_revision(),
        value: kv.value().to_vec(),
    }))
}

pub(super) async fn compare_and_set(
    s: &mut EtcdSession,
    key: &str,
    expected: i64,
    new: &[u8],
) -> Result<CasOutcome, DriverError> {
    let txn = Txn::new()
        .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
        .and_then([TxnOp::put(key, new, None)])
        .or_else([TxnOp::get(key, None)]);
    s.counters.request();
    let resp = s.kv.txn(txn).await.map_err(map_error)?;
    if resp.succeeded() {
        return Ok(CasOutcome::Applied);
    }
    let current = resp.op_responses().into_iter().find_map(|r| match r {
        TxnOpResponse::Get(mut get) => Some(
            get.take_kvs()
                .into_iter()
                .next()
                .map(|kv| kv.value().to_vec()),
        ),
        _ => None,
    });
    Ok(CasOutcome::Rejected { current })
}
