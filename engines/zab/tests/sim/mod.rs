//! Deterministic simulation of a Zab ensemble built on `coordbench_zab`:
//! the Zab side of the shared `coordbench_sim` harness.
//!
//! One seed drives everything: a network that loses, duplicates, delays (now
//! and then by dozens of ticks) and reorders messages and is split by
//! partitions that come and go; crashes that lose everything not yet
//! "fsynced" (a Ready counts as durable only once the harness persisted it,
//! and the harness may hold a Ready while the node keeps stepping; a crash
//! may also tear a write, keeping the history changes of a Ready but not its
//! hard state); restarts from the simulated disk; random proposals, sync
//! reads and compactions. Invariants are checked after every event (see
//! `checker`). After the fault phase the network heals and the ensemble must
//! converge within a bounded number of ticks. The network, crash scheduling
//! and run loop live in `coordbench_sim`; this module says what Zab's
//! Readies, disk, clients and invariants are.

pub mod checker;
pub mod state_machine;

use std::collections::HashMap;

use coordbench_sim::{Core, Faults, Node, Sim, SimOptions, SimRng, Summary};
use coordbench_zab::{
    Config, HardState, Message, MessageBody, PersistedState, Proposal, RawNode, Ready, Role,
    Snapshot, SyncKind, Zxid,
};

use checker::{Checker, LeaderView};
use state_machine::AppliedLog;

pub const PING_TICKS: u32 = 2;
pub const SYNC_LIMIT: u32 = 10;
pub const INIT_LIMIT: u32 = 20;
/// A healed ensemble must establish a leader and converge within this many
/// ticks.
pub const CONVERGE_TICKS: u64 = 30 * INIT_LIMIT as u64;

#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub epochs: usize,
    pub delivered: usize,
    pub acked: usize,
    pub reads_served: u64,
    pub diffs: u64,
    pub truncs: u64,
    pub snaps: u64,
    pub snapshots_installed: u64,
    pub crashes: u64,
    pub messages: u64,
    pub converge_ticks: u64,
}

impl Summary for Stats {
    fn add(&mut self, s: &Stats) {
        self.epochs += s.epochs;
        self.delivered += s.delivered;
        self.acked += s.acked;
        self.reads_served += s.reads_served;
        self.diffs += s.diffs;
        self.truncs += s.truncs;
        self.snaps += s.snaps;
        self.snapshots_installed += s.snapshots_installed;
        self.crashes += s.crashes;
        self.messages += s.messages;
        self.converge_ticks = self.converge_ticks.max(s.converge_ticks);
    }

    fn summary(&self) -> String {
        format!(
            "{} epochs established, \
             {} proposals delivered, {} acked, {} sync reads, NEWLEADER {} DIFF / {} TRUNC / {} SNAP, \
             {} snapshots installed, {} crashes, {} messages, slowest convergence {} ticks",
            self.epochs,
            self.delivered,
            self.acked,
            self.reads_served,
            self.diffs,
            self.truncs,
            self.snaps,
            self.snapshots_installed,
            self.crashes,
            self.messages,
            self.converge_ticks
        )
    }
}

/// How hard one seed hits the ensemble; see [`Faults`].
const PROFILES: [Faults; 3] = [
    Faults {
        name: "network",
        crash: 2,
        power_failure: 0,
        crash_before_write: 5,
        crash_during_write: 5,
        partition: 8,
        heal: 15,
        max_loss: 200,
        max_dup: 100,
    },
    Faults {
        name: "balanced",
        crash: 5,
        power_failure: 0,
        crash_before_write: 20,
        crash_during_write: 15,
        partition: 5,
        heal: 20,
        max_loss: 100,
        max_dup: 50,
    },
    Faults {
        name: "crashy",
        crash: 8,
        power_failure: 1,
        crash_before_write: 40,
        crash_during_write: 40,
        partition: 3,
        heal: 25,
        max_loss: 50,
        max_dup: 30,
    },
];

#[derive(Default, Clone)]
pub struct Disk {
    hard_state: HardState,
    snapshot: Option<Snapshot>,
    entries: Vec<Proposal>,
}

impl Disk {
    fn write(&mut self, rd: &Ready) {
        self.write_history(rd);
        if let Some(hs) = &rd.hard_state {
            self.hard_state = hs.clone();
        }
    }

    fn write_history(&mut self, rd: &Ready) {
        if let Some(s) = &rd.snapshot {
            self.snapshot = Some(s.clone());
            self.entries.clear();
        }
        if let Some(t) = rd.truncate_after {
            self.entries.retain(|p| p.zxid <= t);
        }
        if let Some(first) = rd.entries.first() {
            self.entries.retain(|p| p.zxid < first.zxid);
            self.entries.extend(rd.entries.iter().cloned());
        }
    }

    fn compact(&mut self, snapshot: Snapshot) {
        self.entries.retain(|p| p.zxid > snapshot.zxid);
        self.snapshot = Some(snapshot);
    }

    fn load(&self) -> PersistedState {
        PersistedState {
            hard_state: self.hard_state.clone(),
            snapshot: self.snapshot.clone(),
            entries: self.entries.clone(),
        }
    }
}

struct Pending {
    node: u64,
    zxid: Zxid,
    data: Vec<u8>,
}

/// The Zab adapter's state within a [`Sim`].
/// Seeds from here on also model TCP's news of a crash: every live member hears at once
/// that its connection from the crashed one closed (`RawNode::peer_disconnected`). Seeds
/// below keep the older model, so pinned seeds keep their trajectories.
pub const DISCONNECT_HINT_SEEDS: u64 = 1_000_000;

pub struct Zab {
    cfg: Config,
    /// Deliver disconnect hints on crashes (see [`DISCONNECT_HINT_SEEDS`]).
    disconnect_hints: bool,
    checker: Checker,
    proposals: Vec<Pending>,
    next_cmd: u64,
    /// read ctx -> (node, zxid the read must reflect)
    reads: HashMap<u64, (u64, Zxid)>,
    next_ctx: u64,
    stats: Stats,
}

pub type Cluster = Sim<Zab>;

fn err<T>(msg: String) -> Result<T, String> {
    Err(msg)
}

impl Core for Zab {
    type Raw = RawNode;
    type Msg = Message;
    type Ready = Ready;
    type Disk = Disk;
    type Sm = AppliedLog;
    type Stats = Stats;

    const GROUP: &'static str = "ensemble";
    const PROFILES: [Faults; 3] = PROFILES;
    const CONVERGE_TICKS: u64 = CONVERGE_TICKS;

    fn new(opts: &SimOptions, rng: &mut SimRng) -> Self {
        let peers: Vec<u64> = (1..=opts.nodes).collect();
        let mut cfg = Config::new(1, peers);
        cfg.ping_ticks = PING_TICKS;
        cfg.sync_limit = SYNC_LIMIT;
        cfg.init_limit = INIT_LIMIT;
        cfg.finalize_ticks = rng.below(4) as u32;
        cfg.notify_ticks = 3 + rng.below(4) as u32;
        cfg.max_inflight_msgs = 1 + rng.below(6) as usize;
        cfg.max_proposals_per_msg = 1 + rng.below(4) as usize;
        Self {
            cfg,
            disconnect_hints: opts.seed >= DISCONNECT_HINT_SEEDS,
            checker: Checker::default(),
            proposals: Vec::new(),
            next_cmd: 0,
            reads: HashMap::new(),
            next_ctx: 0,
            stats: Stats::default(),
        }
    }

    fn describe_config(&self) -> String {
        format!(
            "finalize {} notify {} inflight {} batch {}",
            self.cfg.finalize_ticks,
            self.cfg.notify_ticks,
            self.cfg.max_inflight_msgs,
            self.cfg.max_proposals_per_msg
        )
    }

    fn boot(sim: &Cluster, id: u64, incarnation: u64, disk: &Disk) -> Result<RawNode, String> {
        let mut cfg = sim.core.cfg.clone();
        cfg.id = id;
        cfg.seed = sim.node_seed(id, incarnation);
        RawNode::new(cfg, disk.load()).map_err(|e| e.to_string())
    }

    fn recover_sm(disk: &Disk) -> Result<AppliedLog, String> {
        match &disk.snapshot {
            Some(s) => AppliedLog::decode(&s.data),
            None => Ok(AppliedLog::default()),
        }
    }

    fn sm_position(sm: &AppliedLog) -> String {
        sm.last_zxid().to_string()
    }

    fn is_leader(raw: &RawNode) -> bool {
        raw.status().is_established_leader()
    }

    fn describe_node(n: &Node<Self>) -> String {
        let Some(r) = &n.raw else {
            return String::new();
        };
        let st = r.status();
        format!(
            "[{} {:?}/{:?} lead {:?} round {} acc {} cur {} last {} commit {} applied {} snap {} pending {}] ",
            n.id,
            st.role,
            st.phase,
            st.leader,
            st.round,
            st.accepted_epoch,
            st.current_epoch,
            st.last_zxid,
            st.commit,
            st.applied,
            st.snapshot_zxid,
            n.pending.len()
        )
    }

    fn tick(raw: &mut RawNode) {
        raw.tick();
    }

    fn step(raw: &mut RawNode, m: Message) -> Result<(), String> {
        raw.step(m).map_err(|e| e.to_string())
    }

    fn endpoints(m: &Message) -> (u64, u64) {
        (m.from, m.to)
    }

    /// Now and then a message arrives very late, from a session or an
    /// attempt that has long moved on.
    fn delay(rng: &mut SimRng) -> u64 {
        match rng.below(1000) {
            0..=699 => 0,
            700..=899 => 1,
            900..=989 => 2 + rng.below(4),
            _ => 10 + rng.below(40),
        }
    }

    fn on_send(sim: &mut Cluster, m: &Message) {
        if let MessageBody::NewLeader { sync, .. } = &m.body {
            match sync {
                SyncKind::Diff { .. } => sim.core.stats.diffs += 1,
                SyncKind::Trunc { .. } => sim.core.stats.truncs += 1,
                SyncKind::Snap(_) => sim.core.stats.snaps += 1,
            }
        }
    }

    fn client_ops(sim: &mut Cluster) -> Result<(), String> {
        if sim.rng.chance(300) {
            let n = 1 + sim.rng.below(3);
            for _ in 0..n {
                let target = sim.client_target();
                propose(sim, target)?;
            }
        }
        if sim.rng.chance(100) {
            // Nodes that believe they lead are the interesting ones: a
            // deposed leader must not serve stale reads.
            let target = sim.client_target();
            read(sim, target);
        }
        if sim.rng.chance(30) {
            if let Some(id) = sim.rng.pick(&sim.up_ids()) {
                compact(sim, id)?;
            }
        }
        Ok(())
    }

    fn on_crash(sim: &mut Cluster, id: u64) {
        let torn = sim.rng.chance(300);
        // A torn write: the runtime may persist a Ready's history changes
        // before its hard state (the contract allows it), and crash between.
        let node = sim.node(id);
        if let Some((_, rd)) = node.pending.front().filter(|_| torn) {
            node.disk.write_history(rd);
        }
        sim.core.proposals.retain(|p| p.node != id);
        sim.core.reads.retain(|_, (n, _)| *n != id);
        if sim.core.disconnect_hints {
            for n in sim.nodes.iter_mut().filter(|n| n.id != id) {
                if let Some(r) = n.raw.as_mut() {
                    r.peer_disconnected(id);
                }
            }
            sim.trace(|| format!("peers of node {id} hear its connections close"));
        }
    }

    fn on_restart(sim: &mut Cluster, id: u64) -> Result<(), String> {
        sim.core
            .checker
            .on_restore(id, &sim.nodes[id as usize - 1].sm)
    }

    fn take_ready(raw: &mut RawNode) -> Option<Ready> {
        raw.has_ready().then(|| raw.ready())
    }

    fn ready_is_empty(rd: &Ready) -> bool {
        rd.is_empty()
    }

    fn on_ready(sim: &mut Cluster, id: u64, rd: &mut Ready) -> Result<Vec<Message>, String> {
        if let Some(first) = rd.entries.first() {
            // The point of the history right before the new proposals.
            if let Some(r) = sim.nodes[id as usize - 1].raw.as_ref() {
                let st = r.status();
                let ps = r.proposals();
                let k = ps.partition_point(|p| p.zxid < first.zxid);
                let prev = if k == 0 {
                    st.snapshot_zxid
                } else {
                    ps[k - 1].zxid
                };
                sim.core.checker.on_entries(id, prev, &rd.entries)?;
            }
        }
        if let Some(ss) = &rd.soft_state {
            sim.trace(|| format!("node {id} soft state {ss:?}"));
        }
        apply_and_read(sim, id, rd)?;
        Ok(std::mem::take(&mut rd.messages))
    }

    /// Readies that carry an acknowledgement or an epoch.
    fn promises(rd: &Ready) -> bool {
        rd.hard_state.is_some() || !rd.persisted_messages.is_empty()
    }

    fn persist(sim: &mut Cluster, id: u64, rd: Ready) -> Result<(), String> {
        persist(sim, id, rd)
    }

    /// One established leader per epoch, completeness and commit
    /// bookkeeping.
    fn observe(sim: &mut Cluster) -> Result<(), String> {
        let views: Vec<LeaderView<'_>> = sim
            .nodes
            .iter()
            .filter_map(|n| {
                let r = n.raw.as_ref()?;
                let st = r.status();
                (st.role == Role::Leading && st.is_established_leader()).then_some(LeaderView {
                    id: n.id,
                    epoch: st.current_epoch,
                    node: r,
                })
            })
            .collect();
        let checker = &mut sim.core.checker;
        for v in &views {
            checker.on_established(v.id, v.epoch, v.node)?;
        }
        for v in &views {
            let commit = v.node.status().commit;
            checker.on_leader_commit(v, commit, &views)?;
        }
        Ok(())
    }

    fn converged(sim: &Cluster, leader: u64) -> bool {
        let Some(l) = sim.nodes[leader as usize - 1].raw.as_ref() else {
            return false;
        };
        let ls = l.status();
        if ls.commit != ls.last_zxid {
            return false;
        }
        sim.nodes.iter().all(|n| {
            n.raw.as_ref().is_some_and(|r| {
                let st = r.status();
                st.phase == coordbench_zab::Phase::Broadcast
                    && st.current_epoch == ls.current_epoch
                    && st.leader == Some(leader)
                    && st.applied == ls.last_zxid
                    && n.sm.last_zxid() == ls.last_zxid
            })
        })
    }

    fn finish(sim: Cluster, converge_ticks: u64) -> Result<Stats, String> {
        let mut core = sim.core;
        for n in &sim.nodes {
            core.checker.check_acked(n.id, &n.sm)?;
        }
        core.stats.converge_ticks = converge_ticks;
        core.stats.crashes = sim.crashes;
        core.stats.messages = sim.delivered;
        core.stats.epochs = core.checker.epochs();
        core.stats.delivered = core.checker.delivered_len();
        core.stats.acked = core.checker.acked.len();
        Ok(core.stats)
    }
}

fn propose(sim: &mut Cluster, id: u64) -> Result<(), String> {
    sim.core.next_cmd += 1;
    let data = format!("s{}-c{}", sim.opts.seed, sim.core.next_cmd).into_bytes();
    let Some(r) = sim.node(id).raw.as_mut() else {
        return Ok(());
    };
    if let Ok(zxid) = r.propose(data.clone()) {
        sim.trace(|| format!("node {id} proposed {zxid}"));
        sim.core.checker.on_propose(id, zxid, &data)?;
        sim.core.proposals.push(Pending {
            node: id,
            zxid,
            data,
        });
    }
    Zab::observe(sim)
}

fn read(sim: &mut Cluster, id: u64) {
    sim.core.next_ctx += 1;
    let ctx = sim.core.next_ctx;
    let must_see = sim.core.checker.committed_max;
    if let Some(r) = sim.node(id).raw.as_mut() {
        if r.sync_read(ctx).is_ok() {
            sim.core.reads.insert(ctx, (id, must_see));
        }
    }
}

fn compact(sim: &mut Cluster, id: u64) -> Result<(), String> {
    let back = sim.rng.below(4) as usize;
    let node = sim.node(id);
    let Some(r) = node.raw.as_mut() else {
        return Ok(());
    };
    let st = r.status();
    let Some(upto) = node.sm.len().checked_sub(back).filter(|&k| k > 0) else {
        return Ok(());
    };
    let zxid = node.sm.items[upto - 1].0;
    if zxid <= st.snapshot_zxid || zxid > st.applied {
        return Ok(());
    }
    let data = node.sm.encode(upto);
    match r.compact(zxid, data.clone()) {
        Ok(()) => {
            node.disk.compact(Snapshot { zxid, data });
            sim.trace(|| format!("node {id} compacted to {zxid}"));
            Ok(())
        }
        // Refused while installing a received snapshot: fine.
        Err(coordbench_zab::Error::SnapshotInstallPending) => Ok(()),
        Err(e) => err(format!("node {id} compact({zxid}) failed: {e}")),
    }
}

/// What the runtime does with a `Ready` as soon as it takes it, before its write is
/// durable: apply the committed entries (the core hands out only entries already durable
/// here), tell the core, answer the reads.
fn apply_and_read(sim: &mut Cluster, id: u64, rd: &mut Ready) -> Result<(), String> {
    let committed = std::mem::take(&mut rd.committed_entries);
    for p in &committed {
        let node = &mut sim.nodes[id as usize - 1];
        node.sm.apply(p).map_err(|m| format!("node {id}: {m}"))?;
        let core = &mut sim.core;
        core.checker.on_apply(id, &node.sm)?;
        // A proposal is acknowledged when the leader that accepted it
        // delivers it.
        let mut acked = None;
        core.proposals.retain(|q| {
            if q.node != id || q.zxid > p.zxid {
                return true;
            }
            if q.zxid == p.zxid && q.data == p.data {
                acked = Some(q.data.clone());
            }
            false
        });
        if let Some(data) = acked {
            core.checker.ack(p.zxid, data);
        }
    }
    let applied = sim.node(id).sm.last_zxid();
    for rs in &rd.read_states {
        let Some((node, must_see)) = sim.core.reads.remove(&rs.ctx) else {
            return err(format!("node {id} answered unknown read {}", rs.ctx));
        };
        if node != id || rs.zxid < must_see || applied < rs.zxid {
            return err(format!(
                "linearizability: sync read {} on node {id} (issued at {node}) at {} \
                 must see {must_see}, applied {applied}",
                rs.ctx, rs.zxid
            ));
        }
        sim.core.stats.reads_served += 1;
    }
    for ctx in &rd.dropped_reads {
        sim.core.reads.remove(ctx);
    }
    rd.read_states.clear();
    rd.dropped_reads.clear();
    if let (Some(last), Some(r)) = (committed.last(), sim.node(id).raw.as_mut()) {
        let last = last.zxid;
        r.applied_to(last);
    }
    Ok(())
}

/// The simulated fsync, then everything allowed after it.
fn persist(sim: &mut Cluster, id: u64, mut rd: Ready) -> Result<(), String> {
    sim.node(id).disk.write(&rd);
    if let Some(s) = &rd.snapshot {
        let sm = AppliedLog::decode(&s.data)?;
        if sm.last_zxid() != s.zxid {
            return err(format!(
                "snapshot at {} holds items up to {}",
                s.zxid,
                sm.last_zxid()
            ));
        }
        sim.core.checker.on_restore(id, &sm)?;
        sim.node(id).sm = sm;
        sim.core.stats.snapshots_installed += 1;
        sim.trace(|| format!("node {id} installed snapshot at {}", s.zxid));
    }
    let msgs = std::mem::take(&mut rd.persisted_messages);
    sim.send(msgs);
    if let Some(r) = sim.node(id).raw.as_mut() {
        r.advance(rd);
    }
    Zab::observe(sim)
}

/// Runs one seed end to end.
pub fn run(opts: SimOptions) -> Result<Stats, String> {
    Cluster::new(opts)?.run()
}
