//! Deterministic simulation of a Raft cluster built on `coordbench_raft`.
//!
//! One seed drives everything: a network that loses, duplicates, delays and
//! reorders messages and is split by partitions that come and go; crashes
//! that lose everything not yet "fsynced" (a Ready counts as durable only
//! once the harness persisted it, and the harness may hold a Ready while the
//! node keeps stepping); restarts from the simulated disk; random proposals,
//! reads, compactions and leadership transfers. Invariants are checked after
//! every event (see `checker`). After the fault phase the network heals and
//! the cluster must converge within a bounded number of ticks.

pub mod checker;
pub mod rng;
pub mod state_machine;

use std::collections::{HashMap, VecDeque};

use coordbench_raft::{
    Config, Entry, EntryKind, HardState, Message, PersistedState, RawNode, Ready, Role, Snapshot,
};

use checker::{Checker, LeaderView};
use rng::SimRng;
use state_machine::AppliedLog;

pub const HEARTBEAT_TICKS: u32 = 2;
pub const ELECTION_MIN: u32 = 10;
pub const ELECTION_MAX: u32 = 20;
/// A healed cluster must elect a leader and converge within this many ticks.
pub const CONVERGE_TICKS: u64 = 40 * ELECTION_MAX as u64;

#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    pub nodes: u64,
    /// Ticks of the fault phase.
    pub rounds: u64,
    /// Print every event to stderr.
    pub trace: bool,
}

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
}

/// How hard one seed hits the cluster (probabilities in per mille). Seeds
/// rotate through profiles so that some runs make long stretches of progress
/// over a bad network while others crash nodes at the worst moments.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    pub name: &'static str,
    /// Per tick: crash one node.
    pub crash: u64,
    /// Per tick: crash every node at once.
    pub power_failure: u64,
    /// Per Ready that promises durability (vote, ack): crash right after
    /// its messages went out, before the write.
    pub crash_before_write: u64,
    /// Per completion of a slow write: crash instead.
    pub crash_during_write: u64,
    /// Per tick: split the network / heal it.
    pub partition: u64,
    pub heal: u64,
    /// Upper bounds of the per-seed message loss and duplication rates.
    pub max_loss: u64,
    pub max_dup: u64,
}

pub const PROFILES: [Faults; 3] = [
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
struct Disk {
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

struct Node {
    id: u64,
    raw: Option<RawNode>,
    disk: Disk,
    /// Readies taken from the node but not yet persisted (slow fsyncs,
    /// completed in order), each with the tick before which it cannot finish.
    pending: VecDeque<(u64, Ready)>,
    sm: AppliedLog,
    incarnation: u64,
    /// While down: the tick at which the node comes back.
    down_until: u64,
}

struct Proposal {
    node: u64,
    term: u64,
    index: u64,
    data: Vec<u8>,
}

pub struct Cluster {
    opts: SimOptions,
    rng: SimRng,
    now: u64,
    nodes: Vec<Node>,
    cfg: Config,
    /// (deliver at tick, message)
    net: Vec<(u64, Message)>,
    group: Vec<u8>,
    faults: Faults,
    loss: u64,
    dup: u64,
    checker: Checker,
    proposals: Vec<Proposal>,
    next_cmd: u64,
    /// read ctx -> (node, index the read must reflect)
    reads: HashMap<u64, (u64, u64)>,
    next_ctx: u64,
    stats: Stats,
}

fn err<T>(msg: String) -> Result<T, String> {
    Err(msg)
}

impl Cluster {
    pub fn new(opts: SimOptions) -> Result<Self, String> {
        let mut rng = SimRng::new(opts.seed);
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
        let faults = PROFILES[(opts.seed % 3) as usize];
        let loss = rng.below(faults.max_loss + 1);
        let dup = rng.below(faults.max_dup + 1);
        let mut c = Self {
            nodes: Vec::new(),
            group: vec![0; opts.nodes as usize],
            net: Vec::new(),
            now: 0,
            cfg,
            faults,
            loss,
            dup,
            checker: Checker::default(),
            proposals: Vec::new(),
            next_cmd: 0,
            reads: HashMap::new(),
            next_ctx: 0,
            stats: Stats::default(),
            rng,
            opts,
        };
        for id in 1..=c.opts.nodes {
            let raw = RawNode::new(c.node_config(id, 0), PersistedState::default())
                .map_err(|e| e.to_string())?;
            c.nodes.push(Node {
                id,
                raw: Some(raw),
                disk: Disk::default(),
                pending: VecDeque::new(),
                sm: AppliedLog::default(),
                incarnation: 0,
                down_until: 0,
            });
        }
        c.trace(|| {
            format!(
                "seed {} nodes {} faults {} pre_vote {} check_quorum {} inflight {} batch {} loss {}‰ dup {}‰",
                c.opts.seed,
                c.opts.nodes,
                c.faults.name,
                c.cfg.pre_vote,
                c.cfg.check_quorum,
                c.cfg.max_inflight_msgs,
                c.cfg.max_entries_per_msg,
                c.loss,
                c.dup
            )
        });
        Ok(c)
    }

    fn node_config(&self, id: u64, incarnation: u64) -> Config {
        let mut cfg = self.cfg.clone();
        cfg.id = id;
        cfg.seed = self.opts.seed.wrapping_mul(1_000_003) ^ (id << 40) ^ incarnation;
        cfg
    }

    fn trace(&self, f: impl FnOnce() -> String) {
        if self.opts.trace {
            eprintln!("[t={}] {}", self.now, f());
        }
    }

    fn node(&mut self, id: u64) -> &mut Node {
        &mut self.nodes[id as usize - 1]
    }

    fn ids(&self) -> Vec<u64> {
        (1..=self.opts.nodes).collect()
    }

    fn up_ids(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|n| n.raw.is_some())
            .map(|n| n.id)
            .collect()
    }

    fn leader_ids(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|n| {
                n.raw
                    .as_ref()
                    .is_some_and(|r| r.status().role == Role::Leader)
            })
            .map(|n| n.id)
            .collect()
    }

    /// Runs the fault phase, heals, and checks convergence.
    pub fn run(mut self) -> Result<Stats, String> {
        for _ in 0..self.opts.rounds {
            self.round(true)?;
        }
        self.heal()?;
        let start = self.now;
        loop {
            if self.converged()? {
                break;
            }
            if self.now - start > CONVERGE_TICKS {
                return err(format!(
                    "liveness: no convergence {CONVERGE_TICKS} ticks after healing; {}",
                    self.describe()
                ));
            }
            self.round(false)?;
        }
        self.stats.converge_ticks = self.now - start;
        for n in &self.nodes {
            self.checker.check_acked(n.id, &n.sm)?;
        }
        self.stats.elections = self.checker.elections();
        self.stats.committed = self.checker.committed_max;
        self.stats.acked = self.checker.acked.len();
        Ok(self.stats)
    }

    fn describe(&self) -> String {
        let mut s = String::new();
        for n in &self.nodes {
            match &n.raw {
                Some(r) => {
                    let st = r.status();
                    s.push_str(&format!(
                        "[{} {:?} t{} lead {:?} commit {} applied {} last {} snap {}] ",
                        n.id,
                        st.role,
                        st.term,
                        st.leader,
                        st.commit,
                        st.applied,
                        st.last_index,
                        st.snapshot_index
                    ));
                }
                None => s.push_str(&format!("[{} down] ", n.id)),
            }
        }
        s
    }

    fn round(&mut self, faults: bool) -> Result<(), String> {
        self.now += 1;
        if faults {
            self.random_faults()?;
            self.random_client_ops()?;
        }
        for id in self.up_ids() {
            // Skipped ticks model clock drift between nodes.
            if !faults || self.rng.chance(950) {
                if let Some(r) = self.node(id).raw.as_mut() {
                    r.tick();
                }
                self.observe()?;
            }
        }
        self.deliver_due(faults)?;
        let mut ids = self.ids();
        self.rng.shuffle(&mut ids);
        for id in ids {
            if !faults || self.rng.chance(900) {
                self.handle_ready(id, faults)?;
            }
        }
        Ok(())
    }

    // ---- faults and clients ---------------------------------------------------

    fn random_faults(&mut self) -> Result<(), String> {
        if self.rng.chance(self.faults.power_failure) {
            // Power failure: every node loses what it had not made durable.
            self.trace(|| "power failure".to_string());
            for id in self.up_ids() {
                self.crash(id);
            }
        }
        if self.rng.chance(self.faults.crash) {
            // Leaders and nodes with an fsync in progress hold the most
            // unacknowledged state: crash them more often.
            let leaders = self.leader_ids();
            let syncing: Vec<u64> = self
                .nodes
                .iter()
                .filter(|n| !n.pending.is_empty())
                .map(|n| n.id)
                .collect();
            let pool = match self.rng.below(3) {
                0 if !leaders.is_empty() => leaders,
                1 if !syncing.is_empty() => syncing,
                _ => self.up_ids(),
            };
            if let Some(id) = self.rng.pick(&pool) {
                self.crash(id);
            }
        }
        for id in self.ids() {
            let now = self.now;
            let node = self.node(id);
            if node.raw.is_none() && node.down_until <= now {
                self.restart(id)?;
            }
        }
        let partitioned = self.group.iter().any(|&g| g != 0);
        if !partitioned && self.rng.chance(self.faults.partition) {
            for g in self.group.iter_mut() {
                *g = 0;
            }
            // Either isolate one node or split at random.
            if self.rng.chance(500) {
                let k = self.rng.below(self.opts.nodes) as usize;
                self.group[k] = 1;
            } else {
                for k in 0..self.group.len() {
                    self.group[k] = self.rng.below(2) as u8;
                }
            }
            self.trace(|| format!("partition {:?}", self.group));
        } else if partitioned && self.rng.chance(self.faults.heal) {
            self.group.iter_mut().for_each(|g| *g = 0);
            self.trace(|| "heal partition".to_string());
        }
        Ok(())
    }

    fn random_client_ops(&mut self) -> Result<(), String> {
        if self.rng.chance(300) {
            let n = 1 + self.rng.below(3);
            for _ in 0..n {
                let target = self.client_target();
                self.propose(target)?;
            }
        }
        if self.rng.chance(60) {
            let target = self.client_target();
            self.read(target);
        }
        if self.rng.chance(30) {
            if let Some(id) = self.rng.pick(&self.up_ids()) {
                self.compact(id)?;
            }
        }
        if self.rng.chance(8) {
            if let Some(l) = self.rng.pick(&self.leader_ids()) {
                let to = 1 + self.rng.below(self.opts.nodes);
                if let Some(r) = self.node(l).raw.as_mut() {
                    if r.transfer_leader(to).is_ok() {
                        self.stats.transfers += 1;
                        self.trace(|| format!("transfer leadership {l} -> {to}"));
                    }
                }
                self.observe()?;
            }
        }
        Ok(())
    }

    /// Usually a node that believes it leads, sometimes anyone.
    fn client_target(&mut self) -> u64 {
        let leaders = self.leader_ids();
        if !leaders.is_empty() && self.rng.chance(850) {
            self.rng.pick(&leaders).unwrap_or(1)
        } else {
            1 + self.rng.below(self.opts.nodes)
        }
    }

    fn propose(&mut self, id: u64) -> Result<(), String> {
        self.next_cmd += 1;
        let data = format!("s{}-c{}", self.opts.seed, self.next_cmd).into_bytes();
        let Some(r) = self.node(id).raw.as_mut() else {
            return Ok(());
        };
        if let Ok(index) = r.propose(data.clone()) {
            let term = r.status().term;
            self.trace(|| format!("node {id} accepted proposal at {index} term {term}"));
            self.proposals.push(Proposal {
                node: id,
                term,
                index,
                data,
            });
        }
        self.observe()
    }

    fn read(&mut self, id: u64) {
        self.next_ctx += 1;
        let ctx = self.next_ctx;
        let must_see = self.checker.committed_max;
        if let Some(r) = self.node(id).raw.as_mut() {
            if r.read_index(ctx).is_ok() {
                self.reads.insert(ctx, (id, must_see));
            }
        }
    }

    fn compact(&mut self, id: u64) -> Result<(), String> {
        let back = self.rng.below(4);
        let node = self.node(id);
        let Some(r) = node.raw.as_mut() else {
            return Ok(());
        };
        let st = r.status();
        let index = st.applied.saturating_sub(back);
        if index <= st.snapshot_index {
            return Ok(());
        }
        let data = node.sm.encode(index);
        match r.compact(index, data.clone()) {
            Ok(()) => {
                let term = r.term_at(index).ok_or("no term at compaction index")?;
                node.disk.compact(Snapshot { index, term, data });
                self.trace(|| format!("node {id} compacted to {index}"));
                Ok(())
            }
            // Refused while installing a received snapshot: fine.
            Err(coordbench_raft::Error::SnapshotInstallPending) => Ok(()),
            Err(e) => err(format!("node {id} compact({index}) failed: {e}")),
        }
    }

    fn crash(&mut self, id: u64) {
        // Quick restarts matter most: they let a node act on what it forgot
        // (a vote, an acknowledged entry) while the cluster still remembers.
        let downtime = match self.rng.below(10) {
            0..=3 => self.rng.below(3),
            4..=7 => 3 + self.rng.below(30),
            _ => 30 + self.rng.below(120),
        };
        let now = self.now;
        let node = self.node(id);
        node.down_until = now + downtime;
        node.raw = None;
        node.pending.clear();
        node.sm = AppliedLog::default();
        self.proposals.retain(|p| p.node != id);
        self.reads.retain(|_, (n, _)| *n != id);
        self.stats.crashes += 1;
        self.trace(|| format!("crash node {id}"));
    }

    fn restart(&mut self, id: u64) -> Result<(), String> {
        let incarnation = self.node(id).incarnation + 1;
        let cfg = self.node_config(id, incarnation);
        let node = self.node(id);
        node.incarnation = incarnation;
        let raw = RawNode::new(cfg, node.disk.load())
            .map_err(|e| format!("node {id} failed to restart: {e}"))?;
        node.sm = match &node.disk.snapshot {
            Some(s) => AppliedLog::decode(&s.data)?,
            None => AppliedLog::default(),
        };
        node.raw = Some(raw);
        let sm = node.sm.clone();
        self.checker.on_restore(id, &sm)?;
        self.trace(|| format!("restart node {id} (snapshot at {})", sm.len()));
        Ok(())
    }

    fn heal(&mut self) -> Result<(), String> {
        self.group.iter_mut().for_each(|g| *g = 0);
        self.loss = 0;
        self.dup = 0;
        for id in self.ids() {
            if self.node(id).raw.is_none() {
                self.restart(id)?;
            }
        }
        self.trace(|| "---- heal: no more faults ----".to_string());
        Ok(())
    }

    fn converged(&mut self) -> Result<bool, String> {
        let leaders = self.leader_ids();
        let [leader] = leaders[..] else {
            return Ok(false);
        };
        let Some(l) = self.nodes[leader as usize - 1].raw.as_ref() else {
            return Ok(false);
        };
        let ls = l.status();
        if ls.commit != ls.last_index {
            return Ok(false);
        }
        for n in &self.nodes {
            let Some(r) = n.raw.as_ref() else {
                return Ok(false);
            };
            let st = r.status();
            if !n.pending.is_empty()
                || st.term != ls.term
                || st.leader != Some(leader)
                || st.applied != ls.last_index
                || n.sm.len() != ls.last_index
            {
                return Ok(false);
            }
        }
        let first = &self.nodes[0].sm;
        if let Some(n) = self.nodes.iter().find(|n| n.sm != *first) {
            return err(format!(
                "converged cluster disagrees: node {} state machine differs",
                n.id
            ));
        }
        Ok(true)
    }

    // ---- network --------------------------------------------------------------

    fn send(&mut self, msgs: Vec<Message>) {
        for m in msgs {
            if self.rng.chance(self.loss) {
                continue;
            }
            let copies = if self.rng.chance(self.dup) { 2 } else { 1 };
            for _ in 0..copies {
                let r = self.rng.below(100);
                let delay = match r {
                    0..=69 => 0,
                    70..=89 => 1,
                    _ => 2 + self.rng.below(4),
                };
                self.net.push((self.now + delay, m.clone()));
            }
        }
    }

    fn deliver_due(&mut self, faults: bool) -> Result<(), String> {
        // Guard against a message storm turning a round into a livelock.
        for _ in 0..100_000 {
            let due: Vec<usize> = (0..self.net.len())
                .filter(|&i| self.net[i].0 <= self.now)
                .collect();
            let Some(pos) = self.rng.pick(&due) else {
                return Ok(());
            };
            let (_, m) = self.net.swap_remove(pos);
            let (from, to) = (m.from, m.to);
            if self.group[from as usize - 1] != self.group[to as usize - 1] {
                continue;
            }
            let Some(r) = self.nodes[to as usize - 1].raw.as_mut() else {
                continue;
            };
            self.stats.delivered += 1;
            let desc = if self.opts.trace {
                format!("{m:?}")
            } else {
                String::new()
            };
            if let Err(e) = r.step(m) {
                return err(format!("node {to} refused a message: {e}: {desc}"));
            }
            self.trace(|| format!("deliver {desc}"));
            self.observe()?;
            if !faults || self.rng.chance(300) {
                self.handle_ready(to, faults)?;
            }
        }
        err("network livelock: too many deliveries in one tick".to_string())
    }

    // ---- ready handling ----------------------------------------------------------

    fn handle_ready(&mut self, id: u64, faults: bool) -> Result<(), String> {
        if let Some(&(until, _)) = self.node(id).pending.front() {
            // Crash before a slow fsync completes: the node may have acted on
            // this non-durable state meanwhile (counted it, answered votes).
            if faults && self.rng.chance(self.faults.crash_during_write) {
                self.crash(id);
                return Ok(());
            }
            if !faults || (until <= self.now && self.rng.chance(700)) {
                if let Some((_, rd)) = self.node(id).pending.pop_front() {
                    return self.persist(id, rd);
                }
            }
            // Sometimes pipeline: take the next Ready while writes are in flight.
            let queued = self.node(id).pending.len();
            if !(faults && queued < 3 && self.rng.chance(300)) {
                return Ok(());
            }
        }
        let Some(r) = self.nodes[id as usize - 1].raw.as_mut() else {
            return Ok(());
        };
        if !r.has_ready() {
            return Ok(());
        }
        let mut rd = r.ready();
        if rd.is_empty() {
            return err(format!("node {id}: has_ready but empty Ready"));
        }
        if let Some(first) = rd.entries.first() {
            let prev = r.term_at(first.index - 1);
            self.checker.on_entries(id, prev, &rd.entries)?;
        }
        if let Some(ss) = &rd.soft_state {
            self.trace(|| format!("node {id} soft state {ss:?}"));
        }
        let msgs = std::mem::take(&mut rd.messages);
        self.send(msgs);
        // The most dangerous moment: messages are out, nothing is durable.
        // Readies that carry a vote or an acknowledgement are the ones whose
        // loss could break safety if the core sent them too early.
        let promises = rd.hard_state.is_some() || !rd.persisted_messages.is_empty();
        let p = if promises {
            self.faults.crash_before_write
        } else {
            self.faults.crash_before_write / 8
        };
        if faults && self.rng.chance(p) {
            self.crash(id);
            return Ok(());
        }
        if self.node(id).pending.is_empty() && (!faults || self.rng.chance(500)) {
            self.persist(id, rd)
        } else {
            let slow = match self.rng.below(20) {
                0..=11 => 0,
                12..=16 => 1,
                _ => 2 + self.rng.below(3),
            };
            let now = self.now;
            let node = &mut self.nodes[id as usize - 1];
            let until = node.pending.back().map_or(0, |p| p.0).max(now + slow);
            node.pending.push_back((until, rd));
            Ok(())
        }
    }

    /// The simulated fsync, then everything allowed after it.
    fn persist(&mut self, id: u64, mut rd: Ready) -> Result<(), String> {
        self.node(id).disk.write(&rd);
        if let Some(s) = &rd.snapshot {
            let sm = AppliedLog::decode(&s.data)?;
            if sm.len() != s.index {
                return err(format!("snapshot at {} holds {} items", s.index, sm.len()));
            }
            self.checker.on_restore(id, &sm)?;
            self.node(id).sm = sm;
            self.stats.snapshots_installed += 1;
            self.trace(|| format!("node {id} installed snapshot at {}", s.index));
        }
        let msgs = std::mem::take(&mut rd.persisted_messages);
        self.send(msgs);
        for e in &rd.committed_entries {
            let node = &mut self.nodes[id as usize - 1];
            node.sm.apply(e).map_err(|m| format!("node {id}: {m}"))?;
            self.checker.on_apply(id, &node.sm)?;
            // A proposal is acknowledged when the node that accepted it
            // applies it at the promised index and term.
            let mut acked = None;
            self.proposals.retain(|p| {
                if p.node != id || p.index > e.index {
                    return true;
                }
                if p.index == e.index
                    && p.term == e.term
                    && e.kind == EntryKind::Normal(p.data.clone())
                {
                    acked = Some(p.data.clone());
                }
                false
            });
            if let Some(data) = acked {
                self.checker.ack(e.index, data);
            }
        }
        let applied = self.node(id).sm.len();
        for rs in &rd.read_states {
            let Some((node, must_see)) = self.reads.remove(&rs.ctx) else {
                return err(format!("node {id} answered unknown read {}", rs.ctx));
            };
            if node != id || rs.index < must_see || applied < rs.index {
                return err(format!(
                    "linearizability: read {} on node {id} (issued at {node}) at index {} \
                     must see {must_see}, applied {applied}",
                    rs.ctx, rs.index
                ));
            }
            self.stats.reads_served += 1;
        }
        for ctx in &rd.dropped_reads {
            self.reads.remove(ctx);
        }
        if let Some(r) = self.node(id).raw.as_mut() {
            r.advance(rd);
        }
        self.observe()
    }

    // ---- invariants ----------------------------------------------------------------

    /// Election safety, leader completeness and commit bookkeeping, checked
    /// after every event.
    fn observe(&mut self) -> Result<(), String> {
        let views: Vec<LeaderView<'_>> = self
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
        for v in &views {
            self.checker.on_leader(v.id, v.term, v.node)?;
        }
        for v in &views {
            let commit = v.node.status().commit;
            self.checker
                .on_leader_commit(v.id, v.term, commit, v.node, &views)?;
        }
        Ok(())
    }
}

/// Runs one seed end to end.
pub fn run(opts: SimOptions) -> Result<Stats, String> {
    Cluster::new(opts)?.run()
}
