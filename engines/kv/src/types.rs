//! Request, response and record types mirroring etcd's v3 protobuf messages.
//!
//! Field names and integer widths follow `etcdserverpb` / `mvccpb` so that a
//! gRPC layer converts both ways with plain `From` impls. Where protobuf uses
//! an `i32` enum plus a `oneof`, this crate uses one Rust enum (see
//! [`CompareTarget`]); the conversion fills the zero value etcd would use.

use serde::{Deserialize, Serialize};

/// etcd's `mvccpb.KeyValue`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyValue {
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// Revision of the put that created the key (reset by a delete).
    pub create_revision: i64,
    /// Revision of the last write to the key.
    pub mod_revision: i64,
    /// Number of puts since the key was (re)created; 1 after creation.
    pub version: i64,
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    /// Attached lease id, 0 for none.
    pub lease: i64,
}

/// etcd's `ResponseHeader`. This crate fills `revision`; the runtime fills
/// the cluster, member and Raft term it knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseHeader {
    pub cluster_id: u64,
    pub member_id: u64,
    /// Store revision when the request was served.
    pub revision: i64,
    pub raft_term: u64,
}

impl ResponseHeader {
    pub fn at(revision: i64) -> Self {
        ResponseHeader {
            revision,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortOrder {
    #[default]
    None,
    Ascend,
    Descend,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortTarget {
    #[default]
    Key,
    Version,
    Create,
    Mod,
    Value,
}

/// etcd's `RangeRequest`. `range_end` follows etcd's conventions: empty =
/// the single `key`; `[0]` = every key `>= key`; otherwise `[key, range_end)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeRequest {
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub range_end: Vec<u8>,
    /// At most this many kvs; `<= 0` = no limit.
    pub limit: i64,
    /// Read at this revision; `<= 0` = current.
    pub revision: i64,
    pub sort_order: SortOrder,
    pub sort_target: SortTarget,
    /// Carried for the runtime (local vs ReadIndex read); ignored here.
    pub serializable: bool,
    pub keys_only: bool,
    pub count_only: bool,
    pub min_mod_revision: i64,
    pub max_mod_revision: i64,
    pub min_create_revision: i64,
    pub max_create_revision: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeResponse {
    pub header: ResponseHeader,
    pub kvs: Vec<KeyValue>,
    /// More kvs matched than `limit` allowed.
    pub more: bool,
    /// Number of keys in the range at that revision (before the
    /// mod/create-revision filters and the limit, as etcd counts).
    pub count: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutRequest {
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    pub lease: i64,
    pub prev_kv: bool,
    pub ignore_value: bool,
    pub ignore_lease: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutResponse {
    pub header: ResponseHeader,
    pub prev_kv: Option<KeyValue>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRangeRequest {
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub range_end: Vec<u8>,
    pub prev_kv: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRangeResponse {
    pub header: ResponseHeader,
    pub deleted: i64,
    pub prev_kvs: Vec<KeyValue>,
}

/// etcd's `Compare.CompareResult`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareResult {
    #[default]
    Equal,
    Greater,
    Less,
    NotEqual,
    /// A value etcd does not define: etcd's `compareKV` holds for it, whatever it compares.
    Unknown,
}

/// etcd's `Compare.target` together with its `target_union` operand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareTarget {
    Version(i64),
    Create(i64),
    Mod(i64),
    Value(#[serde(with = "serde_bytes")] Vec<u8>),
    Lease(i64),
    /// A target etcd does not define: etcd's `compareKV` finds every key equal to it.
    Unknown,
}

/// etcd's `Compare`: `key`/`range_end` select keys as in a Range; the
/// compare holds when it holds for every selected key (see `compare.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    pub result: CompareResult,
    pub target: CompareTarget,
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub range_end: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestOp {
    Range(RangeRequest),
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseOp {
    Range(RangeResponse),
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRequest {
    pub compare: Vec<Compare>,
    pub success: Vec<RequestOp>,
    pub failure: Vec<RequestOp>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnResponse {
    pub header: ResponseHeader,
    pub succeeded: bool,
    pub responses: Vec<ResponseOp>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionRequest {
    pub revision: i64,
    /// Carried for compatibility; compaction here is always immediate.
    pub physical: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionResponse {
    pub header: ResponseHeader,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGrantResponse {
    pub header: ResponseHeader,
    pub id: i64,
    /// Granted TTL in seconds (after clamping to the minimum).
    pub ttl: i64,
    pub error: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRevokeResponse {
    pub header: ResponseHeader,
}

/// Answer to a keep-alive (`Command::LeaseRenew` of older builds' logs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseKeepAliveResponse {
    pub header: ResponseHeader,
    pub id: i64,
    /// The lease's granted TTL in seconds, as etcd answers a keep-alive.
    pub ttl: i64,
}

/// One lease's remaining TTL as the leader checkpoints it (`Command::LeaseCheckpoint`);
/// etcd's `LeaseCheckpoint` counts whole seconds, this milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseCheckpoint {
    pub id: i64,
    /// 0 clears the lease's checkpoint.
    pub remaining_ms: u64,
}

/// Answer to `Command::LeaseExpire` (no etcd counterpart: expiry is internal there).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseExpireResponse {
    pub header: ResponseHeader,
    /// The leases actually revoked, in the order given.
    pub expired: Vec<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseTimeToLiveRequest {
    pub id: i64,
    /// Also list the keys attached to the lease.
    pub keys: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseTimeToLiveResponse {
    pub header: ResponseHeader,
    pub id: i64,
    /// Remaining seconds; -1 when the lease does not exist (as etcd answers).
    pub ttl: i64,
    pub granted_ttl: i64,
    pub keys: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseStatus {
    pub id: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseLeasesResponse {
    pub header: ResponseHeader,
    pub leases: Vec<LeaseStatus>,
}

/// etcd's `mvccpb.Event.EventType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    Put,
    Delete,
}

/// etcd's `mvccpb.Event`. The event's revision is `kv.mod_revision`; a
/// delete's `kv` carries only the key and that revision, as in etcd.
/// `prev_kv` is always filled here; a watch hub strips it for watchers that
/// did not ask for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    pub kv: KeyValue,
    pub prev_kv: Option<KeyValue>,
}

impl Event {
    /// The revision at which this event happened.
    pub fn revision(&self) -> i64 {
        self.kv.mod_revision
    }
}
