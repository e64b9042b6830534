//! Deterministic simulation of a Raft cluster built on `coordbench_raft`:
//! the Raft side of the shared `coordbench_sim` harness.
//!
//! One seed drives everything: a network that loses, duplicates, delays and
//! reorders messages and is split by partitions that come and go; crashes
//! that lose everything not yet "fsynced" (a Ready counts as durable only
//! once the harness persisted it, and the harness may hold a Ready while the
//! node keeps stepping); restarts from the simulated disk; random proposals,
//! reads, compactions and leadership transfers. Invariants are checked after
//! every event (see `checker`). After the fault phase the network heals and
//! the cluster must converge within a bounded number of ticks. The network,
//! crash scheduling and run loop live in `coordbench_sim`; this module says
//! what Raft's Readies, disk, clients and invariants are.

pub mod checker;
pub mod leases;
pub mod state_machine;

use std::collections::HashMap;

use coordbench_raft::{
    Config, Entry, EntryKind, HardState, Message, PersistedState, RawNode, Ready, Role, Snapshot,
};
use coordbench_sim::{Core, Faults, Node, Sim, SimOptions, SimRng, Summary};

use checker::{Checker, LeaderView};
use leases::{LeaseStats, Leases};
use state_machine::AppliedLog;

pub const HEARTBEAT_TICKS: u32 = 2;
pub const ELECTION_MIN: u32 = 10;
pub const ELECTION_MAX: u32 = 20;
/// A healed cluster must elect a leader and converge within this many ticks.
pub const CONVERGE_TICKS: u64 = 40 * ELECTION_MAX as u64;

#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub elections: usize,
    pub committed: u64,
    pub acked: usize,
    pub reads_served: u64,
    pub snapshots_installed: u64,
    pub crashes: u64,
    pub transfers: u64,
    pub delivered: u64,
    pub converge_ticks: u64,
    pub leases: LeaseStats,
}

impl Summary for Stats {
    fn add(&mut self, s: &Stats) {
        self.elections += s.elections;
        self.committed += s.committed;
        self.acked += s.acked;
        self.reads_served += s.reads_served;
        self.snapshots_installed += s.snapshots_installed;
        self.crashes += s.crashes;
        self.transfers += s.transfers;
        self.delivered += s.delivered;
        self.converge_ticks = self.converge_ticks.max(s.converge_ticks);
        self.leases.add(&s.leases);
    }

    fn summary(&self) -> String {
        let l = &self.leases;
        let leases = if l.granted == 0 {
            String::new()
        } else {
            format!(
                "; leases: {} granted, {} renewals ({} across leader changes), {} checkpoint \
                 clears, {} checkpoints, {} revoked ({} that their clients kept alive, lost \
                 to faults), {} promotions",
                l.granted,
                l.renewed,
                l.renewed_across_leaders,
                l.clears,
                l.checkpoints,
                l.revoked,
                l.lost,
                l.promotions
            )
        };
        format!(
            "{} leader terms, {} entries committed, \
             {} writes acked, {} reads, {} snapshots installed, {} crashes, {} transfers, \
             {} messages delivered, slowest convergence {} ticks{leases}",
            self.elections,
            self.committed,
            self.acked,
            self.reads_served,
            self.snapshots_installed,
            self.crashes,
            self.transfers,
            self.delivered,
            self.converge_ticks
        )
    }
}

/// How hard one seed hits the cluster; see [`Faults`].
const PROFILES: [Faults; 3] = [
    Faults {
        name: "network",
        crash: 2,
        power_failure: 0,
        crash_before_write: 5,
        crash_during_write: 5,
        partition: 10,
        heal: 20,
        max_loss: 200,
        max_dup: 100,
    },
    Faults {
        name: "balanced",
        crash: 5,
        power_failure: 0,
        crash_before_write: 20,
        crash_during_write: 15,
        partition: 6,
        heal: 25,
        max_loss: 100,
        max_dup: 50,
    },
    Faults {
        name: "crashy",
        crash: 8,
        power_failure: 1,
        crash_before_write: 40,
        crash_during_write: 40,
        partition: 4,
        heal: 30,
        max_loss: 50,
        max_dup: 30,
    },
];

#[derive(Default, Clone)]
pub struct Disk {
    hard_state: HardState,
    snapshot: Option<Snapshot>,
    entries: Vec<Entry>,
}

impl Disk {
    fn write(&mut self, rd: &Ready) {
        if let Some(s) = &rd.snapshot {
            self.snapshot = Some(s.clone());
            self.entries.clear();
        }
        if let Some(first) = rd.entries.first() {
            self.entries.retain(|e| e.index < first.index);
            self.entries.extend(rd.entries.iter().cloned());
        }
        if let Some(hs) = &rd.hard_state {
            self.hard_state = hs.clone();
        }
    }

    fn compact(&mut self, snapshot: Snapshot) {
        self.entries.retain(|e| e.index > snapshot.index);
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

struct Proposal {
    node: u64,
    term: u64,
    index: u64,
    data: Vec<u8>,
}

/// The Raft adapter's state within a [`Sim`].
pub struct Raft {
    cfg: Config,
    checker: Checker,
    proposals: Vec<Proposal>,
    next_cmd: u64,
    /// read ctx -> (node, index the read must reflect)
    reads: HashMap<u64, (u64, u64)>,
    next_ctx: u64,
    stats: Stats,
    /// The lease layer, in lease runs only ([`run_leases`]).
    leases: Option<Leases>,
}

pub type Cluster = Sim<Raft>;

fn err<T>(msg: String) -> Result<T, String> {
    Err(msg)
}

impl Core for Raft {
    type Raw = RawNode;
    type Msg = Message;
    type Ready = Ready;
    type Disk = Disk;
    type Sm = AppliedLog;
    type Stats = Stats;

    const GROUP: &'static str = "cluster";
    const PROFILES: [Faults; 3] = PROFILES;
    const CONVERGE_TICKS: u64 = CONVERGE_TICKS;

    fn new(opts: &SimOptions, rng: &mut SimRng) -> Self {
        let peers: Vec<u64> = (1..=opts.nodes).collect();
        let mut cfg = Config::new(1, peers);
        cfg.heartbeat_ticks = HEARTBEAT_TICKS;
        cfg.election_ticks_min = ELECTION_MIN;
        cfg.election_ticks_max = ELECTION_MAX;
        // Cover all four feature combinations across seeds.
        cfg.pre_vote = opts.seed % 2 == 0;
        cfg.check_quorum = (opts.seed / 2) % 2 == 0;
        cfg.max_inflight_msgs = 1 + rng.below(6) as usize;
        cfg.max_entries_per_msg = 1 + rng.below(4) as usize;
        Self {
            cfg,
            checker: Checker::default(),
            proposals: Vec::new(),
            next_cmd: 0,
            reads: HashMap::new(),
            next_ctx: 0,
            stats: Stats::default(),
            leases: None,
        }
    }

    fn describe_config(&self) -> String {
        format!(
            "pre_vote {} check_quorum {} inflight {} batch {}",
            self.cfg.pre_vote,
            self.cfg.check_quorum,
            self.cfg.max_inflight_msgs,
            self.cfg.max_entries_per_msg
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
        sm.len().to_string()
    }

    fn is_leader(raw: &RawNode) -> bool {
        raw.status().role == Role::Leader
    }

    fn describe_node(n: &Node<Self>) -> String {
        let Some(r) = &n.raw else {
            return String::new();
        };
        let st = r.status();
        format!(
            "[{} {:?} t{} lead {:?} commit {} applied {} last {} snap {}] ",
            n.id,
            st.role,
            st.term,
            st.leader,
            st.commit,
            st.applied,
            st.last_index,
            st.snapshot_index
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

    fn delay(rng: &mut SimRng) -> u64 {
        match rng.below(100) {
            0..=69 => 0,
            70..=89 => 1,
            _ => 2 + rng.below(4),
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
        if sim.rng.chance(60) {
            let target = sim.client_target();
            read(sim, target);
        }
        if sim.rng.chance(30) {
            if let Some(id) = sim.rng.pick(&sim.up_ids()) {
                compact(sim, id)?;
            }
        }
        if sim.rng.chance(8) {
            if let Some(l) = sim.rng.pick(&sim.leader_ids()) {
                let to = 1 + sim.rng.below(sim.opts.nodes);
                if let Some(r) = sim.node(l).raw.as_mut() {
                    if r.transfer_leader(to).is_ok() {
                        sim.core.stats.transfers += 1;
                        sim.trace(|| format!("transfer leadership {l} -> {to}"));
                    }
                }
                Self::observe(sim)?;
            }
        }
        if sim.core.leases.is_some() {
            leases::client_ops(sim)?;
        }
        Ok(())
    }

    fn background(sim: &mut Cluster) -> Result<(), String> {
        if sim.core.leases.is_some() {
            leases::background(sim)?;
        }
        Ok(())
    }

    fn on_heal(sim: &mut Cluster) {
        let now = sim.now * leases::MS_PER_TICK;
        if let Some(l) = sim.core.leases.as_mut() {
            l.on_heal(now);
        }
    }

    fn on_crash(sim: &mut Cluster, id: u64) {
        sim.core.proposals.retain(|p| p.node != id);
        sim.core.reads.retain(|_, (n, _)| *n != id);
    }

    fn on_restart(sim: &mut Cluster, id: u64) -> Result<(), String> {
        let sm = &sim.nodes[id as usize - 1].sm;
        if let Some(l) = sim.core.leases.as_mut() {
            l.reset_node(id, sm);
        }
        sim.core.checker.on_restore(id, sm)
    }

    fn take_ready(raw: &mut RawNode) -> Option<Ready> {
        raw.has_ready().then(|| raw.ready())
    }

    fn ready_is_empty(rd: &Ready) -> bool {
        rd.is_empty()
    }

    fn on_ready(sim: &mut Cluster, id: u64, rd: &mut Ready) -> Result<Vec<Message>, String> {
        if let Some(first) = rd.entries.first() {
            let r = sim.nodes[id as usize - 1].raw.as_ref();
            let prev = r.and_then(|r| r.term_at(first.index - 1));
            sim.core.checker.on_entries(id, prev, &rd.entries)?;
        }
        if let Some(ss) = &rd.soft_state {
            sim.trace(|| format!("node {id} soft state {ss:?}"));
        }
        apply_and_read(sim, id, rd)?;
        Ok(std::mem::take(&mut rd.messages))
    }

    /// Readies that carry a vote or an acknowledgement.
    fn promises(rd: &Ready) -> bool {
        rd.hard_state.is_some() || !rd.persisted_messages.is_empty()
    }

    fn persist(sim: &mut Cluster, id: u64, rd: Ready) -> Result<(), String> {
        persist(sim, id, rd)
    }

    /// Election safety, leader completeness and commit bookkeeping.
    fn observe(sim: &mut Cluster) -> Result<(), String> {
        let views: Vec<LeaderView<'_>> = sim
            .nodes
            .iter()
            .filter_map(|n| {
                let r = n.raw.as_ref()?;
                let st = r.status();
                (st.role == Role::Leader).then_some(LeaderView {
                    id: n.id,
                    term: st.term,
                    node: r,
                })
            })
            .collect();
        let checker = &mut sim.core.checker;
        for v in &views {
            checker.on_leader(v.id, v.term, v.node)?;
        }
        for v in &views {
            let commit = v.node.status().commit;
            checker.on_leader_commit(v.id, v.term, commit, v.node, &views)?;
        }
        Ok(())
    }

    fn converged(sim: &Cluster, leader: u64) -> bool {
        let Some(l) = sim.nodes[leader as usize - 1].raw.as_ref() else {
            return false;
        };
        let ls = l.status();
        if ls.commit != ls.last_index {
            return false;
        }
        let applied = sim.nodes.iter().all(|n| {
            n.raw.as_ref().is_some_and(|r| {
                let st = r.status();
                st.term == ls.term
                    && st.leader == Some(leader)
                    && st.applied == ls.last_index
                    && n.sm.len() == ls.last_index
            })
        });
        applied && sim.core.leases.as_ref().is_none_or(Leases::settled)
    }

    fn finish(sim: Cluster, converge_ticks: u64) -> Result<Stats, String> {
        let mut core = sim.core;
        for n in &sim.nodes {
            core.checker.check_acked(n.id, &n.sm)?;
        }
        core.stats.converge_ticks = converge_ticks;
        core.stats.crashes = sim.crashes;
        core.stats.delivered = sim.delivered;
        core.stats.elections = core.checker.elections();
        core.stats.committed = core.checker.committed_max;
        core.stats.acked = core.checker.acked.len();
        if let Some(l) = &core.leases {
            l.finish()?;
            core.stats.leases = l.stats.clone();
        }
        Ok(core.stats)
    }
}

fn propose(sim: &mut Cluster, id: u64) -> Result<(), String> {
    sim.core.next_cmd += 1;
    let data = format!("s{}-c{}", sim.opts.seed, sim.core.next_cmd).into_bytes();
    propose_data(sim, id, data).map(|_| ())
}

/// Proposes `data` on node `id`; the index it went to, if the node accepted it.
pub fn propose_data(sim: &mut Cluster, id: u64, data: Vec<u8>) -> Result<Option<u64>, String> {
    let Some(r) = sim.node(id).raw.as_mut() else {
        return Ok(None);
    };
    let accepted = r.propose(data.clone()).ok();
    if let Some(index) = accepted {
        let term = r.status().term;
        sim.trace(|| format!("node {id} accepted proposal at {index} term {term}"));
        sim.core.proposals.push(Proposal {
            node: id,
            term,
            index,
            data,
        });
    }
    Raft::observe(sim)?;
    Ok(accepted)
}

/// The kv commands node `id` proposed in its current term that it has not applied yet (one
/// of an earlier term was applied or dropped, as far as the runtime is concerned: its
/// waiter failed when the leadership changed).
pub fn proposed(sim: &Cluster, id: u64) -> Vec<coordbench_kv::Command> {
    let Some(term) = sim.nodes[id as usize - 1]
        .raw
        .as_ref()
        .map(|r| r.status().term)
    else {
        return Vec::new();
    };
    sim.core
        .proposals
        .iter()
        .filter(|p| p.node == id && p.term == term)
        .filter_map(|p| coordbench_kv::Command::decode(&p.data).ok())
        .collect()
}

fn read(sim: &mut Cluster, id: u64) {
    read_at(sim, id);
}

/// Starts a linearizable read on node `id`; its context, if the node took it.
pub fn read_at(sim: &mut Cluster, id: u64) -> Option<u64> {
    sim.core.next_ctx += 1;
    let ctx = sim.core.next_ctx;
    let must_see = sim.core.checker.committed_max;
    let r = sim.node(id).raw.as_mut()?;
    r.read_index(ctx).ok()?;
    sim.core.reads.insert(ctx, (id, must_see));
    Some(ctx)
}

fn compact(sim: &mut Cluster, id: u64) -> Result<(), String> {
    let back = sim.rng.below(4);
    let node = sim.node(id);
    let Some(r) = node.raw.as_mut() else {
        return Ok(());
    };
    let st = r.status();
    let index = st.applied.saturating_sub(back);
    if index <= st.snapshot_index {
        return Ok(());
    }
    let data = coordbench_raft::Bytes::from(node.sm.encode(index));
    match r.compact(index, data.clone()) {
        Ok(()) => {
            let term = r.term_at(index).ok_or("no term at compaction index")?;
            node.disk.compact(Snapshot { index, term, data });
            sim.trace(|| format!("node {id} compacted to {index}"));
            Ok(())
        }
        // Refused while installing a received snapshot: fine.
        Err(coordbench_raft::Error::SnapshotInstallPending) => Ok(()),
        Err(e) => err(format!("node {id} compact({index}) failed: {e}")),
    }
}

/// What the runtime does with a `Ready` as soon as it takes it, before its write is
/// durable: apply the committed entries (the core hands out only entries already durable
/// here), tell the core, answer the reads.
fn apply_and_read(sim: &mut Cluster, id: u64, rd: &mut Ready) -> Result<(), String> {
    let committed = std::mem::take(&mut rd.committed_entries);
    for e in &committed {
        let node = &mut sim.nodes[id as usize - 1];
        node.sm.apply(e).map_err(|m| format!("node {id}: {m}"))?;
        sim.core.checker.on_apply(id, &node.sm)?;
        if sim.core.leases.is_some() {
            leases::on_apply(sim, id, e)?;
        }
        let core = &mut sim.core;
        // A proposal is acknowledged when the node that accepted it
        // applies it at the promised index and term.
        let mut acked = None;
        core.proposals.retain(|p| {
            if p.node != id || p.index > e.index {
                return true;
            }
            if p.index == e.index && p.term == e.term && e.kind == EntryKind::Normal(p.data.clone())
            {
                acked = Some(p.data.clone());
            }
            false
        });
        if let Some(data) = acked {
            if core.leases.is_some() {
                leases::on_acked(sim, &data);
            }
            sim.core.checker.ack(e.index, data);
        }
    }
    let applied = sim.node(id).sm.len();
    for rs in &rd.read_states {
        let Some((node, must_see)) = sim.core.reads.remove(&rs.ctx) else {
            return err(format!("node {id} answered unknown read {}", rs.ctx));
        };
        if node != id || rs.index < must_see || applied < rs.index {
            return err(format!(
                "linearizability: read {} on node {id} (issued at {node}) at index {} \
                 must see {must_see}, applied {applied}",
                rs.ctx, rs.index
            ));
        }
        sim.core.stats.reads_served += 1;
        if sim.core.leases.is_some() {
            leases::on_read(sim, id, rs.ctx)?;
        }
    }
    for ctx in &rd.dropped_reads {
        sim.core.reads.remove(ctx);
    }
    rd.read_states.clear();
    rd.dropped_reads.clear();
    if let (Some(last), Some(r)) = (committed.last(), sim.node(id).raw.as_mut()) {
        let last = last.index;
        r.applied_to(last);
    }
    Ok(())
}

/// The simulated fsync, then everything allowed after it.
fn persist(sim: &mut Cluster, id: u64, mut rd: Ready) -> Result<(), String> {
    sim.node(id).disk.write(&rd);
    if let Some(s) = &rd.snapshot {
        let sm = AppliedLog::decode(&s.data)?;
        if sm.len() != s.index {
            return err(format!("snapshot at {} holds {} items", s.index, sm.len()));
        }
        sim.core.checker.on_restore(id, &sm)?;
        if let Some(l) = sim.core.leases.as_mut() {
            l.reset_node(id, &sm);
        }
        sim.node(id).sm = sm;
        sim.core.stats.snapshots_installed += 1;
        sim.trace(|| format!("node {id} installed snapshot at {}", s.index));
    }
    let msgs = std::mem::take(&mut rd.persisted_messages);
    sim.send(msgs);
    if let Some(r) = sim.node(id).raw.as_mut() {
        r.advance(rd);
    }
    Raft::observe(sim)
}

/// Runs one seed end to end.
pub fn run(opts: SimOptions) -> Result<Stats, String> {
    Cluster::new(opts)?.run()
}

/// Runs one seed end to end with leases on top (see `leases`).
pub fn run_leases(opts: SimOptions) -> Result<Stats, String> {
    let mut sim = Cluster::new(opts)?;
    sim.core.leases = Some(Leases::new(sim.opts.nodes));
    sim.run()
}
