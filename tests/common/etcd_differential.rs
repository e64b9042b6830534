//! Differential testing of etcd's v3 API: one sequence of requests ([`steps::Step`]:
//! Put, Range, DeleteRange, Txn, Compact, the Lease calls, watch streams), written by hand
//! or generated from a seed ([`generate`]), is sent as raw gRPC requests (etcd-client's
//! protobuf messages over tonic, [`wire`]) to real etcd and to the raft engine, and every
//! reply is reduced to what must agree ([`normalise`]: revisions relative to the run's
//! first, keys without the run's prefix, lease ids by name, header ids as set or not,
//! remaining TTLs within 1 s of the client's expectation, gRPC errors as code and
//! message). Watch streams are drained after every step (see [`watch`]).
//!
//! Each run of a sequence takes a fresh run number: its keys live under a prefix of their
//! own and its chosen lease ids in a range of their own, so runs on one server (a
//! sequence, then the reruns that shrink it) do not see each other. A run revokes the
//! leases it granted when it ends, so none expires during a later one.
//!
//! `ETCD_DIFF_TRACE=1` prints each line as it is made, with the time the step took.

pub mod generate;
mod normalise;
mod requests;
pub mod steps;
mod watch;
mod wire;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use etcd_client::proto::{
    PbCompactionRequest, PbCompactionResponse, PbDeleteResponse, PbLeaseGrantRequest,
    PbLeaseGrantResponse, PbLeaseKeepAliveRequest, PbLeaseKeepAliveResponse, PbLeaseLeasesRequest,
    PbLeaseLeasesResponse, PbLeaseRevokeRequest, PbLeaseRevokeResponse, PbLeaseTimeToLiveRequest,
    PbLeaseTimeToLiveResponse, PbPutResponse, PbRangeRequest, PbRangeResponse, PbResponseHeader,
    PbTxnResponse,
};
use tonic::Status;

use normalise::Names;
use steps::{Lease, Step};
use watch::WatchStream;
use wire::{path, WatchRequest, WatchRequestUnion, Wire};

/// The normalised replies to a sequence, one line per step.
pub type Transcript = Vec<String>;

/// Run numbers of this process: each run of a sequence takes the next.
static RUNS: AtomicU64 = AtomicU64::new(1);

/// A fresh run number (the same one is given to both servers of a comparison).
pub fn next_run() -> u64 {
    RUNS.fetch_add(1, Ordering::Relaxed)
}

/// Sends `steps` to the server at `endpoint` as run `run`; returns the normalised replies.
pub async fn run(endpoint: &str, run: u64, steps: &[Step]) -> Transcript {
    let trace = std::env::var_os("ETCD_DIFF_TRACE").is_some();
    let mut r = Runner::start(endpoint, run).await;
    let mut out = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let started = std::time::Instant::now();
        let reply = r.step(step).await;
        let drained = r.drain().await;
        out.push(format!("#{i} {step}: {reply}{drained}"));
        if trace {
            eprintln!("{endpoint} run {run} ({:?}) {}", started.elapsed(), out[i]);
        }
    }
    r.finish().await;
    out
}

/// One run on one server.
struct Runner {
    wire: Wire,
    names: Names,
    streams: BTreeMap<u8, WatchStream>,
    /// The newest revision any reply of the run carried.
    latest: i64,
}

/// A reply, or the status the call failed with, printed.
fn answer<A>(r: Result<A, Status>, print: impl FnOnce(&A) -> String) -> String {
    match r {
        Ok(a) => print(&a),
        Err(s) => normalise::status(&s),
    }
}

impl Runner {
    async fn start(endpoint: &str, run: u64) -> Runner {
        let mut wire = Wire::connect(endpoint).await;
        let probe = PbRangeRequest {
            key: b"/etcd-diff/".to_vec(),
            ..Default::default()
        };
        let r: PbRangeResponse = wire
            .unary(path::RANGE, probe)
            .await
            .unwrap_or_else(|s| panic!("reading the revision of {endpoint}: {s}"));
        let base = r.header.map_or(0, |h| h.revision);
        Runner {
            wire,
            names: Names::new(run, base),
            streams: BTreeMap::new(),
            latest: base,
        }
    }

    fn seen(&mut self, h: &Option<PbResponseHeader>) {
        if let Some(h) = h {
            self.latest = self.latest.max(h.revision);
        }
    }

    async fn step(&mut self, step: &Step) -> String {
        match step {
            Step::Put(p) => {
                let req = self.names.put_request(p);
                let r = self.wire.unary::<_, PbPutResponse>(path::PUT, req).await;
                self.print(r, |n, a| n.put(a), |a| &a.header)
            }
            Step::Range(q) => {
                let req = self.names.range_request(q);
                let r = self
                    .wire
                    .unary::<_, PbRangeResponse>(path::RANGE, req)
                    .await;
                self.print(r, |n, a| n.range(a), |a| &a.header)
            }
            Step::Delete(d) => {
                let req = self.names.delete_request(d);
                let r = self
                    .wire
                    .unary::<_, PbDeleteResponse>(path::DELETE_RANGE, req)
                    .await;
                self.print(r, |n, a| n.delete(a), |a| &a.header)
            }
            Step::Txn(t) => {
                let req = self.names.txn_request(t);
                let r = self.wire.unary::<_, PbTxnResponse>(path::TXN, req).await;
                self.print(r, |n, a| n.txn(a), |a| &a.header)
            }
            Step::Compact { revision, physical } => {
                let req = PbCompactionRequest {
                    revision: self.names.rev(*revision),
                    physical: *physical,
                };
                let r = self
                    .wire
                    .unary::<_, PbCompactionResponse>(path::COMPACT, req)
                    .await;
                self.print(r, |n, a| n.header(&a.header), |a| &a.header)
            }
            Step::Watch { .. } | Step::Cancel { .. } | Step::Progress { .. } => {
                self.watch_step(step).await
            }
            _ => self.lease_step(step).await,
        }
    }

    /// Prints a reply and notes the revision its header carries.
    fn print<A>(
        &mut self,
        r: Result<A, Status>,
        print: impl FnOnce(&Names, &A) -> String,
        header: impl FnOnce(&A) -> &Option<PbResponseHeader>,
    ) -> String {
        if let Ok(a) = &r {
            self.seen(header(a));
        }
        answer(r, |a| print(&self.names, a))
    }

    async fn lease_step(&mut self, step: &Step) -> String {
        match step {
            Step::Grant { id, ttl } => {
                let req = PbLeaseGrantRequest {
                    ttl: *ttl,
                    id: id.map_or(0, |n| self.names.lease(Lease::Chosen(n))),
                };
                let r = self
                    .wire
                    .unary::<_, PbLeaseGrantResponse>(path::LEASE_GRANT, req);
                let r = r.await;
                if let Ok(g) = &r {
                    if g.error.is_empty() {
                        self.names.granted(g.id, g.ttl, id.is_none());
                    }
                }
                self.print(r, |n, a| n.grant(a), |a| &a.header)
            }
            Step::Revoke(l) => {
                let req = PbLeaseRevokeRequest {
                    id: self.names.lease(*l),
                };
                let r = self
                    .wire
                    .unary::<_, PbLeaseRevokeResponse>(path::LEASE_REVOKE, req)
                    .await;
                self.print(r, |n, a| n.header(&a.header), |a| &a.header)
            }
            Step::TimeToLive { lease, keys } => {
                let req = PbLeaseTimeToLiveRequest {
                    id: self.names.lease(*lease),
                    keys: *keys,
                };
                let r = self
                    .wire
                    .unary::<_, PbLeaseTimeToLiveResponse>(path::LEASE_TIME_TO_LIVE, req)
                    .await;
                self.print(r, |n, a| n.time_to_live(a), |a| &a.header)
            }
            Step::Leases => {
                let req = PbLeaseLeasesRequest {};
                let r = self
                    .wire
                    .unary::<_, PbLeaseLeasesResponse>(path::LEASE_LEASES, req)
                    .await;
                self.print(r, |n, a| n.leases(a), |a| &a.header)
            }
            Step::KeepAlive(l) => self.keep_alive(*l).await,
            other => unreachable!("not a lease step: {other}"),
        }
    }

    /// One keep-alive on a stream of its own.
    async fn keep_alive(&mut self, lease: Lease) -> String {
        let req = PbLeaseKeepAliveRequest {
            id: self.names.lease(lease),
        };
        let opened = self
            .wire
            .stream::<_, PbLeaseKeepAliveResponse>(path::LEASE_KEEP_ALIVE, req)
            .await;
        let (_tx, mut rx) = match opened {
            Ok(s) => s,
            Err(s) => return normalise::status(&s),
        };
        let r = match tokio::time::timeout(wire::CALL_BOUND, rx.message()).await {
            Ok(Ok(Some(a))) => Ok(a),
            Ok(Ok(None)) => return "stream ended without an answer".into(),
            Ok(Err(s)) => Err(s),
            Err(_) => return "no answer".into(),
        };
        if let Ok(a) = &r {
            self.names.renewed(a.id, a.ttl);
        }
        self.print(r, |n, a| n.keep_alive(a), |a| &a.header)
    }

    async fn watch_step(&mut self, step: &Step) -> String {
        match step {
            Step::Watch { stream, create } => {
                let req = WatchRequestUnion::Create(self.names.watch_request(create));
                if let Some(s) = self.streams.get_mut(stream) {
                    s.send(req);
                } else {
                    let first = WatchRequest {
                        request_union: Some(req),
                    };
                    match WatchStream::open(&mut self.wire, first).await {
                        Ok(s) => self.streams.insert(*stream, s),
                        Err(e) => return e,
                    };
                }
                let start = self.names.rev(create.start);
                let s = self.streams.get_mut(stream).expect("opened");
                s.created(start, &self.names).await
            }
            Step::Cancel { stream, watch_id } => match self.streams.get_mut(stream) {
                Some(s) => s.cancel(*watch_id, &self.names).await,
                None => "no stream".into(),
            },
            Step::Progress { stream } => match self.streams.get_mut(stream) {
                Some(s) => s.progress(self.latest, &self.names).await,
                None => "no stream".into(),
            },
            other => unreachable!("not a watch step: {other}"),
        }
    }

    /// What every stream sent during the step, as ` | s<n>: ...` parts.
    async fn drain(&mut self) -> String {
        let mut out = String::new();
        for (n, s) in &mut self.streams {
            if !s.watching() {
                continue;
            }
            let drained = s.drain(self.latest, &self.names).await;
            if !drained.is_empty() {
                out.push_str(&format!(" | s{n}: {drained}"));
            }
        }
        out
    }

    /// Ends the run: its streams closed, its leases revoked (so none expires during a later
    /// run and deletes keys at a revision nobody asked for).
    async fn finish(mut self) {
        self.streams.clear();
        for id in self.names.granted_ids() {
            let req = PbLeaseRevokeRequest { id };
            let _ = self
                .wire
                .unary::<_, PbLeaseRevokeResponse>(path::LEASE_REVOKE, req)
                .await;
        }
    }
}
