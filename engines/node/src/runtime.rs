//! The event loop of a member, for either core: one tokio task owning the [`Core`], with
//! the [`Wal`] on a writer thread of its own (`persist`) and local snapshots written on
//! another (`snapshotter`).
//!
//! Each turn it waits for something (a tick, a peer message, a client request), then
//! drains everything else already queued, so that under load many proposals and acks go
//! into one `Ready`. A `Ready` is handled in the cores' common order, split in two halves:
//!
//! - at once: send its messages; queue its snapshot, truncation, entries and hard state to
//!   the WAL writer (`persist`); apply its committed entries (answering proposal waiters
//!   by position) and answer its reads. Committed entries are safe to apply before earlier
//!   writes finish: both cores hand out only entries already durable locally.
//! - once the writer reports the write durable (in queue order): install a received
//!   snapshot, send the messages that promise durability (votes, acks), advance the core.
//!
//! So the loop keeps stepping the core while a sync is in flight, and everything queued
//! meanwhile shares the next sync (group commit). Proposals made on a follower are
//! forwarded to the leader; read barriers go through the core (Raft's ReadIndex, Zab's
//! sync), a Raft follower's through its leader; leader queries join the leader's read
//! rounds (`leader_query`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use coordbench_raft::NodeId;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::cadence::SnapshotCadence;
use crate::config::NodeConfig;
use crate::core::{CompactFail, Core, Entry, HardState, Position, Ready, Refused};
use crate::envelope::{Envelope, Payload, Refusal};
use crate::persist::{Durable, Job, Report, WalWriter, Written};
use crate::seam::{NodeError, NodeRole, NodeStatus, StateMachine};
use crate::transport::Transport;
use crate::wal::{LogFormat, Snapshot, Wal, WalError};

mod leader_query;

use leader_query::{Parked, Query, QueryReply, RemoteQueries};

/// Queued inputs handled per turn at most, per source (bounds one turn's latency).
const DRAIN: usize = 4096;
/// Entries applied per state-machine lock, so readers are never held off for long.
const APPLY_CHUNK: usize = 256;
/// Ticks between sweeps of expired or abandoned requests.
const SWEEP_TICKS: u64 = 10;
/// `Ready`s taken but not yet durable, at most (bounds memory if the disk stalls).
const MAX_IN_FLIGHT: usize = 64;

/// Why the loop stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error("restoring the state machine from the snapshot at {index}: {reason}")]
    Restore { index: u64, reason: String },
    #[error("node task failed: {0}")]
    Task(String),
    #[error("the WAL writer stopped")]
    WriterGone,
}

/// A proposal that did not produce an output. `command` comes back when it was certainly
/// not appended to any log, so the caller may retry it.
#[derive(Debug)]
pub(crate) struct ProposeFail {
    pub error: NodeError,
    pub command: Option<Vec<u8>>,
}

pub(crate) type ProposeReply<O> = oneshot::Sender<Result<O, ProposeFail>>;
pub(crate) type ReadReply = oneshot::Sender<Result<u64, NodeError>>;

/// What a [`crate::NodeHandle`] asks of the loop.
pub(crate) enum Request<S: StateMachine> {
    Propose {
        command: Vec<u8>,
        reply: ProposeReply<S::Output>,
    },
    /// Answered with the index the local state machine must reach before a read.
    ReadIndex { reply: ReadReply },
    /// Answered by the leader's state machine (see `leader_query`).
    LeaderQuery { query: Vec<u8>, reply: QueryReply },
}

/// What waits for a read round of the core.
enum ReadWaiter {
    Local(ReadReply),
    Remote { from: NodeId, request_id: u64 },
    Query(Query),
}

/// The second half of a taken `Ready`, waiting for its write (`seq`; none: nothing to
/// write, but it still completes in order after the ones before it).
struct InFlight<C: Core> {
    seq: Option<u64>,
    /// A received snapshot, back from the writer once stored.
    snapshot: Option<Snapshot>,
    persisted_messages: Vec<C::Message>,
    rest: C::Rest,
}

/// A proposal sent to the leader, waiting for it to say where it went.
struct Forwarded<O> {
    reply: ProposeReply<O>,
    command: Vec<u8>,
    leader: NodeId,
    deadline: Instant,
}

/// Reads whose index was asked of the leader.
struct RemoteRead {
    replies: Vec<ReadReply>,
    leader: NodeId,
    deadline: Instant,
}

fn refusal_error(r: Refusal) -> NodeError {
    match r {
        Refusal::NotLeader { .. } | Refusal::Busy => NodeError::NoLeader,
        Refusal::Overloaded => NodeError::Rejected("leader overloaded".to_string()),
    }
}

/// Removes and returns the requests in `map` that `pick` selects.
fn remove_where<V>(map: &mut HashMap<u64, V>, pick: impl Fn(&V) -> bool) -> Vec<V> {
    let ids: Vec<u64> = map
        .iter()
        .filter(|(_, v)| pick(v))
        .map(|(&id, _)| id)
        .collect();
    ids.into_iter().filter_map(|id| map.remove(&id)).collect()
}

fn fail<O>(reply: ProposeReply<O>, error: NodeError, command: Option<Vec<u8>>) {
    let _ = reply.send(Err(ProposeFail { error, command }));
}

/// How long a retry waits before asking again (a leader may be about to appear).
pub(crate) fn retry_pause(cfg: &NodeConfig) -> Duration {
    (cfg.tick_interval * cfg.heartbeat_ticks).min(Duration::from_millis(50))
}

pub(crate) struct Runtime<C: Core, S: StateMachine> {
    id: NodeId,
    cfg: NodeConfig,
    core: C,
    /// Taken by a clean stop.
    writer: Option<WalWriter<C::Log>>,
    durable: mpsc::UnboundedReceiver<Report>,
    /// Oldest first.
    in_flight: VecDeque<InFlight<C>>,
    next_seq: u64,
    sm: Arc<RwLock<S>>,
    transport: Box<dyn Transport>,
    inbox: mpsc::Receiver<Envelope>,
    requests: mpsc::Receiver<Request<S>>,
    status: watch::Sender<NodeStatus>,
    /// Last applied index (the snapshot's after a restart or install).
    applied: u64,
    /// What was applied since the last snapshot, and when the next is due (Zab's zxids are
    /// not contiguous, so entries are counted).
    cadence: SnapshotCadence,
    /// Last hard state written to the WAL: a change other than the commit point must be
    /// synced.
    last_hard_state: HardState<C>,
    waiters: BTreeMap<Position, ProposeReply<S::Output>>,
    forwards: HashMap<u64, Forwarded<S::Output>>,
    read_batch: Vec<ReadWaiter>,
    reads: HashMap<u64, Vec<ReadWaiter>>,
    remote_batch: Vec<ReadReply>,
    remote_reads: HashMap<u64, RemoteRead>,
    remote_queries: RemoteQueries,
    parked_queries: Parked,
    /// The last term in which this member started leading.
    led_term: Option<u64>,
    next_id: u64,
    ticks: u64,
    leader: Option<NodeId>,
}

/// What a runtime is built from (see [`crate::node`]).
pub(crate) struct Parts<C: Core, S: StateMachine> {
    pub cfg: NodeConfig,
    pub core: C,
    pub wal: Wal<C::Log>,
    pub sm: Arc<RwLock<S>>,
    pub transport: Box<dyn Transport>,
    pub inbox: mpsc::Receiver<Envelope>,
    pub requests: mpsc::Receiver<Request<S>>,
    pub status: watch::Sender<NodeStatus>,
    pub hard_state: HardState<C>,
    /// The recovered snapshot's index (0: none).
    pub applied: u64,
}

impl<C: Core, S: StateMachine> Runtime<C, S> {
    pub(crate) fn new(p: Parts<C, S>) -> std::io::Result<Self> {
        let (writer, durable) = WalWriter::start(format!("wal-{}", p.cfg.id), p.wal)?;
        let cadence = SnapshotCadence::new(p.cfg.snapshot_every);
        Ok(Self {
            id: p.cfg.id,
            cfg: p.cfg,
            core: p.core,
            writer: Some(writer),
            durable,
            in_flight: VecDeque::new(),
            next_seq: 0,
            sm: p.sm,
            transport: p.transport,
            inbox: p.inbox,
            requests: p.requests,
            status: p.status,
            applied: p.applied,
            cadence,
            last_hard_state: p.hard_state,
            waiters: BTreeMap::new(),
            forwards: HashMap::new(),
            read_batch: Vec::new(),
            reads: HashMap::new(),
            remote_batch: Vec::new(),
            remote_reads: HashMap::new(),
            remote_queries: HashMap::new(),
            parked_queries: Vec::new(),
            led_term: None,
            next_id: 0,
            ticks: 0,
            leader: None,
        })
    }

    /// Runs until `stop` fires (or its sender is dropped) or a fatal error occurs.
    pub(crate) async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Result<(), RuntimeError> {
        let mut ticker = tokio::time::interval(self.cfg.tick_interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        for _ in 0..self.core.boot_ticks() {
            self.core.tick();
        }
        self.publish_status();
        loop {
            let ready = self.can_take_ready();
            tokio::select! {
                biased;
                _ = &mut stop => break,
                report = self.durable.recv() => self.on_durable(report)?,
                _ = ticker.tick() => self.on_tick(),
                Some(env) = self.inbox.recv() => self.on_envelope(env),
                Some(req) = self.requests.recv() => self.on_request(req),
                _ = std::future::ready(()), if ready => {}
            }
            for _ in 0..DRAIN {
                match self.inbox.try_recv() {
                    Ok(env) => self.on_envelope(env),
                    Err(_) => break,
                }
            }
            for _ in 0..DRAIN {
                match self.requests.try_recv() {
                    Ok(req) => self.on_request(req),
                    Err(_) => break,
                }
            }
            self.flush_reads();
            if self.can_take_ready() {
                self.take_ready()?;
            }
            self.publish_status();
        }
        // Clean stop: whatever was queued is written and synced, and services stop acting
        // as (or on behalf of) a leader.
        if let Some(writer) = self.writer.take() {
            tokio::task::spawn_blocking(move || writer.finish())
                .await
                .map_err(|e| RuntimeError::Task(format!("WAL writer: {e}")))??;
        }
        self.status.send_modify(|s| {
            s.role = NodeRole::Follower;
            s.leader = None;
        });
        Ok(())
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn send(&self, to: NodeId, payload: Payload) -> bool {
        self.transport.send(Envelope {
            from: self.id,
            to,
            payload,
        })
    }

    fn send_core(&self, mut m: C::Message) {
        if let Some(data) = C::snapshot_data(&mut m) {
            let sm = self.sm.read().unwrap_or_else(|e| e.into_inner());
            match sm.transfer_snapshot(data) {
                Ok(None) => {}
                Ok(Some(full)) => *data = Bytes::from(full),
                Err(error) => {
                    // The follower asks again; a newer local snapshot will replace this one.
                    tracing::warn!(id = self.id, error = %error, "cannot send snapshot");
                    return;
                }
            }
        }
        let (to, payload) = C::wrap(m);
        self.send(to, payload);
    }

    /// Stops the member once its state machine reports it can no longer be trusted.
    fn check_state_machine(&self) -> Result<(), RuntimeError> {
        let sm = self.sm.read().unwrap_or_else(|e| e.into_inner());
        match sm.failure() {
            Some(why) => Err(RuntimeError::Task(format!("state machine failed: {why}"))),
            None => Ok(()),
        }
    }

    // ---- inputs ------------------------------------------------------------------------

    fn on_tick(&mut self) {
        self.core.tick();
        self.ticks += 1;
        if self.ticks % SWEEP_TICKS == 0 {
            self.sweep();
        }
    }

    fn on_envelope(&mut self, env: Envelope) {
        let from = env.from;
        if env.to != self.id || from == self.id || !self.cfg.peers.contains_key(&from) {
            tracing::debug!(from, to = env.to, "dropping misaddressed envelope");
            return;
        }
        match env.payload {
            p @ (Payload::Raft(_) | Payload::Zab(_)) => {
                if let Err(error) = self.core.step(p) {
                    tracing::debug!(from, error = %error, "core refused a message");
                }
            }
            Payload::Forward {
                request_id,
                command,
            } => self.on_forward(from, request_id, command),
            Payload::ForwardAccepted {
                request_id,
                index,
                term,
            } => {
                if let Some(f) = self.forwards.remove(&request_id) {
                    self.add_waiter((index, term), f.reply);
                }
            }
            Payload::ForwardRejected { request_id, reason } => {
                if let Some(f) = self.forwards.remove(&request_id) {
                    fail(f.reply, refusal_error(reason), Some(f.command));
                }
            }
            Payload::ReadIndexRequest { request_id } => {
                let st = self.core.status();
                if st.role == NodeRole::Leader {
                    self.read_batch
                        .push(ReadWaiter::Remote { from, request_id });
                } else {
                    let reason = Refusal::NotLeader { hint: st.leader };
                    self.send(from, Payload::ReadIndexRejected { request_id, reason });
                }
            }
            Payload::ReadIndexReply { request_id, index } => {
                if let Some(r) = self.remote_reads.remove(&request_id) {
                    for reply in r.replies {
                        let _ = reply.send(Ok(index));
                    }
                }
            }
            Payload::Disconnected => self.core.peer_disconnected(from),
            p @ (Payload::LeaderQuery { .. }
            | Payload::LeaderAnswer { .. }
            | Payload::LeaderQueryRejected { .. }) => self.on_query_payload(from, p),
            Payload::ReadIndexRejected { request_id, reason } => {
                if let Some(r) = self.remote_reads.remove(&request_id) {
                    for reply in r.replies {
                        let _ = reply.send(Err(refusal_error(reason)));
                    }
                }
            }
        }
    }

    fn pending(&self) -> usize {
        self.waiters.len() + self.forwards.len()
    }

    fn on_request(&mut self, req: Request<S>) {
        match req {
            Request::Propose { command, reply } => {
                if self.pending() >= self.cfg.max_pending {
                    let overloaded = "overloaded: too many proposals in flight".into();
                    fail(reply, NodeError::Rejected(overloaded), None);
                    return;
                }
                let st = self.core.status();
                if st.role == NodeRole::Leader {
                    match self.core.propose(command) {
                        Ok(at) => {
                            self.waiters.insert(at, reply);
                        }
                        Err(Refused::NotLeader { .. } | Refused::Retry) => {
                            fail(reply, NodeError::NoLeader, None);
                        }
                        Err(Refused::Other(why)) => fail(reply, NodeError::Rejected(why), None),
                    }
                } else if let Some(leader) = st.leader.filter(|&l| l != self.id) {
                    let request_id = self.next_id();
                    let payload = Payload::Forward {
                        request_id,
                        command: command.clone(),
                    };
                    if self.send(leader, payload) {
                        let deadline = Instant::now() + self.cfg.request_timeout;
                        let f = Forwarded {
                            reply,
                            command,
                            leader,
                            deadline,
                        };
                        self.forwards.insert(request_id, f);
                    } else {
                        fail(reply, NodeError::NoLeader, Some(command));
                    }
                } else {
                    fail(reply, NodeError::NoLeader, Some(command));
                }
            }
            Request::LeaderQuery { query, reply } => self.on_query_request(query, reply),
            Request::ReadIndex { reply } => {
                let st = self.core.status();
                if !C::READS_VIA_LEADER || st.role == NodeRole::Leader {
                    self.read_batch.push(ReadWaiter::Local(reply));
                } else if st.leader.is_some() {
                    self.remote_batch.push(reply);
                } else {
                    let _ = reply.send(Err(NodeError::NoLeader));
                }
            }
        }
    }

    /// The leader side of a follower's forwarded proposal.
    fn on_forward(&mut self, from: NodeId, request_id: u64, command: Vec<u8>) {
        let st = self.core.status();
        let payload = if st.role != NodeRole::Leader {
            Payload::ForwardRejected {
                request_id,
                reason: Refusal::NotLeader { hint: st.leader },
            }
        } else {
            match self.core.propose(command) {
                Ok((index, term)) => Payload::ForwardAccepted {
                    request_id,
                    index,
                    term,
                },
                Err(Refused::NotLeader { hint }) => Payload::ForwardRejected {
                    request_id,
                    reason: Refusal::NotLeader { hint },
                },
                Err(Refused::Retry | Refused::Other(_)) => Payload::ForwardRejected {
                    request_id,
                    reason: Refusal::Busy,
                },
            }
        };
        self.send(from, payload);
    }

    fn add_waiter(&mut self, at: Position, reply: ProposeReply<S::Output>) {
        if at.0 <= self.applied {
            // Already applied here before we learned where it went: its output is gone.
            fail(reply, NodeError::Dropped, None);
            return;
        }
        self.waiters.insert(at, reply);
    }

    /// Issues the reads gathered this turn: one core read round (one heartbeat broadcast
    /// or sync) for all local and forwarded reads, and one request to the leader for the
    /// reads arriving at a follower.
    fn flush_reads(&mut self) {
        if !self.remote_batch.is_empty() {
            let replies = std::mem::take(&mut self.remote_batch);
            match self.core.status().leader {
                Some(l) if l == self.id => {
                    self.read_batch
                        .extend(replies.into_iter().map(ReadWaiter::Local));
                }
                Some(leader) => {
                    let request_id = self.next_id();
                    if self.send(leader, Payload::ReadIndexRequest { request_id }) {
                        let deadline = Instant::now() + self.cfg.request_timeout;
                        self.remote_reads.insert(
                            request_id,
                            RemoteRead {
                                replies,
                                leader,
                                deadline,
                            },
                        );
                    } else {
                        for r in replies {
                            let _ = r.send(Err(NodeError::NoLeader));
                        }
                    }
                }
                None => {
                    for r in replies {
                        let _ = r.send(Err(NodeError::NoLeader));
                    }
                }
            }
        }
        if !self.read_batch.is_empty() {
            let batch = std::mem::take(&mut self.read_batch);
            let ctx = self.next_id();
            match self.core.read(ctx) {
                Ok(()) => {
                    self.reads.insert(ctx, batch);
                }
                Err(hint) => self.fail_reads(batch, Refusal::NotLeader { hint }),
            }
        }
    }

    fn fail_reads(&self, waiters: Vec<ReadWaiter>, reason: Refusal) {
        for w in waiters {
            match w {
                ReadWaiter::Local(reply) => {
                    let _ = reply.send(Err(refusal_error(reason)));
                }
                ReadWaiter::Remote { from, request_id } => {
                    self.send(from, Payload::ReadIndexRejected { request_id, reason });
                }
                ReadWaiter::Query(q) => self.refuse_query(q, reason),
            }
        }
    }

    /// Drops requests whose callers gave up or whose answer never came.
    fn sweep(&mut self) {
        let now = Instant::now();
        let expired = remove_where(&mut self.forwards, |f| {
            f.deadline <= now || f.reply.is_closed()
        });
        for f in expired {
            fail(f.reply, NodeError::Timeout, None);
        }
        let expired = remove_where(&mut self.remote_reads, |r| {
            r.deadline <= now || r.replies.iter().all(|x| x.is_closed())
        });
        for reply in expired.into_iter().flat_map(|r| r.replies) {
            let _ = reply.send(Err(NodeError::Timeout));
        }
        self.sweep_remote_queries(now);
        self.waiters.retain(|_, reply| !reply.is_closed());
    }

    /// A new (or no) leader: requests sent to the old one will not be answered. The old
    /// leader may have appended forwarded proposals before stepping down, so they are
    /// `Dropped`, not retried.
    fn on_leader_change(&mut self, leader: Option<NodeId>) {
        for f in remove_where(&mut self.forwards, |f| Some(f.leader) != leader) {
            fail(f.reply, NodeError::Dropped, None);
        }
        let stale = remove_where(&mut self.remote_reads, |r| Some(r.leader) != leader);
        for reply in stale.into_iter().flat_map(|r| r.replies) {
            let _ = reply.send(Err(NodeError::NoLeader));
        }
        self.drop_queries_to_old_leader(leader);
    }

    fn publish_status(&mut self) {
        let st = self.core.status();
        if st.leader != self.leader {
            self.leader = st.leader;
            self.on_leader_change(st.leader);
        }
        self.on_leading(st.role, st.term);
        let s = NodeStatus {
            id: self.id,
            role: st.role,
            leader: st.leader,
            term: st.term,
            commit_index: st.commit,
            applied_index: self.applied,
        };
        self.status.send_if_modified(|cur| {
            if *cur == s {
                false
            } else {
                *cur = s;
                true
            }
        });
    }

    // ---- Ready ---------------------------------------------------------------------------

    fn can_take_ready(&self) -> bool {
        self.in_flight.len() < MAX_IN_FLIGHT && self.core.has_ready()
    }

    fn submit(&mut self, job: Job<C::Log>) -> Result<(), RuntimeError> {
        match &self.writer {
            Some(w) if w.submit(job) => Ok(()),
            _ => Err(RuntimeError::WriterGone),
        }
    }

    /// The first half of a `Ready` (see the module docs); the rest waits in `in_flight`.
    fn take_ready(&mut self) -> Result<(), RuntimeError> {
        let Ready {
            messages,
            snapshot,
            truncate_after,
            entries,
            hard_state,
            persisted_messages,
            committed,
            read_states,
            dropped_reads,
            rest,
        } = self.core.ready();
        // 1. Messages that do not depend on local durability.
        for m in messages {
            self.send_core(m);
        }
        // 2. Snapshot, truncation, entries and hard state go to the writer, synced unless
        // only the commit point moved (a lost commit point is learned again from the
        // leader).
        let hard_state_changed = hard_state
            .as_ref()
            .is_some_and(|h| C::Log::must_sync(h, &self.last_hard_state));
        let sync = snapshot.is_some()
            || truncate_after.is_some()
            || !entries.is_empty()
            || hard_state_changed;
        if let Some(hs) = &hard_state {
            self.last_hard_state = hs.clone();
        }
        let seq = if sync || hard_state.is_some() {
            self.next_seq += 1;
            let seq = self.next_seq;
            self.submit(Job::Ready {
                seq,
                snapshot,
                truncate_after,
                entries,
                hard_state,
                sync,
            })?;
            Some(seq)
        } else {
            None
        };
        if let Some(after) = truncate_after {
            // Entries after `after` left the log: they will never be applied here.
            for (_, reply) in self.waiters.split_off(&(after.saturating_add(1), 0)) {
                fail(reply, NodeError::Dropped, None);
            }
        }
        // 3. Apply (only entries already durable here), then serve reads.
        self.apply(&committed);
        self.serve_parked_queries();
        for (ctx, index) in read_states {
            for w in self.reads.remove(&ctx).unwrap_or_default() {
                match w {
                    ReadWaiter::Local(reply) => {
                        let _ = reply.send(Ok(index));
                    }
                    ReadWaiter::Remote { from, request_id } => {
                        self.send(from, Payload::ReadIndexReply { request_id, index });
                    }
                    ReadWaiter::Query(q) => self.on_query_confirmed(index, q),
                }
            }
        }
        for ctx in dropped_reads {
            if let Some(waiters) = self.reads.remove(&ctx) {
                self.fail_reads(waiters, Refusal::Busy);
            }
        }
        self.in_flight.push_back(InFlight {
            seq,
            snapshot: None,
            persisted_messages,
            rest,
        });
        self.complete_durable()?;
        self.maybe_compact()?;
        self.check_state_machine()
    }

    /// The writer made more `Ready`s durable.
    fn on_durable(&mut self, report: Option<Report>) -> Result<(), RuntimeError> {
        let Written { durable, stored } = report.ok_or(RuntimeError::WriterGone)??;
        for s in stored {
            self.core.snapshot_stored(s);
        }
        for Durable { seq, snapshot } in durable {
            let Some(f) = self.in_flight.iter_mut().find(|f| f.seq == Some(seq)) else {
                return Err(RuntimeError::Task(format!(
                    "WAL writer reported unknown write {seq}"
                )));
            };
            f.snapshot = snapshot;
            // Marks it done: everything up to a reported write is durable.
            f.seq = None;
        }
        self.complete_durable()
    }

    /// The second half of every `Ready` at the front whose write is durable, in order.
    fn complete_durable(&mut self) -> Result<(), RuntimeError> {
        while self.in_flight.front().is_some_and(|f| f.seq.is_none()) {
            let Some(f) = self.in_flight.pop_front() else {
                break;
            };
            if let Some(s) = f.snapshot {
                self.install_snapshot(s)?;
            }
            // Votes and acks, now that what they promise is durable.
            for m in f.persisted_messages {
                self.send_core(m);
            }
            self.core.advance(f.rest);
        }
        Ok(())
    }

    fn install_snapshot(&mut self, s: Snapshot) -> Result<(), RuntimeError> {
        let (index, term) = (s.index, s.term);
        {
            let mut sm = self.sm.write().unwrap_or_else(|e| e.into_inner());
            sm.restore(&s.data)
                .map_err(|reason| RuntimeError::Restore { index, reason })?;
        }
        tracing::info!(id = self.id, index, term, "installed snapshot");
        self.applied = index;
        self.cadence.restart();
        // Proposals up to the snapshot were applied (or not) without us seeing them.
        self.drop_waiters_through(index);
        Ok(())
    }

    fn drop_waiters_through(&mut self, index: u64) {
        while let Some(entry) = self.waiters.first_entry() {
            if entry.key().0 > index {
                break;
            }
            fail(entry.remove(), NodeError::Dropped, None);
        }
    }

    fn apply(&mut self, entries: &[Entry<C>]) {
        for chunk in entries.chunks(APPLY_CHUNK) {
            let Some(last) = chunk.last().map(C::Log::index) else {
                continue;
            };
            let mut outputs = Vec::new();
            let mut bytes = 0u64;
            {
                let mut sm = self.sm.write().unwrap_or_else(|e| e.into_inner());
                for e in chunk {
                    if let Some(cmd) = C::Log::command(e) {
                        crate::slowdown::per_commit();
                        bytes += cmd.len() as u64;
                        let at = (C::Log::index(e), C::Log::term(e));
                        let out = sm.apply(at.0, cmd);
                        if self.waiters.contains_key(&at) {
                            outputs.push((at, out));
                        }
                    }
                }
            }
            self.applied = last;
            self.core.applied(last);
            self.cadence.applied(chunk.len() as u64, bytes);
            for (at, out) in outputs {
                if let Some(reply) = self.waiters.remove(&at) {
                    let _ = reply.send(Ok(out));
                }
            }
            // Whatever still waits at or below `last` had its position taken by another
            // entry (or is not in the log).
            self.drop_waiters_through(last);
        }
    }

    /// When a snapshot is due (see [`SnapshotCadence`]): snapshot the state machine, compact
    /// the core's log, and queue the snapshot (with what makes the storage it refers to
    /// durable) for the snapshot thread, which writes it off this loop and off the WAL
    /// writer's thread, then has the WAL record it (`persist`, `snapshotter`).
    fn maybe_compact(&mut self) -> Result<(), RuntimeError> {
        if !self.cadence.due() {
            return Ok(());
        }
        let index = self.applied;
        if self.core.followers_need_log_through(index) && !self.cadence.overdue() {
            return Ok(());
        }
        let started = Instant::now();
        let (data, sync) = self
            .sm
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .snapshot_unsynced();
        let serialized = started.elapsed();
        let len = data.len() as u64;
        let snap = match self.core.compact(index, data) {
            Ok(snap) => snap,
            Err(CompactFail::Pending) => return Ok(()),
            Err(CompactFail::Refused(error)) => {
                tracing::warn!(id = self.id, index, error = %error, "compaction refused");
                self.cadence.restart();
                return Ok(());
            }
            Err(CompactFail::Fatal(why)) => return Err(RuntimeError::Task(why)),
        };
        match &self.writer {
            Some(w) if w.snapshot(snap, sync) => {}
            _ => return Err(RuntimeError::WriterGone),
        }
        self.cadence.taken(len);
        tracing::debug!(
            id = self.id,
            index,
            bytes = len,
            serialize_us = serialized.as_micros() as u64,
            compact_us = (started.elapsed() - serialized).as_micros() as u64,
            "compacted log"
        );
        Ok(())
    }
}
