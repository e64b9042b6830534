//! The event loop of a Zab member: one tokio task owning the Zab [`RawNode`] and the
//! [`ZabWal`]. Same turn structure as the Raft loop (`runtime`): wait for one input, drain
//! what else is queued, then handle one `Ready` with one WAL sync (group commit), in the
//! core's documented order: send messages; install a received snapshot, truncate, append
//! proposals and hard state, sync; send acknowledgements; apply committed proposals
//! (answering proposal waiters by zxid); answer sync reads; advance.
//!
//! The handle, the request types, forwarding bookkeeping and the blocking WAL helper are
//! shared with the Raft loop; the state machine sees zxids as indexes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use coordbench_zab::{
    Error as ZabError, HardState, Message, NodeId, Phase, Proposal, RawNode, Role, Snapshot,
    Status, Zxid,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::config::NodeConfig;
use crate::envelope::{Envelope, Payload, Refusal};
use crate::runtime::{
    drop_stale_forwards, expire_forwards, on_blocking, refusal_error, Forwarded, ProposeFail,
    ProposeReply, ReadReply, Request, RuntimeError, APPLY_CHUNK, DRAIN, SWEEP_TICKS,
};
use crate::seam::{NodeError, NodeRole, NodeStatus, StateMachine};
use crate::transport::Transport;
use crate::zab_wal::ZabWal;

/// How the services see a Zab member: only an established epoch (broadcast phase) has a
/// leader to propose to; during election, discovery and sync there is none.
pub(crate) fn role_and_leader(st: &Status) -> (NodeRole, Option<NodeId>) {
    match (st.role, st.phase) {
        (Role::Leading, Phase::Broadcast) => (NodeRole::Leader, Some(st.id)),
        (Role::Following, Phase::Broadcast) => (NodeRole::Follower, st.leader),
        (Role::Looking, _) => (NodeRole::Candidate, None),
        _ => (NodeRole::Follower, None),
    }
}

pub(crate) fn node_status(st: &Status, applied: Zxid) -> NodeStatus {
    let (role, leader) = role_and_leader(st);
    NodeStatus {
        id: st.id,
        role,
        leader,
        term: u64::from(st.current_epoch),
        commit_index: st.commit.0,
        applied_index: applied.0,
    }
}

pub(crate) struct ZabRuntime<S: StateMachine> {
    id: NodeId,
    cfg: NodeConfig,
    raw: RawNode,
    wal: Option<ZabWal>,
    sm: Arc<RwLock<S>>,
    transport: Box<dyn Transport>,
    inbox: mpsc::Receiver<Envelope>,
    requests: mpsc::Receiver<Request<S>>,
    status: watch::Sender<NodeStatus>,
    applied: Zxid,
    /// Proposals applied since the last snapshot (zxids are not contiguous).
    since_snapshot: u64,
    last_hard_state: HardState,
    waiters: BTreeMap<Zxid, ProposeReply<S::Output>>,
    forwards: HashMap<u64, Forwarded<S::Output>>,
    read_batch: Vec<ReadReply>,
    reads: HashMap<u64, Vec<ReadReply>>,
    next_id: u64,
    ticks: u64,
    leader: Option<NodeId>,
}

impl<S: StateMachine> ZabRuntime<S> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        cfg: NodeConfig,
        raw: RawNode,
        wal: ZabWal,
        sm: Arc<RwLock<S>>,
        transport: Box<dyn Transport>,
        inbox: mpsc::Receiver<Envelope>,
        requests: mpsc::Receiver<Request<S>>,
        status: watch::Sender<NodeStatus>,
        hard_state: HardState,
    ) -> Self {
        let applied = raw.status().applied;
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
            applied,
            since_snapshot: 0,
            last_hard_state: hard_state,
            waiters: BTreeMap::new(),
            forwards: HashMap::new(),
            read_batch: Vec::new(),
            reads: HashMap::new(),
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

    fn send_zab(&self, m: Message) {
        let to = m.to;
        self.send(to, Payload::Zab(m));
    }

    // ---- inputs ------------------------------------------------------------------------

    fn on_tick(&mut self) {
        self.raw.tick();
        self.ticks += 1;
        if self.ticks % SWEEP_TICKS == 0 {
            expire_forwards(&mut self.forwards, Instant::now());
            self.waiters.retain(|_, reply| !reply.is_closed());
        }
    }

    fn on_envelope(&mut self, env: Envelope) {
        let from = env.from;
        if env.to != self.id || from == self.id || !self.cfg.peers.contains_key(&from) {
            tracing::debug!(from, to = env.to, "dropping misaddressed envelope");
            return;
        }
        match env.payload {
            Payload::Zab(m) => {
                if let Err(e) = self.raw.step(m) {
                    tracing::debug!(from, error = %e, "core refused a message");
                }
            }
            Payload::Forward {
                request_id,
                command,
            } => self.on_forward(from, request_id, command),
            Payload::ForwardAccepted {
                request_id, index, ..
            } => {
                if let Some(f) = self.forwards.remove(&request_id) {
                    self.add_waiter(Zxid(index), f.reply);
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
            // Raft traffic and ReadIndex requests have no meaning here (reads go through
            // the core's own sync).
            other => {
                tracing::debug!(from, kind = ?std::mem::discriminant(&other), "ignoring");
            }
        }
    }

    fn on_request(&mut self, req: Request<S>) {
        match req {
            Request::Propose { command, reply } => {
                if self.waiters.len() + self.forwards.len() >= self.cfg.max_pending {
                    let _ = reply.send(Err(ProposeFail {
                        error: NodeError::Rejected(
                            "overloaded: too many proposals in flight".into(),
                        ),
                        command: None,
                    }));
                    return;
                }
                let st = self.raw.status();
                let (_, leader) = role_and_leader(&st);
                if st.is_established_leader() {
                    match self.raw.propose(command) {
                        Ok(zxid) => {
                            self.waiters.insert(zxid, reply);
                        }
                        Err(e) => {
                            let error = match e {
                                ZabError::NotLeader { .. } | ZabError::ZxidExhausted => {
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
                } else if let Some(leader) = leader.filter(|&l| l != self.id) {
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
            Request::ReadIndex { reply } => self.read_batch.push(reply),
        }
    }

    /// The leader side of a follower's forwarded proposal.
    fn on_forward(&mut self, from: NodeId, request_id: u64, command: Vec<u8>) {
        let st = self.raw.status();
        let payload = if !st.is_established_leader() {
            Payload::ForwardRejected {
                request_id,
                reason: Refusal::NotLeader {
                    hint: role_and_leader(&st).1,
                },
            }
        } else {
            match self.raw.propose(command) {
                Ok(zxid) => Payload::ForwardAccepted {
                    request_id,
                    index: zxid.0,
                    term: u64::from(zxid.epoch()),
                },
                Err(ZabError::NotLeader { leader_hint }) => Payload::ForwardRejected {
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

    fn add_waiter(&mut self, zxid: Zxid, reply: ProposeReply<S::Output>) {
        if zxid <= self.applied {
            // Applied here before we learned its zxid: its output is gone.
            let _ = reply.send(Err(ProposeFail {
                error: NodeError::Dropped,
                command: None,
            }));
            return;
        }
        self.waiters.insert(zxid, reply);
    }

    /// One sync round for all reads gathered this turn (ZooKeeper's `sync()`; a follower's
    /// core asks its leader).
    fn flush_reads(&mut self) {
        if self.read_batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.read_batch);
        let ctx = self.next_id();
        match self.raw.sync_read(ctx) {
            Ok(()) => {
                self.reads.insert(ctx, batch);
            }
            Err(_) => {
                for reply in batch {
                    let _ = reply.send(Err(NodeError::NoLeader));
                }
            }
        }
    }

    fn publish_status(&mut self) {
        let st = self.raw.status();
        let s = node_status(&st, self.applied);
        if s.leader != self.leader {
            self.leader = s.leader;
            drop_stale_forwards(&mut self.forwards, s.leader);
        }
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

    async fn process_ready(&mut self) -> Result<(), RuntimeError> {
        let mut rd = self.raw.ready();
        // 1. Messages that do not depend on local durability.
        for m in std::mem::take(&mut rd.messages) {
            self.send_zab(m);
        }
        // 2-5. Snapshot, truncation, proposals and hard state, with one sync for all of it.
        // (`advance` needs `rd.hard_state`, so it is cloned, not taken.)
        let snapshot = rd.snapshot.take();
        let truncate = rd.truncate_after;
        let entries = std::mem::take(&mut rd.entries);
        let hard_state = rd.hard_state.clone();
        let epoch_or_round_changed = hard_state.as_ref().is_some_and(|h| {
            let l = &self.last_hard_state;
            (h.accepted_epoch, h.current_epoch, h.round)
                != (l.accepted_epoch, l.current_epoch, l.round)
        });
        let must_sync = snapshot.is_some()
            || truncate.is_some()
            || !entries.is_empty()
            || epoch_or_round_changed;
        if let Some(hs) = &hard_state {
            self.last_hard_state = hs.clone();
        }
        if must_sync {
            let snapshot = on_blocking(&mut self.wal, move |wal| {
                if let Some(s) = &snapshot {
                    wal.save_snapshot(s, true)?;
                }
                wal.append(truncate, &entries, hard_state.as_ref())?;
                wal.sync()?;
                Ok::<_, crate::wal::WalError>(snapshot)
            })
            .await??;
            if let Some(s) = snapshot {
                self.install_snapshot(s)?;
            }
        } else if let Some(wal) = self.wal.as_mut() {
            // Only the commit point moved: durable with the next sync (a lost commit point
            // is learned again from the leader).
            wal.append(None, &[], hard_state.as_ref())?;
        }
        if let Some(z) = truncate {
            // Proposals after `z` left the history: they will never be applied here.
            for (_, reply) in self.waiters.split_off(&Zxid(z.0.saturating_add(1))) {
                let _ = reply.send(Err(ProposeFail {
                    error: NodeError::Dropped,
                    command: None,
                }));
            }
        }
        // 6. Acknowledgements, now that what they promise is durable.
        for m in std::mem::take(&mut rd.persisted_messages) {
            self.send_zab(m);
        }
        // 7. Apply, then serve reads.
        let committed = std::mem::take(&mut rd.committed_entries);
        self.apply(&committed);
        for rs in std::mem::take(&mut rd.read_states) {
            if let Some(replies) = self.reads.remove(&rs.ctx) {
                for reply in replies {
                    let _ = reply.send(Ok(rs.zxid.0));
                }
            }
        }
        for ctx in std::mem::take(&mut rd.dropped_reads) {
            if let Some(replies) = self.reads.remove(&ctx) {
                for reply in replies {
                    let _ = reply.send(Err(NodeError::NoLeader));
                }
            }
        }
        // 8.
        self.raw.advance(rd);
        self.maybe_compact().await
    }

    fn install_snapshot(&mut self, s: Snapshot) -> Result<(), RuntimeError> {
        {
            let mut sm = self.sm.write().unwrap_or_else(|e| e.into_inner());
            sm.restore(&s.data)
                .map_err(|reason| RuntimeError::Restore {
                    index: s.zxid.0,
                    reason,
                })?;
        }
        tracing::info!(id = self.id, zxid = %s.zxid, "installed snapshot");
        self.applied = s.zxid;
        self.since_snapshot = 0;
        self.drop_waiters_through(s.zxid);
        Ok(())
    }

    fn drop_waiters_through(&mut self, zxid: Zxid) {
        while let Some(entry) = self.waiters.first_entry() {
            if *entry.key() > zxid {
                break;
            }
            let _ = entry.remove().send(Err(ProposeFail {
                error: NodeError::Dropped,
                command: None,
            }));
        }
    }

    fn apply(&mut self, proposals: &[Proposal]) {
        for chunk in proposals.chunks(APPLY_CHUNK) {
            let Some(last) = chunk.last().map(|p| p.zxid) else {
                continue;
            };
            let mut outputs = Vec::new();
            {
                let mut sm = self.sm.write().unwrap_or_else(|e| e.into_inner());
                for p in chunk {
                    let out = sm.apply(p.zxid.0, &p.data);
                    if self.waiters.contains_key(&p.zxid) {
                        outputs.push((p.zxid, out));
                    }
                }
            }
            self.applied = last;
            self.since_snapshot += chunk.len() as u64;
            for (zxid, out) in outputs {
                if let Some(reply) = self.waiters.remove(&zxid) {
                    let _ = reply.send(Ok(out));
                }
            }
            // A waiter at or below `last` not answered: its zxid is not in the history.
            self.drop_waiters_through(last);
        }
    }

    /// Every `snapshot_every` applied proposals: snapshot the state machine, compact the
    /// core's history and the WAL.
    async fn maybe_compact(&mut self) -> Result<(), RuntimeError> {
        let every = self.cfg.snapshot_every;
        if every == 0 || self.since_snapshot < every {
            return Ok(());
        }
        let zxid = self.applied;
        let data = self.sm.read().unwrap_or_else(|e| e.into_inner()).snapshot();
        match self.raw.compact(zxid, data.clone()) {
            Ok(()) => {}
            Err(ZabError::SnapshotInstallPending) => return Ok(()),
            Err(e) => {
                tracing::warn!(id = self.id, %zxid, error = %e, "compaction refused");
                self.since_snapshot = 0;
                return Ok(());
            }
        }
        let snap = Snapshot { zxid, data };
        on_blocking(&mut self.wal, move |wal| wal.save_snapshot(&snap, false)).await??;
        self.since_snapshot = 0;
        tracing::debug!(id = self.id, %zxid, "compacted history");
        Ok(())
    }
}
