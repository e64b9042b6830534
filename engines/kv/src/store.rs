//! [`KvStore`]: the state machine that ties key history, leases and txns
//! together. `apply` is the only mutation; the query methods serve local
//! (serializable) reads. No I/O, clock, threads or hash-ordered containers:
//! equal command sequences give equal states, responses and snapshots.
//! (A store made [`KvStore::with_value_dir`] keeps its values in a file: the only I/O,
//! behind the value log's seam.)

use crate::auth::AuthStore;
use crate::command::{Applied, Command, Response};
use crate::error::KvError;
use crate::key_range::KeyRange;
use crate::lease::{Lease, Lessor};
use crate::mvcc::{Mvcc, WriteCtx, LATEST};
use crate::range;
use crate::txn;
use crate::types::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, Event,
    LeaseExpireResponse, LeaseGrantResponse, LeaseKeepAliveResponse, LeaseLeasesResponse,
    LeaseRevokeResponse, LeaseStatus, LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, RequestOp, ResponseHeader, ResponseOp, TxnRequest,
    TxnResponse,
};

/// etcd's key-value data model as a deterministic state machine.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KvStore {
    pub(crate) mvcc: Mvcc,
    pub(crate) lessor: Lessor,
    /// Users, roles, permissions and whether auth is enabled.
    pub(crate) auth: AuthStore,
    /// Log index of the last applied command (etcd's consistent index).
    pub(crate) applied_index: u64,
}

impl KvStore {
    /// An empty store at revision 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose values live in an append-only file under `dir` (a member's
    /// `<data-dir>/values`), read back with pread instead of kept in memory.
    pub fn with_value_dir(dir: &std::path::Path) -> std::io::Result<Self> {
        Ok(KvStore {
            mvcc: Mvcc::with_values(crate::values::ValueLog::open_dir(dir)?),
            ..Self::default()
        })
    }

    /// The first I/O error of the value log, if any: the store can no longer be trusted
    /// and its member must stop.
    pub fn failure(&self) -> Option<&str> {
        self.mvcc.values.failure()
    }

    /// Current store revision (1 before the first write).
    pub fn revision(&self) -> i64 {
        self.mvcc.revision
    }

    /// Oldest readable revision; 0 before any compaction.
    pub fn compact_revision(&self) -> i64 {
        self.mvcc.compact_revision
    }

    /// Log index of the last applied command; 0 for a new store.
    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    /// A header with the current revision.
    pub fn header(&self) -> ResponseHeader {
        ResponseHeader::at(self.mvcc.revision)
    }

    /// Applies the command at log `index`. Indexes must increase (gaps are
    /// fine: not every log entry carries a command); an index already
    /// applied changes nothing and yields [`KvError::AlreadyApplied`].
    pub fn apply(&mut self, index: u64, cmd: &Command) -> Applied {
        if index <= self.applied_index {
            let err = KvError::AlreadyApplied {
                index,
                applied: self.applied_index,
            };
            return Applied {
                result: Err(err),
                events: Vec::new(),
                revision: self.mvcc.revision,
            };
        }
        self.applied_index = index;
        let mut events = Vec::new();
        let (caller, cmd) = match cmd {
            Command::As { caller, command } => (Some(caller), command.as_ref()),
            cmd => (None, cmd),
        };
        let result = match self.permit_command(caller, cmd) {
            Err(e) => Err(e.into()),
            Ok(()) => self.execute(index, cmd, &mut events),
        };
        let revision = self.mvcc.revision;
        let result = result.map(|mut r| {
            r.header_mut().revision = revision;
            r
        });
        Applied {
            result,
            events,
            revision,
        }
    }

    /// Runs a command whose permissions were checked.
    fn execute(
        &mut self,
        index: u64,
        cmd: &Command,
        events: &mut Vec<Event>,
    ) -> Result<Response, KvError> {
        match cmd {
            Command::Put(p) => txn::validate_put(p)
                .and_then(|()| self.write(events, |s, w| s.exec_put(w, p)))
                .map(Response::Put),
            Command::DeleteRange(d) => txn::validate_delete(d)
                .and_then(|()| self.write(events, |s, w| s.exec_delete(w, d)))
                .map(Response::DeleteRange),
            Command::Txn(t) => self.apply_txn(t, events).map(Response::Txn),
            Command::Compact(c) => self.compact(c).map(Response::Compact),
            Command::LeaseGrant { id, ttl, .. } => {
                // A free id derived from the log index: the same on every replica.
                let id = if *id == 0 {
                    self.lessor
                        .free_id(i64::try_from(index).unwrap_or(i64::MAX))
                } else {
                    *id
                };
                self.lessor.grant(id, *ttl).map(|l| {
                    Response::LeaseGrant(LeaseGrantResponse {
                        id: l.id,
                        ttl: l.ttl,
                        ..Default::default()
                    })
                })
            }
            Command::LeaseRevoke { id } => self
                .revoke(*id, events)
                .map(|()| Response::LeaseRevoke(LeaseRevokeResponse::default())),
            Command::LeaseRenew { id, .. } => self.lessor.checkpoint(*id, 0).map(|l| {
                Response::LeaseRenew(LeaseKeepAliveResponse {
                    id: l.id,
                    ttl: l.ttl,
                    ..Default::default()
                })
            }),
            Command::LeaseRenewAll { .. } => Ok(Response::LeaseRenewAll(ResponseHeader::default())),
            Command::LeaseExpire { ids, .. } => {
                let expired = ids
                    .iter()
                    .copied()
                    .filter(|&id| self.revoke(id, events).is_ok())
                    .collect();
                Ok(Response::LeaseExpire(LeaseExpireResponse {
                    expired,
                    ..Default::default()
                }))
            }
            Command::LeaseCheckpoint { checkpoints } => {
                for c in checkpoints {
                    // A lease revoked meanwhile has nothing left to checkpoint.
                    let _ = self.lessor.checkpoint(c.id, c.remaining_ms);
                }
                Ok(Response::LeaseCheckpoint(ResponseHeader::default()))
            }
            Command::Auth(a) => {
                let token = self.auth.apply(index, a)?;
                Ok(Response::Auth {
                    header: ResponseHeader::default(),
                    token,
                })
            }
            Command::As { .. } => Err(KvError::NestedCaller),
        }
    }

    /// The auth state: users, roles, whether auth is on.
    pub fn auth(&self) -> &AuthStore {
        &self.auth
    }

    /// Serves a Range locally (a serializable read; for a linearizable one
    /// the runtime first waits for a ReadIndex to be applied).
    pub fn range(&self, req: &RangeRequest) -> Result<RangeResponse, KvError> {
        range::range(&self.mvcc, req)
    }

    /// Serves a txn without writes locally; [`KvError::NotReadOnly`] otherwise.
    pub fn txn_read_only(&self, req: &TxnRequest) -> Result<TxnResponse, KvError> {
        txn::validate_txn(req)?;
        if !txn::is_read_only(req) {
            return Err(KvError::NotReadOnly);
        }
        let mut resp = self.read_txn(req)?;
        resp.header.revision = self.mvcc.revision;
        Ok(resp)
    }

    /// Events at revisions `>= start_revision` on keys of `range`, for watch
    /// replay; `start_revision <= 0` gives none ("from now").
    pub fn events_since(
        &self,
        start_revision: i64,
        range: &KeyRange,
    ) -> Result<Vec<Event>, KvError> {
        self.mvcc.events_since(start_revision, range)
    }

    /// etcd's LeaseTimeToLive with `remaining_secs` as the leader counts them (see
    /// [`crate::lease_clock::LeaseClock`]); TTL -1 for a lease this store does not
    /// have, as etcd answers. Keys come in key order.
    pub fn lease_time_to_live(
        &self,
        req: &LeaseTimeToLiveRequest,
        remaining_secs: i64,
    ) -> LeaseTimeToLiveResponse {
        let header = self.header();
        let Some(lease) = self.lessor.get(req.id) else {
            return LeaseTimeToLiveResponse {
                header,
                id: req.id,
                ttl: -1,
                ..Default::default()
            };
        };
        let keys = match (req.keys, self.lessor.keys(req.id)) {
            (true, Some(keys)) => keys.iter().cloned().collect(),
            _ => Vec::new(),
        };
        LeaseTimeToLiveResponse {
            header,
            id: req.id,
            ttl: remaining_secs,
            granted_ttl: lease.ttl,
            keys,
        }
    }

    /// All leases, ascending by id.
    pub fn lease_leases(&self) -> LeaseLeasesResponse {
        LeaseLeasesResponse {
            header: self.header(),
            leases: self
                .lessor
                .leases()
                .map(|l| LeaseStatus { id: l.id })
                .collect(),
        }
    }

    pub fn lease(&self, id: i64) -> Option<Lease> {
        self.lessor.get(id).cloned()
    }

    /// Keys attached to a lease, in key order; `None` if it does not exist.
    pub fn lease_keys(&self, id: i64) -> Option<Vec<Vec<u8>>> {
        self.lessor.keys(id).map(|k| k.iter().cloned().collect())
    }

    /// Every lease, ascending by id.
    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.lessor.leases()
    }

    /// Runs `f` as one write: commit on success, roll back on error.
    fn write<T>(
        &mut self,
        events: &mut Vec<Event>,
        f: impl FnOnce(&mut Self, &mut WriteCtx) -> Result<T, KvError>,
    ) -> Result<T, KvError> {
        let mut w = self.mvcc.begin();
        match f(self, &mut w) {
            Ok(t) => {
                events.extend(self.mvcc.commit(w));
                Ok(t)
            }
            Err(e) => {
                self.rollback(&w);
                Err(e)
            }
        }
    }

    fn rollback(&mut self, w: &WriteCtx) {
        let mut keys = w.touched.clone();
        keys.sort();
        keys.dedup();
        for key in keys {
            let lease_of = |s: &Self| s.mvcc.get(&key, LATEST).map_or(0, |kv| kv.lease);
            let before = lease_of(self);
            self.mvcc.rollback_key(w, &key);
            let after = lease_of(self);
            if before != after {
                self.lessor.detach(before, &key);
                self.lessor.attach(after, &key);
            }
        }
    }

    fn exec_put(&mut self, w: &mut WriteCtx, p: &PutRequest) -> Result<PutResponse, KvError> {
        if p.value.len() > crate::MAX_VALUE_LEN {
            return Err(KvError::RequestTooLarge);
        }
        if p.lease != 0 && !self.lessor.contains(p.lease) {
            return Err(KvError::LeaseNotFound { id: p.lease });
        }
        let prev = self.mvcc.get(&p.key, LATEST);
        let (value, lease) = match &prev {
            None if p.ignore_value || p.ignore_lease => return Err(KvError::KeyNotFound),
            Some(prev) => (
                if p.ignore_value {
                    prev.value.clone()
                } else {
                    p.value.clone()
                },
                if p.ignore_lease { prev.lease } else { p.lease },
            ),
            None => (p.value.clone(), p.lease),
        };
        let (prev, _) = self.mvcc.put(w, &p.key, value, lease);
        let old_lease = prev.as_ref().map_or(0, |kv| kv.lease);
        if old_lease != lease {
            self.lessor.detach(old_lease, &p.key);
        }
        self.lessor.attach(lease, &p.key);
        Ok(PutResponse {
            header: ResponseHeader::default(),
            prev_kv: if p.prev_kv { prev } else { None },
        })
    }

    fn exec_delete(
        &mut self,
        w: &mut WriteCtx,
        d: &DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse, KvError> {
        let range = KeyRange::new(&d.key, &d.range_end);
        let doomed: Vec<_> = self.mvcc.range(&range, LATEST).collect();
        for kv in &doomed {
            self.mvcc.delete(w, &kv.key);
            self.lessor.detach(kv.lease, &kv.key);
        }
        Ok(DeleteRangeResponse {
            header: ResponseHeader::default(),
            deleted: i64::try_from(doomed.len()).unwrap_or(i64::MAX),
            prev_kvs: if d.prev_kv { doomed } else { Vec::new() },
        })
    }

    fn apply_txn(
        &mut self,
        t: &TxnRequest,
        events: &mut Vec<Event>,
    ) -> Result<TxnResponse, KvError> {
        txn::validate_txn(t)?;
        let mut path = Vec::new();
        txn::path(&self.mvcc, t, &mut path);
        let mut path = path.into_iter();
        self.write(events, |s, w| s.exec_txn(w, t, &mut path))
    }

    fn exec_txn(
        &mut self,
        w: &mut WriteCtx,
        t: &TxnRequest,
        path: &mut impl Iterator<Item = bool>,
    ) -> Result<TxnResponse, KvError> {
        let succeeded = path.next().unwrap_or(false);
        let ops = if succeeded { &t.success } else { &t.failure };
        let mut responses = Vec::with_capacity(ops.len());
        // As etcd's: an op's header has the revision the txn has reached when it runs (the
        // txn's own once it has written), a nested txn's none (0).
        let reached = |w: &WriteCtx| w.main - i64::from(w.sub == 0);
        for op in ops {
            responses.push(match op {
                RequestOp::Range(r) => {
                    let mut resp = range::range_in_txn(&self.mvcc, r)?;
                    resp.header.revision = reached(w);
                    ResponseOp::Range(resp)
                }
                RequestOp::Put(p) => {
                    let mut resp = self.exec_put(w, p)?;
                    resp.header.revision = w.main;
                    ResponseOp::Put(resp)
                }
                RequestOp::DeleteRange(d) => {
                    let mut resp = self.exec_delete(w, d)?;
                    resp.header.revision = reached(w);
                    ResponseOp::DeleteRange(resp)
                }
                RequestOp::Txn(nested) => ResponseOp::Txn(self.exec_txn(w, nested, path)?),
            });
        }
        Ok(TxnResponse {
            header: ResponseHeader::default(),
            succeeded,
            responses,
        })
    }

    fn read_txn(&self, t: &TxnRequest) -> Result<TxnResponse, KvError> {
        let succeeded = crate::compare::all_hold(&self.mvcc, &t.compare);
        let ops = if succeeded { &t.success } else { &t.failure };
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            responses.push(match op {
                RequestOp::Range(r) => ResponseOp::Range(range::range_in_txn(&self.mvcc, r)?),
                RequestOp::Txn(nested) => ResponseOp::Txn(self.read_txn(nested)?),
                RequestOp::Put(_) | RequestOp::DeleteRange(_) => return Err(KvError::NotReadOnly),
            });
        }
        Ok(TxnResponse {
            header: ResponseHeader::default(),
            succeeded,
            responses,
        })
    }

    fn compact(&mut self, c: &CompactionRequest) -> Result<CompactionResponse, KvError> {
        if c.revision <= self.mvcc.compact_revision {
            return Err(KvError::Compacted {
                compact_revision: self.mvcc.compact_revision,
            });
        }
        if c.revision > self.mvcc.revision {
            return Err(KvError::FutureRevision {
                current_revision: self.mvcc.revision,
            });
        }
        self.mvcc.compact(c.revision);
        Ok(CompactionResponse::default())
    }

    /// Deletes the lease's keys (in key order, at one revision) and the lease.
    fn revoke(&mut self, id: i64, events: &mut Vec<Event>) -> Result<(), KvError> {
        let keys = self
            .lessor
            .remove(id)
            .ok_or(KvError::LeaseNotFound { id })?;
        self.write(events, |s, w| {
            for key in &keys {
                s.mvcc.delete(w, key);
            }
            Ok(())
        })
    }

    /// Checks that lease attachments mirror the key space (tests only).
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut expected = std::collections::BTreeMap::<i64, Vec<Vec<u8>>>::new();
        for kv in self.mvcc.range(&KeyRange::all(), LATEST) {
            if kv.lease != 0 {
                if !self.lessor.contains(kv.lease) {
                    return Err(format!("key {:?} has unknown lease {}", kv.key, kv.lease));
                }
                expected.entry(kv.lease).or_default().push(kv.key);
            }
        }
        for lease in self.lessor.leases() {
            let have = self.lease_keys(lease.id).unwrap_or_default();
            if have != expected.remove(&lease.id).unwrap_or_default() {
                return Err(format!(
                    "lease {} keys {:?} do not match the key space",
                    lease.id, have
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Compare, CompareResult, CompareTarget, EventKind, LeaseCheckpoint};

    struct T {
        s: KvStore,
        index: u64,
    }

    impl T {
        fn new() -> Self {
            T {
                s: KvStore::new(),
                index: 0,
            }
        }
        fn apply(&mut self, cmd: Command) -> Applied {
            self.index += 1;
            let a = self.s.apply(self.index, &cmd);
            self.s.check_invariants().unwrap();
            a
        }
        fn put(&mut self, k: &[u8], v: &[u8], lease: i64) -> Result<Response, KvError> {
            self.apply(Command::Put(PutRequest {
                key: k.to_vec(),
                value: v.to_vec(),
                lease,
                prev_kv: true,
                ..Default::default()
            }))
            .result
        }
        fn get(&self, k: &[u8]) -> Option<crate::types::KeyValue> {
            self.s
                .range(&RangeRequest {
                    key: k.to_vec(),
                    ..Default::default()
                })
                .unwrap()
                .kvs
                .pop()
        }
    }

    fn put_op(k: &[u8], v: &[u8], lease: i64) -> RequestOp {
        RequestOp::Put(PutRequest {
            key: k.to_vec(),
            value: v.to_vec(),
            lease,
            ..Default::default()
        })
    }

    fn version_is(k: &[u8], v: i64) -> Compare {
        Compare {
            result: CompareResult::Equal,
            target: CompareTarget::Version(v),
            key: k.to_vec(),
            range_end: vec![],
        }
    }

    #[test]
    fn put_semantics() {
        let mut t = T::new();
        let Ok(Response::Put(r)) = t.put(b"a", b"1", 0) else {
            panic!()
        };
        assert_eq!((r.header.revision, r.prev_kv), (2, None));
        let Ok(Response::Put(r)) = t.put(b"a", b"2", 0) else {
            panic!()
        };
        assert_eq!(r.prev_kv.unwrap().value, b"1");
        assert_eq!(t.put(b"a", b"3", 9), Err(KvError::LeaseNotFound { id: 9 }));
        assert_eq!(t.s.revision(), 3, "failed puts do not bump the revision");
        let ignore = |k: &[u8]| {
            Command::Put(PutRequest {
                key: k.to_vec(),
                ignore_value: true,
                ..Default::default()
            })
        };
        assert_eq!(t.apply(ignore(b"nope")).result, Err(KvError::KeyNotFound));
        t.apply(Command::LeaseGrant {
            id: 1,
            ttl: 5,
            now_ms: 0,
        });
        t.apply(Command::Put(PutRequest {
            key: b"a".to_vec(),
            lease: 1,
            ignore_value: true,
            ..Default::default()
        }));
        let kv = t.get(b"a").unwrap();
        assert_eq!(
            (kv.value.as_slice(), kv.lease, kv.version),
            (b"2".as_slice(), 1, 3)
        );
        t.apply(Command::Put(PutRequest {
            key: b"a".to_vec(),
            value: b"4".to_vec(),
            ignore_lease: true,
            ..Default::default()
        }));
        assert_eq!(t.get(b"a").unwrap().lease, 1);
        let r = t.apply(Command::Put(PutRequest {
            key: vec![],
            ..Default::default()
        }));
        assert_eq!(r.result, Err(KvError::EmptyKey));
        // Moving a key off its lease detaches it.
        t.put(b"a", b"5", 0).unwrap();
        assert_eq!(t.s.lease_keys(1), Some(vec![]));
    }

    #[test]
    fn delete_range() {
        let mut t = T::new();
        for k in [b"a", b"b", b"c"] {
            t.put(k, b"v", 0).unwrap();
        }
        let a = t.apply(Command::DeleteRange(DeleteRangeRequest {
            key: b"a".to_vec(),
            range_end: b"c".to_vec(),
            prev_kv: true,
        }));
        let Ok(Response::DeleteRange(r)) = a.result else {
            panic!()
        };
        assert_eq!((r.deleted, r.prev_kvs.len(), r.header.revision), (2, 2, 5));
        assert!(a
            .events
            .iter()
            .all(|e| e.kind == EventKind::Delete && e.revision() == 5));
        let a = t.apply(Command::DeleteRange(DeleteRangeRequest {
            key: b"a".to_vec(),
            ..Default::default()
        }));
        let Ok(Response::DeleteRange(r)) = a.result else {
            panic!()
        };
        assert_eq!((r.deleted, r.header.revision, a.events.len()), (0, 5, 0));
    }

    #[test]
    fn txn_is_atomic_with_one_revision() {
        let mut t = T::new();
        t.put(b"a", b"1", 0).unwrap();
        let txn = TxnRequest {
            compare: vec![version_is(b"a", 1), version_is(b"b", 0)],
            success: vec![
                put_op(b"b", b"1", 0),
                RequestOp::Range(RangeRequest {
                    key: b"b".to_vec(),
                    ..Default::default()
                }),
                RequestOp::DeleteRange(DeleteRangeRequest {
                    key: b"a".to_vec(),
                    ..Default::default()
                }),
                RequestOp::Txn(TxnRequest {
                    compare: vec![version_is(b"b", 1)],
                    success: vec![],
                    failure: vec![put_op(b"c", b"1", 0)],
                }),
            ],
            failure: vec![],
        };
        let a = t.apply(Command::Txn(txn.clone()));
        let Ok(Response::Txn(r)) = a.result else {
            panic!("{a:?}")
        };
        assert!(r.succeeded);
        assert_eq!(a.revision, 3);
        assert_eq!(a.events.len(), 3, "b put, a deleted, c put");
        let ResponseOp::Range(rr) = &r.responses[1] else {
            panic!()
        };
        assert_eq!(rr.kvs[0].mod_revision, 3, "a txn reads its own writes");
        let ResponseOp::Txn(nested) = &r.responses[3] else {
            panic!()
        };
        assert!(
            !nested.succeeded,
            "nested compares see the state before the txn"
        );
        assert_eq!(
            (nested.header.revision, rr.header.revision),
            (0, 3),
            "as etcd's: a nested txn's header carries no revision, an op's the one it saw"
        );
        // Same txn again: the compare fails and the failure branch is empty.
        let a = t.apply(Command::Txn(txn));
        let Ok(Response::Txn(r)) = a.result else {
            panic!()
        };
        assert!(!r.succeeded && r.responses.is_empty());
        assert_eq!(a.revision, 3);

        // A failing op rolls back the ones before it.
        let bad = TxnRequest {
            compare: vec![],
            success: vec![put_op(b"x", b"1", 0), put_op(b"y", b"1", 77)],
            failure: vec![],
        };
        assert_eq!(
            t.apply(Command::Txn(bad)).result,
            Err(KvError::LeaseNotFound { id: 77 })
        );
        assert_eq!((t.get(b"x"), t.s.revision()), (None, 3));
        let dup = TxnRequest {
            compare: vec![],
            success: vec![put_op(b"x", b"1", 0), put_op(b"x", b"2", 0)],
            failure: vec![],
        };
        assert_eq!(
            t.apply(Command::Txn(dup)).result,
            Err(KvError::DuplicateKey)
        );
    }

    #[test]
    fn events_carry_the_key_as_it_was_before_their_txn() {
        let mut t = T::new();
        t.put(b"a", b"1", 0).unwrap();
        let from_a = |prev_kv| {
            RequestOp::DeleteRange(DeleteRangeRequest {
                key: b"a".to_vec(),
                range_end: vec![0],
                prev_kv,
            })
        };
        let txn = |success| TxnRequest {
            compare: vec![],
            success,
            failure: vec![],
        };
        let a = t.apply(Command::Txn(txn(vec![put_op(b"a", b"2", 0), from_a(true)])));
        let prevs = |events: &[Event]| -> Vec<Option<Vec<u8>>> {
            events
                .iter()
                .map(|e| e.prev_kv.as_ref().map(|kv| kv.value.clone()))
                .collect()
        };
        // As etcd's watch: both events' prev_kv is the key before the txn (the delete's
        // response, though, has the txn's own put).
        assert_eq!(prevs(&a.events), vec![Some(b"1".to_vec()); 2]);
        let Ok(Response::Txn(r)) = &a.result else {
            panic!()
        };
        let ResponseOp::DeleteRange(d) = &r.responses[1] else {
            panic!()
        };
        assert_eq!(d.prev_kvs[0].value, b"2");
        assert_eq!(
            prevs(&t.s.events_since(3, &KeyRange::all()).unwrap()),
            prevs(&a.events)
        );
        // A put that creates its key has none, even when the key was there before the txn.
        t.put(b"a", b"3", 0).unwrap();
        let a = t.apply(Command::Txn(txn(vec![
            from_a(false),
            put_op(b"a", b"4", 0),
        ])));
        assert_eq!(prevs(&a.events), vec![Some(b"3".to_vec()), None]);
        assert_eq!(
            prevs(&t.s.events_since(5, &KeyRange::all()).unwrap()),
            prevs(&a.events)
        );
    }

    #[test]
    fn rollback_restores_lease_attachments() {
        let mut t = T::new();
        t.apply(Command::LeaseGrant {
            id: 1,
            ttl: 5,
            now_ms: 0,
        });
        t.apply(Command::LeaseGrant {
            id: 2,
            ttl: 5,
            now_ms: 0,
        });
        t.put(b"k", b"v", 1).unwrap();
        let bad = TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Txn(TxnRequest {
                    compare: vec![],
                    success: vec![put_op(b"k", b"w", 2)],
                    failure: vec![],
                }),
                RequestOp::Txn(TxnRequest {
                    compare: vec![],
                    success: vec![RequestOp::DeleteRange(DeleteRangeRequest {
                        key: b"k".to_vec(),
                        ..Default::default()
                    })],
                    failure: vec![],
                }),
                put_op(b"z", b"1", 99),
            ],
            failure: vec![],
        };
        assert_eq!(
            t.apply(Command::Txn(bad)).result,
            Err(KvError::LeaseNotFound { id: 99 })
        );
        assert_eq!(t.s.lease_keys(1), Some(vec![b"k".to_vec()]));
        assert_eq!(t.s.lease_keys(2), Some(vec![]));
    }

    #[test]
    fn read_only_txn_served_locally() {
        let mut t = T::new();
        t.put(b"a", b"1", 0).unwrap();
        let read = TxnRequest {
            compare: vec![version_is(b"a", 1)],
            success: vec![RequestOp::Range(RangeRequest {
                key: b"a".to_vec(),
                ..Default::default()
            })],
            failure: vec![],
        };
        let r = t.s.txn_read_only(&read).unwrap();
        assert!(r.succeeded && r.header.revision == 2);
        let Ok(Response::Txn(logged)) = t.apply(Command::Txn(read.clone())).result else {
            panic!()
        };
        assert_eq!(logged, r, "local and logged read-only txns agree");
        let write = TxnRequest {
            success: vec![put_op(b"a", b"2", 0)],
            ..read
        };
        assert_eq!(t.s.txn_read_only(&write), Err(KvError::NotReadOnly));
    }

    #[test]
    fn compaction() {
        let mut t = T::new();
        for i in 0..4u8 {
            t.put(b"k", &[i], 0).unwrap();
        }
        let compact = |rev| {
            Command::Compact(CompactionRequest {
                revision: rev,
                physical: true,
            })
        };
        let in_txn = |rev| TxnRequest {
            compare: vec![],
            success: vec![RequestOp::Range(RangeRequest {
                key: b"k".to_vec(),
                revision: rev,
                ..Default::default()
            })],
            failure: vec![],
        };
        // As etcd's: a negative revision in a txn is checked against the first revision
        // kept, -1 before any compaction.
        assert!(t.s.txn_read_only(&in_txn(-1)).is_ok());
        assert!(t.s.txn_read_only(&in_txn(-2)).is_err());
        assert_eq!(
            t.apply(compact(9)).result,
            Err(KvError::FutureRevision {
                current_revision: 5
            })
        );
        let Ok(Response::Compact(r)) = t.apply(compact(4)).result else {
            panic!()
        };
        assert_eq!(r.header.revision, 5);
        assert_eq!(
            t.apply(compact(4)).result,
            Err(KvError::Compacted {
                compact_revision: 4
            })
        );
        let at = |rev| RangeRequest {
            key: b"k".to_vec(),
            revision: rev,
            ..Default::default()
        };
        assert_eq!(
            t.s.range(&at(3)),
            Err(KvError::Compacted {
                compact_revision: 4
            })
        );
        assert_eq!(t.s.range(&at(4)).unwrap().kvs[0].value, vec![2]);
        assert!(t.s.events_since(3, &KeyRange::all()).is_err());
        assert!(
            t.s.range(&at(-1)).is_ok(),
            "a plain range reads it as the latest"
        );
        assert_eq!(
            t.s.txn_read_only(&in_txn(-1)),
            Err(KvError::Compacted {
                compact_revision: 4
            })
        );
    }

    #[test]
    fn leases() {
        let mut t = T::new();
        let Ok(Response::LeaseGrant(g)) = t
            .apply(Command::LeaseGrant {
                id: 0,
                ttl: 10,
                now_ms: 1_000,
            })
            .result
        else {
            panic!()
        };
        assert_eq!(
            (g.id, g.ttl),
            (1, 10),
            "id 0: the state machine picks one from the log index"
        );
        assert_eq!(
            t.apply(Command::LeaseGrant {
                id: 1,
                ttl: 10,
                now_ms: 0
            })
            .result,
            Err(KvError::LeaseExists { id: 1 })
        );
        t.apply(Command::LeaseGrant {
            id: 50,
            ttl: 3,
            now_ms: 1_000,
        });
        t.put(b"x", b"1", 1).unwrap();
        t.put(b"y", b"1", 1).unwrap();
        t.put(b"z", b"1", 50).unwrap();
        let ttl =
            t.s.lease_time_to_live(&LeaseTimeToLiveRequest { id: 1, keys: true }, 6);
        assert_eq!((ttl.ttl, ttl.granted_ttl, ttl.keys.len()), (6, 10, 2));
        assert_eq!(
            t.s.lease_time_to_live(&LeaseTimeToLiveRequest { id: 2, keys: true }, 0)
                .ttl,
            -1
        );
        assert_eq!(
            t.s.lease_leases()
                .leases
                .iter()
                .map(|l| l.id)
                .collect::<Vec<_>>(),
            vec![1, 50]
        );

        // Checkpoints set (and clear) the remaining TTL a new leader resumes from; a lease
        // that is gone is skipped.
        let cp = |id, remaining_ms| LeaseCheckpoint { id, remaining_ms };
        let a = t.apply(Command::LeaseCheckpoint {
            checkpoints: vec![cp(1, 4_000), cp(50, 1_000), cp(3, 9)],
        });
        assert!(a.result.is_ok() && a.events.is_empty());
        assert_eq!(t.s.lease(1).unwrap().resume_ms(), 4_000);
        assert_eq!(t.s.lease(50).unwrap().remaining_ms, 1_000);
        // An older build's replicated keep-alive clears the checkpoint, as a renewal does.
        let Ok(Response::LeaseRenew(k)) = t
            .apply(Command::LeaseRenew {
                id: 1,
                now_ms: 10_000,
            })
            .result
        else {
            panic!()
        };
        assert_eq!((k.ttl, t.s.lease(1).unwrap().resume_ms()), (10, 10_000));
        // Expiry revokes what the leader listed and still exists, whatever `now_ms` says.
        let a = t.apply(Command::LeaseExpire {
            ids: vec![50, 3],
            now_ms: 0,
        });
        let Ok(Response::LeaseExpire(e)) = a.result else {
            panic!()
        };
        assert_eq!(e.expired, vec![50]);
        assert_eq!(t.get(b"z"), None);
        assert_eq!(a.events.len(), 1);

        let before = t.s.revision();
        let a = t.apply(Command::LeaseRevoke { id: 1 });
        assert_eq!(
            a.revision,
            before + 1,
            "revoke deletes all keys at one revision"
        );
        assert_eq!(
            a.events
                .iter()
                .map(|e| e.kv.key.clone())
                .collect::<Vec<_>>(),
            vec![b"x".to_vec(), b"y".to_vec()]
        );
        assert_eq!(
            t.apply(Command::LeaseRevoke { id: 1 }).result,
            Err(KvError::LeaseNotFound { id: 1 })
        );
        assert_eq!(
            t.apply(Command::LeaseRenew { id: 1, now_ms: 0 }).result,
            Err(KvError::LeaseNotFound { id: 1 })
        );
        let before = t.s.revision();
        assert!(t
            .apply(Command::LeaseRenewAll { now_ms: 100_000 })
            .result
            .is_ok());
        assert_eq!(t.s.revision(), before, "older builds' promotion: a no-op");
    }

    #[test]
    fn log_indexes() {
        let mut s = KvStore::new();
        let put = Command::Put(PutRequest {
            key: b"k".to_vec(),
            ..Default::default()
        });
        assert!(s.apply(5, &put).result.is_ok());
        assert_eq!(
            s.apply(5, &put).result,
            Err(KvError::AlreadyApplied {
                index: 5,
                applied: 5
            })
        );
        assert_eq!(
            s.apply(0, &put).result,
            Err(KvError::AlreadyApplied {
                index: 0,
                applied: 5
            })
        );
        assert_eq!((s.revision(), s.applied_index()), (2, 5));
        assert!(s.apply(9, &put).result.is_ok());
    }
}
