//! Deterministic simulation of a Zab ensemble built on `coordbench_zab`.
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
//! converge within a bounded number of ticks.

pub mod checker;
pub mod rng;
pub mod state_machine;

use std::collections::{HashMap, VecDeque};

use coordbench_zab::{
    Config, HardState, Message, MessageBody, PersistedState, Proposal, RawNode, Ready, Role,
    Snapshot, SyncKind, Zxid,
};

use checker::{Checker, LeaderView};
use rng::SimRng;
use state_machine::AppliedLog;

pub const PING_TICKS: u32 = 2;
pub const SYNC_LIMIT: u32 = 10;
pub const INIT_LIMIT: u32 = 20;
/// A healed ensemble must establish a leader and converge within this many
/// ticks.
pub const CONVERGE_TICKS: u64 = 30 * INIT_LIMIT as u64;

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

impl Stats {
    pub fn add(&mut self, s: &Stats) {
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
}

/// How hard one seed hits the ensemble (probabilities in per mille). Seeds
/// rotate through profiles so that some runs make long stretches of progress
/// over a bad network while others crash nodes at the worst moments.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    pub name: &'static str,
    /// Per tick: crash one node.
    pub crash: u64,
    /// Per tick: crash every node at once.
    pub power_failure: u64,
    /// Per Ready that promises durability (acks, hard state): crash right
    /// after its messages went out, before the write.
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
struct Disk {
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

struct Pending {
    node: u64,
    zxid: Zxid,
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
    proposals: Vec<Pending>,
    next_cmd: u64,
    /// read ctx -> (node, zxid the read must reflect)
    reads: HashMap<u64, (u64, Zxid)>,
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
        cfg.ping_ticks = PING_TICKS;
        cfg.sync_limit = SYNC_LIMIT;
        cfg.init_limit = INIT_LIMIT;
        cfg.finalize_ticks = rng.below(4) as u32;
        cfg.notify_ticks = 3 + rng.below(4) as u32;
        cfg.max_inflight_msgs = 1 + rng.below(6) as usize;
        cfg.max_proposals_per_msg = 1 + rng.below(4) as usize;
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
                "seed {} nodes {} faults {} finalize {} notify {} inflight {} batch {} loss {}‰ dup {}‰",
                c.opts.seed,
                c.opts.nodes,
                c.faults.name,
                c.cfg.finalize_ticks,
                c.cfg.notify_ticks,
                c.cfg.max_inflight_msgs,
                c.cfg.max_proposals_per_msg,
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
                    .is_some_and(|r| r.status().is_established_leader())
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
        self.stats.epochs = self.checker.epochs();
        self.stats.delivered = self.checker.delivered_len();
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
        if self.rng.chance(100) {
            // Nodes that believe they lead are the interesting ones: a
            // deposed leader must not serve stale reads.
            let target = self.client_target();
            self.read(target);
        }
        if self.rng.chance(30) {
            if let Some(id) = self.rng.pick(&self.up_ids()) {
                self.compact(id)?;
            }
        }
        Ok(())
    }

    /// Usually a node that is an established leader, sometimes anyone.
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
        if let Ok(zxid) = r.propose(data.clone()) {
            self.trace(|| format!("node {id} proposed {zxid}"));
            self.checker.on_propose(id, zxid, &data)?;
            self.proposals.push(Pending {
                node: id,
                zxid,
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
            if r.sync_read(ctx).is_ok() {
                self.reads.insert(ctx, (id, must_see));
            }
        }
    }

    fn compact(&mut self, id: u64) -> Result<(), String> {
        let back = self.rng.below(4) as usize;
        let node = self.node(id);
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
                self.trace(|| format!("node {id} compacted to {zxid}"));
                Ok(())
            }
            // Refused while installing a received snapshot: fine.
            Err(coordbench_zab::Error::SnapshotInstallPending) => Ok(()),
            Err(e) => err(format!("node {id} compact({zxid}) failed: {e}")),
        }
    }

    fn crash(&mut self, id: u64) {
        // Quick restarts matter most: they let a node act on what it forgot
        // (an accepted epoch, an acknowledged proposal) while the ensemble
        // still remembers.
        let downtime = match self.rng.below(10) {
            0..=3 => self.rng.below(3),
            4..=7 => 3 + self.rng.below(30),
            _ => 30 + self.rng.below(120),
        };
        let torn = self.rng.chance(300);
        let now = self.now;
        let node = self.node(id);
        node.down_until = now + downtime;
        node.raw = None;
        // A torn write: the runtime may persist a Ready's history changes
        // before its hard state (the contract allows it), and crash between.
        if let Some((_, rd)) = node.pending.front().filter(|_| torn) {
            node.disk.write_history(rd);
        }
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
        self.trace(|| format!("restart node {id} (snapshot at {})", sm.last_zxid()));
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
        if ls.commit != ls.last_zxid {
            return Ok(false);
        }
        for n in &self.nodes {
            let Some(r) = n.raw.as_ref() else {
                return Ok(false);
            };
            let st = r.status();
            if !n.pending.is_empty()
                || st.phase != coordbench_zab::Phase::Broadcast
                || st.current_epoch != ls.current_epoch
                || st.leader != Some(leader)
                || st.applied != ls.last_zxid
                || n.sm.last_zxid() != ls.last_zxid
            {
                return Ok(false);
            }
        }
        let first = &self.nodes[0].sm;
        if let Some(n) = self.nodes.iter().find(|n| n.sm != *first) {
            return err(format!(
                "converged ensemble disagrees: node {} state machine differs",
                n.id
            ));
        }
        Ok(true)
    }

    // ---- network --------------------------------------------------------------

    fn send(&mut self, msgs: Vec<Message>) {
        for m in msgs {
            if let MessageBody::NewLeader { sync, .. } = &m.body {
                match sync {
                    SyncKind::Diff { .. } => self.stats.diffs += 1,
                    SyncKind::Trunc { .. } => self.stats.truncs += 1,
                    SyncKind::Snap(_) => self.stats.snaps += 1,
                }
            }
            if self.rng.chance(self.loss) {
                continue;
            }
            let copies = if self.rng.chance(self.dup) { 2 } else { 1 };
            for _ in 0..copies {
                // Now and then a message arrives very late, from a session
                // or an attempt that has long moved on.
                let delay = match self.rng.below(1000) {
                    0..=699 => 0,
                    700..=899 => 1,
                    900..=989 => 2 + self.rng.below(4),
                    _ => 10 + self.rng.below(40),
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
            self.stats.messages += 1;
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
            // this non-durable state meanwhile.
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
            // The point of the history right before the new proposals.
            let st = r.status();
            let ps = r.proposals();
            let k = ps.partition_point(|p| p.zxid < first.zxid);
            let prev = if k == 0 {
                st.snapshot_zxid
            } else {
                ps[k - 1].zxid
            };
            self.checker.on_entries(id, prev, &rd.entries)?;
        }
        if let Some(ss) = &rd.soft_state {
            self.trace(|| format!("node {id} soft state {ss:?}"));
        }
        let msgs = std::mem::take(&mut rd.messages);
        self.send(msgs);
        // The most dangerous moment: messages are out, nothing is durable.
        // Readies that carry an acknowledgement or an epoch are the ones
        // whose loss could break safety if the core sent them too early.
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
            if sm.last_zxid() != s.zxid {
                return err(format!(
                    "snapshot at {} holds items up to {}",
                    s.zxid,
                    sm.last_zxid()
                ));
            }
            self.checker.on_restore(id, &sm)?;
            self.node(id).sm = sm;
            self.stats.snapshots_installed += 1;
            self.trace(|| format!("node {id} installed snapshot at {}", s.zxid));
        }
        let msgs = std::mem::take(&mut rd.persisted_messages);
        self.send(msgs);
        for p in &rd.committed_entries {
            let node = &mut self.nodes[id as usize - 1];
            node.sm.apply(p).map_err(|m| format!("node {id}: {m}"))?;
            self.checker.on_apply(id, &node.sm)?;
            // A proposal is acknowledged when the leader that accepted it
            // delivers it.
            let mut acked = None;
            self.proposals.retain(|q| {
                if q.node != id || q.zxid > p.zxid {
                    return true;
                }
                if q.zxid == p.zxid && q.data == p.data {
                    acked = Some(q.data.clone());
                }
                false
            });
            if let Some(data) = acked {
                self.checker.ack(p.zxid, data);
            }
        }
        let applied = self.node(id).sm.last_zxid();
        for rs in &rd.read_states {
            let Some((node, must_see)) = self.reads.remove(&rs.ctx) else {
                return err(format!("node {id} answered unknown read {}", rs.ctx));
            };
            if node != id || rs.zxid < must_see || applied < rs.zxid {
                return err(format!(
                    "linearizability: sync read {} on node {id} (issued at {node}) at {} \
                     must see {must_see}, applied {applied}",
                    rs.ctx, rs.zxid
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

    /// One established leader per epoch, completeness and commit
    /// bookkeeping, checked after every event.
    fn observe(&mut self) -> Result<(), String> {
        let views: Vec<LeaderView<'_>> = self
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
        for v in &views {
            self.checker.on_established(v.id, v.epoch, v.node)?;
        }
        for v in &views {
            let commit = v.node.status().commit;
            self.checker.on_leader_commit(v, commit, &views)?;
        }
        Ok(())
    }
}

/// Runs one seed end to end.
pub fn run(opts: SimOptions) -> Result<Stats, String> {
    Cluster::new(opts)?.run()
}
