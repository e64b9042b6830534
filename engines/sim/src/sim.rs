//! The protocol-independent part of one simulated run: nodes that crash and
//! restart from their simulated disk, a network that loses, duplicates,
//! delays and reorders messages and is split by partitions that come and
//! go, slow and pipelined "fsyncs" of Readies, the fault phase, healing and
//! the convergence deadline. A [`Core`] supplies the rest.
//!
//! The order in which random numbers are drawn is part of the contract:
//! pinned seeds in the cores' tests catch specific bugs only as long as it
//! stays the same.

use std::collections::VecDeque;
use std::fmt::Debug;

use crate::rng::SimRng;

#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    pub nodes: u64,
    /// Ticks of the fault phase.
    pub rounds: u64,
    /// Print every event to stderr.
    pub trace: bool,
}

/// How hard one seed hits the cluster (probabilities in per mille). Seeds
/// rotate through a core's [`Core::PROFILES`] so that some runs make long
/// stretches of progress over a bad network while others crash nodes at the
/// worst moments.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    pub name: &'static str,
    /// Per tick: crash one node.
    pub crash: u64,
    /// Per tick: crash every node at once.
    pub power_failure: u64,
    /// Per Ready that promises durability (vote, ack, hard state): crash
    /// right after its messages went out, before the write.
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

/// One simulated node: the core while it is up, and what survives a crash.
pub struct Node<C: Core> {
    pub id: u64,
    pub raw: Option<C::Raw>,
    pub disk: C::Disk,
    /// Readies taken from the node but not yet persisted (slow fsyncs,
    /// completed in order), each with the tick before which it cannot finish.
    pub pending: VecDeque<(u64, C::Ready)>,
    pub sm: C::Sm,
    pub incarnation: u64,
    /// While down: the tick at which the node comes back.
    pub down_until: u64,
}

/// What a consensus core's test adapter provides. `Self` holds the
/// adapter's own state (configuration, checker, outstanding client
/// operations, statistics) and is reachable as [`Sim::core`]; hooks that
/// need the whole simulation get `&mut Sim<Self>`.
pub trait Core: Sized {
    /// The sans-IO node (`RawNode`).
    type Raw;
    type Msg: Clone + Debug;
    type Ready;
    /// What a node has made durable; survives crashes.
    type Disk: Default;
    /// The applied state machine, rebuilt from the disk on restart.
    type Sm: Default + PartialEq;
    type Stats;

    /// "cluster" or "ensemble", for messages.
    const GROUP: &'static str;
    const PROFILES: [Faults; 3];
    /// A healed group must converge within this many ticks.
    const CONVERGE_TICKS: u64;

    /// The adapter state; draws the per-seed configuration from `rng`
    /// before the harness draws the fault rates.
    fn new(opts: &SimOptions, rng: &mut SimRng) -> Self;
    /// The drawn configuration, for the trace.
    fn describe_config(&self) -> String;
    /// Starts node `id` (incarnation `incarnation`) from `disk`.
    fn boot(
        sim: &Sim<Self>,
        id: u64,
        incarnation: u64,
        disk: &Self::Disk,
    ) -> Result<Self::Raw, String>;
    /// The state machine a restarted node recovers from its disk.
    fn recover_sm(disk: &Self::Disk) -> Result<Self::Sm, String>;
    /// Where a state machine stands, for the trace.
    fn sm_position(sm: &Self::Sm) -> String;
    fn is_leader(raw: &Self::Raw) -> bool;
    fn describe_node(node: &Node<Self>) -> String;
    fn tick(raw: &mut Self::Raw);
    fn step(raw: &mut Self::Raw, m: Self::Msg) -> Result<(), String>;
    /// (from, to).
    fn endpoints(m: &Self::Msg) -> (u64, u64);
    /// Network delay of one copy of a message, in ticks.
    fn delay(rng: &mut SimRng) -> u64;
    /// Sees every message sent, before loss.
    fn on_send(_sim: &mut Sim<Self>, _m: &Self::Msg) {}
    /// Random client operations of one fault-phase tick.
    fn client_ops(sim: &mut Sim<Self>) -> Result<(), String>;
    /// What the nodes do on their own every tick, in both phases (a leader's periodic
    /// work); the default: nothing. Must draw no random numbers unless the core's own
    /// tests opt in, or pinned seeds would change.
    fn background(_sim: &mut Sim<Self>) -> Result<(), String> {
        Ok(())
    }
    /// The fault phase ended: no more faults or client operations.
    fn on_heal(_sim: &mut Sim<Self>) {}
    /// Node `id` is about to lose its volatile state.
    fn on_crash(sim: &mut Sim<Self>, id: u64);
    /// Node `id` restarted with the state machine in `sim.nodes`.
    fn on_restart(sim: &mut Sim<Self>, id: u64) -> Result<(), String>;
    /// The Ready the node has, if any.
    fn take_ready(raw: &mut Self::Raw) -> Option<Self::Ready>;
    fn ready_is_empty(rd: &Self::Ready) -> bool;
    /// A fresh Ready of node `id`: check it and take the messages that may
    /// go out before it is durable.
    fn on_ready(
        sim: &mut Sim<Self>,
        id: u64,
        rd: &mut Self::Ready,
    ) -> Result<Vec<Self::Msg>, String>;
    /// Whether the Ready promises durability (its loss could break safety
    /// if the core sent its messages too early).
    fn promises(rd: &Self::Ready) -> bool;
    /// The simulated fsync of a Ready, then everything allowed after it.
    fn persist(sim: &mut Sim<Self>, id: u64, rd: Self::Ready) -> Result<(), String>;
    /// Invariant checks, run after every event.
    fn observe(sim: &mut Sim<Self>) -> Result<(), String>;
    /// With every node up, `leader` the only leader and no fsync pending:
    /// whether the group has converged on it.
    fn converged(sim: &Sim<Self>, leader: u64) -> bool;
    /// Final checks and statistics of a run that converged.
    fn finish(sim: Sim<Self>, converge_ticks: u64) -> Result<Self::Stats, String>;
}

/// One seeded run over nodes `1..=opts.nodes`.
pub struct Sim<C: Core> {
    pub opts: SimOptions,
    pub rng: SimRng,
    pub now: u64,
    pub nodes: Vec<Node<C>>,
    /// (deliver at tick, message)
    pub net: Vec<(u64, C::Msg)>,
    /// Partition group of each node; messages cross only within a group.
    pub group: Vec<u8>,
    pub faults: Faults,
    pub loss: u64,
    pub dup: u64,
    pub crashes: u64,
    /// Messages delivered to a running node.
    pub delivered: u64,
    pub core: C,
}

fn err<T>(msg: String) -> Result<T, String> {
    Err(msg)
}

impl<C: Core> Sim<C> {
    pub fn new(opts: SimOptions) -> Result<Self, String> {
        let mut rng = SimRng::new(opts.seed);
        let core = C::new(&opts, &mut rng);
        let faults = C::PROFILES[(opts.seed % 3) as usize];
        let loss = rng.below(faults.max_loss + 1);
        let dup = rng.below(faults.max_dup + 1);
        let mut s = Self {
            nodes: Vec::new(),
            group: vec![0; opts.nodes as usize],
            net: Vec::new(),
            now: 0,
            faults,
            loss,
            dup,
            crashes: 0,
            delivered: 0,
            core,
            rng,
            opts,
        };
        for id in 1..=s.opts.nodes {
            let disk = C::Disk::default();
            let raw = C::boot(&s, id, 0, &disk)?;
            s.nodes.push(Node {
                id,
                raw: Some(raw),
                disk,
                pending: VecDeque::new(),
                sm: C::Sm::default(),
                incarnation: 0,
                down_until: 0,
            });
        }
        s.trace(|| {
            format!(
                "seed {} nodes {} faults {} {} loss {}‰ dup {}‰",
                s.opts.seed,
                s.opts.nodes,
                s.faults.name,
                s.core.describe_config(),
                s.loss,
                s.dup
            )
        });
        Ok(s)
    }

    /// The PRNG seed of a node's core, distinct per node and incarnation.
    pub fn node_seed(&self, id: u64, incarnation: u64) -> u64 {
        self.opts.seed.wrapping_mul(1_000_003) ^ (id << 40) ^ incarnation
    }

    pub fn trace(&self, f: impl FnOnce() -> String) {
        if self.opts.trace {
            eprintln!("[t={}] {}", self.now, f());
        }
    }

    pub fn node(&mut self, id: u64) -> &mut Node<C> {
        &mut self.nodes[id as usize - 1]
    }

    pub fn ids(&self) -> Vec<u64> {
        (1..=self.opts.nodes).collect()
    }

    pub fn up_ids(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|n| n.raw.is_some())
            .map(|n| n.id)
            .collect()
    }

    pub fn leader_ids(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|n| n.raw.as_ref().is_some_and(C::is_leader))
            .map(|n| n.id)
            .collect()
    }

    /// Runs the fault phase, heals, and checks convergence.
    pub fn run(mut self) -> Result<C::Stats, String> {
        for _ in 0..self.opts.rounds {
            self.round(true)?;
        }
        self.heal()?;
        let start = self.now;
        loop {
            if self.converged()? {
                break;
            }
            if self.now - start > C::CONVERGE_TICKS {
                return err(format!(
                    "liveness: no convergence {} ticks after healing; {}",
                    C::CONVERGE_TICKS,
                    self.describe()
                ));
            }
            self.round(false)?;
        }
        let converge_ticks = self.now - start;
        C::finish(self, converge_ticks)
    }

    fn describe(&self) -> String {
        let mut s = String::new();
        for n in &self.nodes {
            match &n.raw {
                Some(_) => s.push_str(&C::describe_node(n)),
                None => s.push_str(&format!("[{} down] ", n.id)),
            }
        }
        s
    }

    fn round(&mut self, faults: bool) -> Result<(), String> {
        self.now += 1;
        if faults {
            self.random_faults()?;
            C::client_ops(self)?;
        }
        C::background(self)?;
        for id in self.up_ids() {
            // Skipped ticks model clock drift between nodes.
            if !faults || self.rng.chance(950) {
                if let Some(r) = self.node(id).raw.as_mut() {
                    C::tick(r);
                }
                C::observe(self)?;
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

    /// Usually a node that believes it leads, sometimes anyone.
    pub fn client_target(&mut self) -> u64 {
        let leaders = self.leader_ids();
        if !leaders.is_empty() && self.rng.chance(850) {
            self.rng.pick(&leaders).unwrap_or(1)
        } else {
            1 + self.rng.below(self.opts.nodes)
        }
    }

    pub fn crash(&mut self, id: u64) {
        // Quick restarts matter most: they let a node act on what it forgot
        // (a vote, an acknowledgement, an accepted epoch) while the others
        // still remember.
        let downtime = match self.rng.below(10) {
            0..=3 => self.rng.below(3),
            4..=7 => 3 + self.rng.below(30),
            _ => 30 + self.rng.below(120),
        };
        C::on_crash(self, id);
        let now = self.now;
        let node = self.node(id);
        node.down_until = now + downtime;
        node.raw = None;
        node.pending.clear();
        node.sm = C::Sm::default();
        self.crashes += 1;
        self.trace(|| format!("crash node {id}"));
    }

    fn restart(&mut self, id: u64) -> Result<(), String> {
        let incarnation = self.node(id).incarnation + 1;
        self.node(id).incarnation = incarnation;
        let node = &self.nodes[id as usize - 1];
        let raw = C::boot(self, id, incarnation, &node.disk)
            .map_err(|e| format!("node {id} failed to restart: {e}"))?;
        let sm = C::recover_sm(&node.disk)?;
        let at = C::sm_position(&sm);
        let node = self.node(id);
        node.sm = sm;
        node.raw = Some(raw);
        C::on_restart(self, id)?;
        self.trace(|| format!("restart node {id} (snapshot at {at})"));
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
        C::on_heal(self);
        Ok(())
    }

    fn converged(&mut self) -> Result<bool, String> {
        let leaders = self.leader_ids();
        let [leader] = leaders[..] else {
            return Ok(false);
        };
        let settled = self
            .nodes
            .iter()
            .all(|n| n.raw.is_some() && n.pending.is_empty());
        if !settled || !C::converged(self, leader) {
            return Ok(false);
        }
        let first = &self.nodes[0].sm;
        if let Some(n) = self.nodes.iter().find(|n| n.sm != *first) {
            return err(format!(
                "converged {} disagrees: node {} state machine differs",
                C::GROUP,
                n.id
            ));
        }
        Ok(true)
    }

    // ---- network --------------------------------------------------------------

    pub fn send(&mut self, msgs: Vec<C::Msg>) {
        for m in msgs {
            C::on_send(self, &m);
            if self.rng.chance(self.loss) {
                continue;
            }
            let copies = if self.rng.chance(self.dup) { 2 } else { 1 };
            for _ in 0..copies {
                let delay = C::delay(&mut self.rng);
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
            let (from, to) = C::endpoints(&m);
            if self.group[from as usize - 1] != self.group[to as usize - 1] {
                continue;
            }
            let Some(r) = self.nodes[to as usize - 1].raw.as_mut() else {
                continue;
            };
            self.delivered += 1;
            let desc = if self.opts.trace {
                format!("{m:?}")
            } else {
                String::new()
            };
            if let Err(e) = C::step(r, m) {
                return err(format!("node {to} refused a message: {e}: {desc}"));
            }
            self.trace(|| format!("deliver {desc}"));
            C::observe(self)?;
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
                    return C::persist(self, id, rd);
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
        let Some(mut rd) = C::take_ready(r) else {
            return Ok(());
        };
        if C::ready_is_empty(&rd) {
            return err(format!("node {id}: has_ready but empty Ready"));
        }
        let msgs = C::on_ready(self, id, &mut rd)?;
        self.send(msgs);
        // The most dangerous moment: messages are out, nothing is durable.
        let p = if C::promises(&rd) {
            self.faults.crash_before_write
        } else {
            self.faults.crash_before_write / 8
        };
        if faults && self.rng.chance(p) {
            self.crash(id);
            return Ok(());
        }
        if self.node(id).pending.is_empty() && (!faults || self.rng.chance(500)) {
            C::persist(self, id, rd)
        } else {
            let slow = match self.rng.below(20) {
                0..=11 => 0,
                12..=16 => 1,
                _ => 2 + self.rng.below(3),
            };
            let now = self.now;
            let node = self.node(id);
            let until = node.pending.back().map_or(0, |p| p.0).max(now + slow);
            node.pending.push_back((until, rd));
            Ok(())
        }
    }
}
