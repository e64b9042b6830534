//! Replies reduced to what must agree between etcd and the engine. Every field of every
//! reply is printed (each message is destructured, so a field added to etcd-client's types
//! does not go unseen), with what the protocol leaves to the server renamed:
//!
//! - revisions relative to the run's first (`r3`), 0 kept as `0`;
//! - keys without the run's prefix (`k3`);
//! - lease ids by the run's names (`L1` chosen, `auto0` the first the server chose);
//! - headers: cluster_id, member_id and raft_term only as set or not (`[ids]` lists the
//!   ones that are 0 when any is);
//! - a lease's remaining TTL against what the client expects from its own clock since the
//!   grant (or last keep-alive): `ttl≈` within 1 s of it;
//! - gRPC errors as code and message.

use std::collections::HashMap;
use std::time::Instant;

use coordbench_kv::key_range::prefix_end;
use etcd_client::proto::{
    PbDeleteResponse, PbEvent, PbKeyValue, PbLeaseGrantResponse, PbLeaseKeepAliveResponse,
    PbLeaseLeasesResponse, PbLeaseTimeToLiveResponse, PbPutResponse, PbRangeResponse,
    PbResponseHeader, PbResponseOp, PbTxnOpResponse, PbTxnResponse, PbWatchResponse,
};
use tonic::Status;

use super::steps::{End, Key, Keys, Lease, Rev};

/// Lease ids a run chooses start here, far above the ids the engine derives from log
/// indexes, so that the two never meet.
const CHOSEN_LEASES: i64 = 0x4000_0000_0000;
/// Lease ids per run: chosen ids 1 to 63 after the run's base, and one never granted.
const LEASES_PER_RUN: i64 = 64;

/// What one run's names stand for on one server, both ways.
pub struct Names {
    prefix: Vec<u8>,
    /// The server's revision when the run started.
    pub base: i64,
    lease_base: i64,
    /// Ids the server chose, in the order it chose them.
    auto: Vec<i64>,
    /// When each lease's TTL was last (re)started, by the client's clock, and its TTL.
    clock: HashMap<i64, (Instant, i64)>,
}

impl Names {
    pub fn new(run: u64, base: i64) -> Names {
        Names {
            prefix: format!("/etcd-diff/{run:08}/").into_bytes(),
            base,
            lease_base: CHOSEN_LEASES + i64::try_from(run).expect("run number") * LEASES_PER_RUN,
            auto: Vec::new(),
            clock: HashMap::new(),
        }
    }

    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    pub fn key(&self, k: Key) -> Vec<u8> {
        match k {
            Key::K(n) => [self.prefix.as_slice(), format!("k{n}").as_bytes()].concat(),
            Key::Empty => Vec::new(),
        }
    }

    pub fn range_end(&self, keys: &Keys) -> Vec<u8> {
        match keys.end {
            End::One => Vec::new(),
            End::To(n) => self.key(Key::K(n)),
            End::Prefix => prefix_end(&self.prefix),
            End::FromKey => vec![0],
        }
    }

    pub fn rev(&self, r: Rev) -> i64 {
        match r {
            Rev::Zero => 0,
            Rev::Rel(n) => self.base + n,
            Rev::Raw(n) => n,
        }
    }

    pub fn lease(&self, l: Lease) -> i64 {
        match l {
            Lease::No => 0,
            Lease::Chosen(n) => self.lease_base + i64::from(n) + 1,
            Lease::Auto(n) => self
                .auto
                .get(usize::from(n))
                .copied()
                .unwrap_or(self.no_lease()),
        }
    }

    /// An id of this run's range that no step chooses: what `auto<n>` stands for when the
    /// server chose fewer ids.
    fn no_lease(&self) -> i64 {
        self.lease_base + LEASES_PER_RUN
    }

    /// Every lease id this run may have granted.
    pub fn lease_ids(&self) -> Vec<i64> {
        let chosen = (1..LEASES_PER_RUN).map(|n| self.lease_base + n);
        chosen.chain(self.auto.iter().copied()).collect()
    }

    /// Records a lease the server granted; `chose` when the request left the id to it.
    pub fn granted(&mut self, id: i64, ttl: i64, chose: bool) {
        if chose && !self.auto.contains(&id) {
            self.auto.push(id);
        }
        self.clock.insert(id, (Instant::now(), ttl));
    }

    /// Ids of the leases the server granted in this run.
    pub fn granted_ids(&self) -> Vec<i64> {
        self.clock.keys().copied().collect()
    }

    /// A keep-alive restarted the lease's TTL.
    pub fn renewed(&mut self, id: i64, ttl: i64) {
        if ttl > 0 {
            self.clock.insert(id, (Instant::now(), ttl));
        }
    }

    pub fn key_name(&self, key: &[u8]) -> String {
        match key.strip_prefix(self.prefix.as_slice()) {
            Some(rest) => String::from_utf8_lossy(rest).into_owned(),
            None => format!("foreign {:?}", String::from_utf8_lossy(key)),
        }
    }

    pub fn rev_name(&self, rev: i64) -> String {
        match rev {
            0 => "0".into(),
            r => format!("r{}", r - self.base),
        }
    }

    pub fn lease_name(&self, id: i64) -> String {
        if id == 0 {
            return "0".into();
        }
        if let Some(n) = self.auto.iter().position(|&a| a == id) {
            return format!("auto{n}");
        }
        if id == self.no_lease() {
            return "auto-never-granted".into();
        }
        match id - self.lease_base - 1 {
            n if (0..LEASES_PER_RUN - 1).contains(&n) => format!("L{n}"),
            _ => format!("foreign lease {id:#x}"),
        }
    }

    /// A remaining TTL against the client's expectation (see the module doc).
    fn remaining(&self, id: i64, ttl: i64) -> String {
        let Some((since, granted)) = self.clock.get(&id) else {
            return format!("ttl={ttl}");
        };
        let expected = *granted as f64 - since.elapsed().as_secs_f64();
        if ttl > 0 && (ttl as f64 - expected).abs() <= 1.0 {
            "ttl≈".into()
        } else {
            format!("ttl={ttl} (expected about {expected:.1})")
        }
    }
}

/// A gRPC error.
pub fn status(s: &Status) -> String {
    format!("error {:?}: {}", s.code(), s.message())
}

impl Names {
    pub fn header(&self, h: &Option<PbResponseHeader>) -> String {
        let Some(PbResponseHeader {
            cluster_id,
            member_id,
            revision,
            raft_term,
        }) = h
        else {
            return "@no-header".into();
        };
        let unset: Vec<&str> = [
            ("cluster", *cluster_id),
            ("member", *member_id),
            ("term", *raft_term),
        ]
        .iter()
        .filter(|(_, v)| *v == 0)
        .map(|(n, _)| *n)
        .collect();
        match unset.is_empty() {
            true => format!("@{}", self.rev_name(*revision)),
            false => format!("@{}[no {}]", self.rev_name(*revision), unset.join(",")),
        }
    }

    pub fn kv(&self, kv: &PbKeyValue) -> String {
        let PbKeyValue {
            key,
            create_revision,
            mod_revision,
            version,
            value,
            lease,
        } = kv;
        format!(
            "{}={:?}<c:{} m:{} v:{} l:{}>",
            self.key_name(key),
            String::from_utf8_lossy(value),
            self.rev_name(*create_revision),
            self.rev_name(*mod_revision),
            version,
            self.lease_name(*lease)
        )
    }

    fn kvs(&self, kvs: &[PbKeyValue]) -> String {
        let all: Vec<String> = kvs.iter().map(|kv| self.kv(kv)).collect();
        format!("[{}]", all.join(", "))
    }

    fn opt_kv(&self, kv: &Option<PbKeyValue>) -> String {
        kv.as_ref().map_or_else(|| "none".into(), |kv| self.kv(kv))
    }

    pub fn range(&self, r: &PbRangeResponse) -> String {
        let PbRangeResponse {
            header,
            kvs,
            more,
            count,
        } = r;
        format!(
            "{} count={count} more={more} {}",
            self.header(header),
            self.kvs(kvs)
        )
    }

    pub fn put(&self, r: &PbPutResponse) -> String {
        let PbPutResponse { header, prev_kv } = r;
        format!("{} prev={}", self.header(header), self.opt_kv(prev_kv))
    }

    pub fn delete(&self, r: &PbDeleteResponse) -> String {
        let PbDeleteResponse {
            header,
            deleted,
            prev_kvs,
        } = r;
        format!(
            "{} deleted={deleted} prev={}",
            self.header(header),
            self.kvs(prev_kvs)
        )
    }

    pub fn txn(&self, r: &PbTxnResponse) -> String {
        let PbTxnResponse {
            header,
            succeeded,
            responses,
        } = r;
        let ops: Vec<String> = responses.iter().map(|op| self.response_op(op)).collect();
        format!(
            "{} succeeded={succeeded} [{}]",
            self.header(header),
            ops.join("; ")
        )
    }

    fn response_op(&self, op: &PbResponseOp) -> String {
        match &op.response {
            Some(PbTxnOpResponse::ResponseRange(r)) => format!("range {}", self.range(r)),
            Some(PbTxnOpResponse::ResponsePut(r)) => format!("put {}", self.put(r)),
            Some(PbTxnOpResponse::ResponseDeleteRange(r)) => {
                format!("delete {}", self.delete(r))
            }
            Some(PbTxnOpResponse::ResponseTxn(r)) => format!("txn {}", self.txn(r)),
            None => "empty".into(),
        }
    }

    pub fn grant(&self, r: &PbLeaseGrantResponse) -> String {
        let PbLeaseGrantResponse {
            header,
            id,
            ttl,
            error,
        } = r;
        format!(
            "{} id={} ttl={ttl} error={error:?}",
            self.header(header),
            self.lease_name(*id)
        )
    }

    pub fn time_to_live(&self, r: &PbLeaseTimeToLiveResponse) -> String {
        let PbLeaseTimeToLiveResponse {
            header,
            id,
            ttl,
            granted_ttl,
            keys,
        } = r;
        // etcd lists a lease's keys from a map: their order is free.
        let mut names: Vec<String> = keys.iter().map(|k| self.key_name(k)).collect();
        names.sort();
        let ttl = match *ttl {
            -1 => "ttl=-1".into(),
            t => self.remaining(*id, t),
        };
        format!(
            "{} id={} {ttl} granted={granted_ttl} keys={names:?}",
            self.header(header),
            self.lease_name(*id)
        )
    }

    /// The run's leases among all the server has (earlier runs' may live on), sorted: etcd
    /// lists them from a map.
    pub fn leases(&self, r: &PbLeaseLeasesResponse) -> String {
        let PbLeaseLeasesResponse { header, leases } = r;
        let ours = self.lease_ids();
        let mut names: Vec<String> = leases
            .iter()
            .filter(|l| ours.contains(&l.id))
            .map(|l| self.lease_name(l.id))
            .collect();
        names.sort();
        format!("{} leases={names:?}", self.header(header))
    }

    pub fn keep_alive(&self, r: &PbLeaseKeepAliveResponse) -> String {
        let PbLeaseKeepAliveResponse { header, id, ttl } = r;
        format!(
            "{} id={} ttl={ttl}",
            self.header(header),
            self.lease_name(*id)
        )
    }

    pub fn event(&self, e: &PbEvent) -> String {
        let PbEvent {
            r#type,
            kv,
            prev_kv,
        } = e;
        let kind = match r#type {
            0 => "put".to_string(),
            1 => "delete".to_string(),
            t => format!("type{t}"),
        };
        match prev_kv {
            Some(p) => format!("{kind} {} prev={}", self.opt_kv(kv), self.kv(p)),
            None => format!("{kind} {}", self.opt_kv(kv)),
        }
    }

    /// A watch response that is not a batch of events: created, canceled, progress.
    pub fn watch_control(&self, r: &PbWatchResponse) -> String {
        let PbWatchResponse {
            header,
            watch_id,
            created,
            canceled,
            compact_revision,
            cancel_reason,
            fragment,
            events,
        } = r;
        let mut s = format!("{} id={watch_id}", self.header(header));
        for (name, on) in [
            ("created", *created),
            ("canceled", *canceled),
            ("fragment", *fragment),
        ] {
            if on {
                s.push(' ');
                s.push_str(name);
            }
        }
        if *compact_revision != 0 {
            s.push_str(&format!(" compact={}", self.rev_name(*compact_revision)));
        }
        if !cancel_reason.is_empty() {
            s.push_str(&format!(" reason={cancel_reason:?}"));
        }
        if !events.is_empty() {
            let evs: Vec<String> = events.iter().map(|e| self.event(e)).collect();
            s.push_str(&format!(" events=[{}]", evs.join(", ")));
        }
        s
    }
}

/// True for a response that only carries events (the header's revision aside, which etcd
/// sets per batch and a batch may span revisions: it is left out).
pub fn only_events(r: &PbWatchResponse) -> bool {
    !r.events.is_empty()
        && !r.created
        && !r.canceled
        && r.compact_revision == 0
        && r.cancel_reason.is_empty()
        && !r.fragment
}

/// A progress answer: no watcher's, nothing else in it.
pub fn is_progress(r: &PbWatchResponse) -> bool {
    r.watch_id == -1 && r.events.is_empty() && !r.created && !r.canceled
}
