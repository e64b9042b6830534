//! The event loop of a Raft member: one tokio task owning the [`RawNode`] and the [`Wal`].
//!
//! Each turn it waits for something (a tick, a peer message, a client request), then
//! drains everything else already queued, so that under load many proposals and acks go
//! into one `Ready` and hence one WAL sync (group commit). A `Ready` is handled in the
//! core's documented order: send messages; install a received snapshot; append entries and
//! hard state to the WAL and sync once; send the messages that promise durability; apply
//! committed entries (answering proposal waiters by index and term); answer reads; advance.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use coordbench_raft::{
    EntryKind, Error as RaftError, HardState, Message, NodeId, RawNode, Ready, Role, Snapshot,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::config::NodeConfig;
use crate::envelope::{Envelope, Payload, Refusal};
use crate::seam::{NodeError, NodeRole, NodeStatus, StateMachine};
use crate::transport::Transport;
use crate::wal::{Wal, WalError};

/// Queued inputs handled per turn at most, per source (bounds one turn's latency).
pub(crate) const DRAIN: usize = 4096;
/// Entries applied per state-machine lock, so readers are never held off for long.
pub(crate) const APPLY_CHUNK: usize = 256;
/// Ticks between sweeps of expired or abandoned requests.
pub(crate) const SWEEP_TICKS: u64 = 10;

/// Why the loop stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error("restoring the state machine from the snapshot at {index}: {reason}")]
    Restore { index: u64, reason: String },
    #[error("node task failed: {0}")]
    Task(String),
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

/// What a [`crate::RaftHandle`] asks of the loop.
pub(crate) enum Request<S: StateMachine> {
    Propose {
        command: Vec<u8>,
        reply: ProposeReply<S::Output>,
    },
    /// Answered with the index the local state machine must reach before a read.
    ReadIndex { reply: ReadReply },
}

enum ReadWaiter {
    Local(ReadReply),
    Remote { from: NodeId, request_id: u64 },
}

/// A proposal sent to the leader, waiting for it to say where it went.
pub(crate) struct Forwarded<O> {
    pub reply: ProposeReply<O>,
    pub command: Vec<u8>,
    pub leader: NodeId,
    pub deadline: Instant,
}

/// Answers `Timeout` to forwarded proposals whose answer never came or whose caller left
/// (shared by both cores' loops).
pub(crate) fn expire_forwards<O>(forwards: &mut HashMap<u64, Forwarded<O>>, now: Instant) {
    let expired: Vec<u64> = forwards
        .iter()
        .filter(|(_, f)| f.deadline <= now || f.reply.is_closed())
        .map(|(&id, _)| id)
        .collect();
    for id in expired {
        if let Some(f) = forwards.remove(&id) {
            let _ = f.reply.send(Err(ProposeFail {
                error: NodeError::Timeout,
                command: None,
            }));
        }
    }
}

/// A new (or no) leader: proposals forwarded to another one will not be answered. The old
/// leader may have appended them before stepping down, so they are `Dropped`, not retried.
pub(crate) fn drop_stale_forwards<O>(
    forwards: &mut HashMap<u64, Forwarded<O>>,
    leader: Option<NodeId>,
) {
    let stale: Vec<u64> = forwards
        .iter()
        .filter(|(_, f)| Some(f.leader) != leader)
        .map(|(&id, _)| id)
        .collect();
    for id in stale {
        if let Some(f) = forwards.remove(&id) {
            let _ = f.reply.send(Err(ProposeFail {
                error: NodeError::Dropped,
                command: None,
            }));
        }
    }
}

/// Runs `f` on the WAL in `slot` on a blocking thread (syncs may take milliseconds); the
/// slot is empty only after a failure that already stopped the loop.
pub(crate) async fn on_blocking<W: Send + 'static, R: Send + 'static>(
    slot: &mut Option<W>,
    f: impl FnOnce(&mut W) -> R + Send + 'static,
) -> Result<R, RuntimeError> {
    let mut wal = slot
        .take()
        .ok_or_else(|| RuntimeError::Task("WAL lost by an earlier failure".into()))?;
    let (wal, r) = tokio::task::spawn_blocking(move || {
        let r = f(&mut wal);
        (wal, r)
    })
    .await
    .map_err(|e| RuntimeError::Task(format!("WAL task: {e}")))?;
    *slot = Some(wal);
    Ok(r)
}

/// Reads whose index was asked of the leader.
struct RemoteRead {
    replies: Vec<ReadReply>,
    leader: NodeId,
    deadline: Instant,
}

pub(crate) struct Runtime<S: StateMachine> {
    id: NodeId,
    cfg: NodeConfig,
    raw: RawNode,
    wal: Option<Wal>,
    sm: Arc<RwLock<S>>,
    transport: Box<dyn Transport>,
    inbox: mpsc::Receiver<Envelope>,
    requests: mpsc::Receiver<Request<S>>,
    status: watch::Sender<NodeStatus>,
    /// Last applied index (the snapshot's after a restart or install).
    applied: u64,
    snapshot_index: u64,
    /// Last hard state written to the WAL: a change of term or vote must be synced.
    last_hard_state: HardState,
    waiters: BTreeMap<(u64, u64), ProposeReply<S::Output>>,
    forwards: HashMap<u64, Forwarded<S::Output>>,
    read_batch: Vec<ReadWaiter>,
    reads: HashMap<u64, Vec<ReadWaiter>>,
    remote_batch: Vec<ReadReply>,
    remote_reads: HashMap<u64, RemoteRead>,
    next_id: u64,
    ticks: u64,
    leader: Option<NodeId>,
}

pub(crate) fn role_of(r: Role) -> NodeRole {
    match r {
        Role::Leader => NodeRole::Leader,
        Role::Candidate | Role::PreCandidate => NodeRole::Candidate,
        Role::Follower => NodeRole::Follower,
    }
}

pub(crate) fn refusal_error(r: Refusal) -> NodeError {
    match r {
        Refusal::NotLeader { .. } | Refusal::Busy => NodeError::NoLeader,
        Refusal::Overloaded => NodeError::Rejected("leader overloaded".to_string()),
    }
}

impl<S: StateMachine> Runtime<S> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        cfg: NodeConfig,
        raw: RawNode,
        wal: Wal,
        sm: Arc<RwLock<S>>,
        transport: Box<dyn Transport>,
        inbox: mpsc::Receiver<Envelope>,
        requests: mpsc::Receiver<Request<S>>,
        status: watch::Sender<NodeStatus>,
        hard_state: HardState,
    ) -> Self {
        let snap = raw.status().snapshot_index;
        Self {
            id: cfg.id,
            cfg,
            raw,
            wal: Some(wal),
            sm,
            transport,
            inbox,
            requests,
            status,
            applied: snap,
            snapshot_index: snap,
            last_hard_state: hard_state,
            waiters: BTreeMap::new(),
            forwards: HashMap::new(),
            read_batch: Vec::new(),
            reads: HashMap::new(),
            remote_batch: Vec::new(),
            remote_reads: HashMap::new(),
            next_id: 0,
            ticks: 0,
            leader: None,
        }
    }

    /// Runs until `stop` fires (or its sender is dropped) or a fatal error occurs.
    pub(crate) async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Result<(), RuntimeError> {
        let mut ticker = tokio::time::interval(self.cfg.tick_interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        self.publish_status();
        loop {
            let ready = self.raw.has_ready();
            tokio::select! {
                biased;
                _ = &mut stop => break,
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
            if self.raw.has_ready() {
                self.process_ready().await?;
            }
            self.publish_status();
        }
        // Clean stop: whatever was written becomes durable, and services stop acting as
        // (or on behalf of) a leader.
        if let Some(wal) = self.wal.as_mut() {
            wal.sync()?;
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

    fn send_raft(&self, m: Message) {
        let to = m.to;
        self.send(to, Payload::Raft(m));
    }

    // ---- inputs ------------------------------------------------------------------------

    fn on_tick(&mut self) {
        self.raw.tick();
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
            Payload::Raft(m) => {
                if let Err(e) = self.raw.step(m) {
                    tracing::debug!(from, error = %e, "core refused a message");
                }
            }
            Payload::Zab(_) => {
                tracing::debug!(from, "ignoring a Zab message at a Raft member");
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
                    self.add_waiter(index, term, f.reply);
                }
            }
            Payload::ForwardRejected { request_id, reason } => {
                if let Some(f) = self.forwards.remove(&request_id) {
                    let _ = f.reply.send(Err(ProposeFail {
                        error: refusal_error(reason),
                        command: Some(f.command),
                    }));
                }
            }
            Payload::ReadIndexRequest { request_id } => {
                let st = self.raw.status();
                if st.role == Role::Leader {
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
                    let _ = reply.send(Err(ProposeFail {
                        error: NodeError::Rejected(
                            "overloaded: too many proposals in flight".into(),
                        ),
                        command: None,
                    }));
                    return;
                }
                let st = self.raw.status();
                if st.role == Role::Leader {
                    match self.raw.propose(command) {
                        Ok(index) => {
                            self.waiters.insert((index, st.term), reply);
                        }
                        Err(e) => {
                            let error = match e {
                                RaftError::NotLeader { .. } | RaftError::TransferInProgress => {
                                    NodeError::NoLeader
                                }
                                other => NodeError::Rejected(other.to_string()),
                            };
                            let _ = reply.send(Err(ProposeFail {
                                error,
                                command: None,
                            }));
                        }
                    }
                } else if let Some(leader) = st.leader.filter(|&l| l != self.id) {
                    let request_id = self.next_id();
                    let sent = self.send(
                        leader,
                        Payload::Forward {
                            request_id,
                            command: command.clone(),
                        },
                    );
                    if sent {
                        let deadline = Instant::now() + self.cfg.request_timeout;
                        self.forwards.insert(
                            request_id,
                            Forwarded {
                                reply,
                                command,
                                leader,
                                deadline,
                            },
                        );
                    } else {
                        let _ = reply.send(Err(ProposeFail {
                            error: NodeError::NoLeader,
                            command: Some(command),
                        }));
                    }
                } else {
                    let _ = reply.send(Err(ProposeFail {
                        error: NodeError::NoLeader,
                        command: Some(command),
                    }));
                }
            }
            Request::ReadIndex { reply } => {
                let st = self.raw.status();
                if st.role == Role::Leader {
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
        let st = self.raw.status();
        let payload = if st.role != Role::Leader {
            Payload::ForwardRejected {
                request_id,
                reason: Refusal::NotLeader { hint: st.leader },
            }
        } else {
            match self.raw.propose(command) {
                Ok(index) => Payload::ForwardAccepted {
                    request_id,
                    index,
                    term: st.term,
                },
                Err(RaftError::NotLeader { leader_hint }) => Payload::ForwardRejected {
                    request_id,
                    reason: Refusal::NotLeader { hint: leader_hint },
                },
                Err(_) => Payload::ForwardRejected {
                    request_id,
                    reason: Refusal::Busy,
                },
            }
        };
        self.send(from, payload);
    }

    fn add_waiter(&mut self, index: u64, term: u64, reply: ProposeReply<S::Output>) {
        if index <= self.applied {
            // Already applied here before we learned where it went: its output is gone.
            let _ = reply.send(Err(ProposeFail {
                error: NodeError::Dropped,
                command: None,
            }));
            return;
        }
        self.waiters.insert((index, term), reply);
    }

    /// Issues the reads gathered this turn: one ReadIndex round (one heartbeat broadcast)
    /// for all local and forwarded reads, and one request to the leader for the reads
    /// arriving at a follower.
    fn flush_reads(&mut self) {
        if !self.remote_batch.is_empty() {
            let replies = std::mem::take(&mut self.remote_batch);
            match self.raw.status().leader {
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
            match self.raw.read_index(ctx) {
                Ok(()) => {
                    self.reads.insert(ctx, batch);
                }
                Err(e) => {
                    let hint = match e {
                        RaftError::NotLeader { leader_hint } => leader_hint,
                        _ => None,
                    };
                    self.fail_reads(batch, Refusal::NotLeader { hint });
                }
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
            }
        }
    }

    /// Drops requests whose callers gave up or whose answer never came.
    fn sweep(&mut self) {
        let now = Instant::now();
        expire_forwards(&mut self.forwards, now);
        let expired: Vec<u64> = self
            .remote_reads
            .iter()
            .filter(|(_, r)| r.deadline <= now || r.replies.iter().all(|x| x.is_closed()))
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            if let Some(r) = self.remote_reads.remove(&id) {
                for reply in r.replies {
                    let _ = reply.send(Err(NodeError::Timeout));
                }
            }
        }
        self.waiters.retain(|_, reply| !reply.is_closed());
    }

    /// A new (or no) leader: requests sent to the old one will not be answered.
    fn on_leader_change(&mut self, leader: Option<NodeId>) {
        drop_stale_forwards(&mut self.forwards, leader);
        let stale: Vec<u64> = self
            .remote_reads
            .iter()
            .filter(|(_, r)| Some(r.leader) != leader)
            .map(|(&id, _)| id)
            .collect();
        for id in stale {
            if let Some(r) = self.remote_reads.remove(&id) {
                for reply in r.replies {
                    let _ = reply.send(Err(NodeError::NoLeader));
                }
            }
        }
    }

    fn publish_status(&mut self) {
        let st = self.raw.status();
        if st.leader != self.leader {
            self.leader = st.leader;
            self.on_leader_change(st.leader);
        }
        let s = NodeStatus {
            id: self.id,
            role: role_of(st.role),
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

    async fn with_wal<R: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut Wal) -> R + Send + 'static,
    ) -> Result<R, RuntimeError> {
        on_blocking(&mut self.wal, f).await
    }

    async fn process_ready(&mut self) -> Result<(), RuntimeError> {
        let mut rd: Ready = self.raw.ready();
        // 1. Messages that do not depend on local durability.
        for m in std::mem::take(&mut rd.messages) {
            self.send_raft(m);
        }
        // 2-4. Snapshot, entries and hard state, with one sync for all of it.
        let snapshot = rd.snapshot.take();
        let entries = std::mem::take(&mut rd.entries);
        let hard_state = rd.hard_state.take();
        let vote_changed = hard_state.as_ref().is_some_and(|h| {
            h.term != self.last_hard_state.term || h.vote != self.last_hard_state.vote
        });
        let must_sync = snapshot.is_some() || !entries.is_empty() || vote_changed;
        if let Some(hs) = &hard_state {
            self.last_hard_state = hs.clone();
        }
        let snapshot = if must_sync {
            self.with_wal(move |wal| -> Result<Option<Snapshot>, WalError> {
                if let Some(s) = &snapshot {
                    wal.save_snapshot(s, true)?;
                }
                wal.append(&entries, hard_state.as_ref())?;
                wal.sync()?;
                Ok(snapshot)
            })
            .await??
        } else {
            // Only the commit index moved: written now, made durable by the next sync
            // (a lost commit index is recomputed from the leader).
            if let Some(wal) = self.wal.as_mut() {
                wal.append(&[], hard_state.as_ref())?;
            }
            None
        };
        if let Some(s) = snapshot {
            self.install_snapshot(s)?;
        }
        // 5. Votes and acks, now that what they promise is durable.
        for m in std::mem::take(&mut rd.persisted_messages) {
            self.send_raft(m);
        }
        // 6. Apply, then serve reads.
        let committed = std::mem::take(&mut rd.committed_entries);
        self.apply(committed);
        for rs in std::mem::take(&mut rd.read_states) {
            if let Some(waiters) = self.reads.remove(&rs.ctx) {
                for w in waiters {
                    match w {
                        ReadWaiter::Local(reply) => {
                            let _ = reply.send(Ok(rs.index));
                        }
                        ReadWaiter::Remote { from, request_id } => {
                            self.send(
                                from,
                                Payload::ReadIndexReply {
                                    request_id,
                                    index: rs.index,
                                },
                            );
                        }
                    }
                }
            }
        }
        for ctx in std::mem::take(&mut rd.dropped_reads) {
            if let Some(waiters) = self.reads.remove(&ctx) {
                self.fail_reads(waiters, Refusal::Busy);
            }
        }
        // 7.
        self.raw.advance(rd);
        self.maybe_compact().await
    }

    fn install_snapshot(&mut self, s: Snapshot) -> Result<(), RuntimeError> {
        {
            let mut sm = self.sm.write().unwrap_or_else(|e| e.into_inner());
            sm.restore(&s.data)
                .map_err(|reason| RuntimeError::Restore {
                    index: s.index,
                    reason,
                })?;
        }
        tracing::info!(
            id = self.id,
            index = s.index,
            term = s.term,
            "installed snapshot"
        );
        self.applied = s.index;
        self.snapshot_index = s.index;
        // Proposals up to the snapshot were applied (or not) without us seeing them.
        self.drop_waiters_through(s.index);
        Ok(())
    }

    fn drop_waiters_through(&mut self, index: u64) {
        while let Some(entry) = self.waiters.first_entry() {
            if entry.key().0 > index {
                break;
            }
            let _ = entry.remove().send(Err(ProposeFail {
                error: NodeError::Dropped,
                command: None,
            }));
        }
    }

    fn apply(&mut self, entries: Vec<coordbench_raft::Entry>) {
        for chunk in entries.chunks(APPLY_CHUNK) {
            let Some(last) = chunk.last().map(|e| e.index) else {
                continue;
            };
            let mut outputs = Vec::new();
            {
                let mut sm = self.sm.write().unwrap_or_else(|e| e.into_inner());
                for e in chunk {
                    if let EntryKind::Normal(cmd) = &e.kind {
                        let out = sm.apply(e.index, cmd);
                        if self.waiters.contains_key(&(e.index, e.term)) {
                            outputs.push((e.index, e.term, out));
                        }
                    }
                }
            }
            self.applied = last;
            for (index, term, out) in outputs {
                if let Some(reply) = self.waiters.remove(&(index, term)) {
                    let _ = reply.send(Ok(out));
                }
            }
            // Whatever still waits at or below `last` had its index taken by another entry.
            self.drop_waiters_through(last);
        }
    }

    /// Every `snapshot_every` applied entries: snapshot the state machine, compact the
    /// core's log and the WAL.
    async fn maybe_compact(&mut self) -> Result<(), RuntimeError> {
        let every = self.cfg.snapshot_every;
        if every == 0 || self.applied < self.snapshot_index + every {
            return Ok(());
        }
        let index = self.applied;
        let data = self.sm.read().unwrap_or_else(|e| e.into_inner()).snapshot();
        match self.raw.compact(index, data.clone()) {
            Ok(()) => {}
            Err(RaftError::SnapshotInstallPending) => return Ok(()),
            Err(e) => {
                tracing::warn!(id = self.id, index, error = %e, "compaction refused");
                self.snapshot_index = index;
                return Ok(());
            }
        }
        let Some(term) = self.raw.term_at(index) else {
            return Err(RuntimeError::Task(format!(
                "no term at compacted index {index}"
            )));
        };
        let snap = Snapshot { index, term, data };
        self.with_wal(move |wal| wal.save_snapshot(&snap, false))
            .await??;
        self.snapshot_index = index;
        tracing::debug!(id = self.id, index, "compacted log");
        Ok(())
    }
}

/// How long a retry waits before asking again (a leader may be about to appear).
pub(crate) fn retry_pause(cfg: &NodeConfig) -> Duration {
    (cfg.tick_interval * cfg.heartbeat_ticks).min(Duration::from_millis(50))
}
