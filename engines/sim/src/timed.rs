//! A timed whole-cluster simulation for measuring (not checking) the cores: a virtual clock
//! in microseconds, one tick clock per node (each with its own phase, as real members'
//! timers are not aligned), and a network whose every link delays a message by a latency of
//! its own plus uniform jitter and may lose it. Events (ticks and deliveries) are handled
//! in time order, ties in the order they were scheduled, so a seed replays exactly.
//!
//! The tick-based [`crate::Sim`] is for safety under faults; this one is for timing, where
//! the tick must be fine (a fraction of a millisecond) and the network must look like a
//! real one (a latency, not a number of ticks).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::rng::SimRng;

/// The network: every pair of nodes has a one-way base latency of its own (the same both
/// ways), each message adds a uniform draw from `[0, jitter_us]`, and may be lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkModel {
    nodes: usize,
    /// `nodes × nodes`, row = sender.
    base_us: Vec<u64>,
    pub jitter_us: u64,
    pub loss_per_mille: u64,
}

impl LinkModel {
    /// Every link `base_us`.
    pub fn uniform(nodes: usize, base_us: u64, jitter_us: u64, loss_per_mille: u64) -> Self {
        Self {
            nodes,
            base_us: vec![base_us; nodes * nodes],
            jitter_us,
            loss_per_mille,
        }
    }

    /// Each link's base drawn uniformly from `[low_us, high_us]`.
    pub fn spread(
        nodes: usize,
        (low_us, high_us): (u64, u64),
        jitter_us: u64,
        loss_per_mille: u64,
        rng: &mut SimRng,
    ) -> Self {
        let mut m = Self::uniform(nodes, low_us, jitter_us, loss_per_mille);
        for a in 0..nodes {
            for b in a + 1..nodes {
                let base = low_us + rng.below(high_us.saturating_sub(low_us) + 1);
                m.base_us[a * nodes + b] = base;
                m.base_us[b * nodes + a] = base;
            }
        }
        m
    }

    pub fn base_us(&self, from: usize, to: usize) -> u64 {
        self.base_us[from * self.nodes + to]
    }

    /// This message's delay, or `None` when it is lost.
    pub fn delay(&self, from: usize, to: usize, rng: &mut SimRng) -> Option<u64> {
        if self.loss_per_mille > 0 && rng.chance(self.loss_per_mille) {
            return None;
        }
        Some(self.base_us(from, to) + rng.below(self.jitter_us + 1))
    }
}

/// One member as the timed simulation drives it: a sans-IO core plus whatever its adapter
/// keeps. Persistence is instantaneous (no disks are simulated).
pub trait TimedNode {
    type Msg;
    fn tick(&mut self);
    fn step(&mut self, msg: Self::Msg);
    /// Moves every message the core wants sent into `out`, acknowledging its work.
    fn drain(&mut self, out: &mut Vec<Self::Msg>);
    /// Indices (in the cluster's node list) of the message's sender and destination.
    fn endpoints(msg: &Self::Msg) -> (usize, usize);
}

/// A scheduled delivery; the message itself waits in a slot, so the heap moves only keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Due {
    at_us: u64,
    seq: u64,
    slot: usize,
}

// Earliest first in a max-heap; `seq` breaks ties in scheduling order.
impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at_us, other.seq).cmp(&(self.at_us, self.seq))
    }
}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Counts of what a cluster has done, for speed reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimedStats {
    pub ticks: u64,
    pub delivered: u64,
    pub lost: u64,
}

pub struct TimedCluster<N: TimedNode> {
    now_us: u64,
    tick_us: u64,
    /// `None` once crashed.
    nodes: Vec<Option<N>>,
    next_tick_us: Vec<u64>,
    queue: BinaryHeap<Due>,
    /// Messages on the wire, by slot; `free` lists the empty slots.
    slots: Vec<Option<N::Msg>>,
    free: Vec<usize>,
    seq: u64,
    link: LinkModel,
    rng: SimRng,
    out: Vec<N::Msg>,
    pub stats: TimedStats,
}

impl<N: TimedNode> TimedCluster<N> {
    /// Starts every node at time 0; each node's first tick falls at a random time within
    /// the first `start_spread_us` (at least one tick), its later ones every `tick_us`
    /// (> 0). A spread of about an election timeout lets a fresh cluster elect its first
    /// leader at once even without randomized timeouts.
    pub fn new(
        nodes: Vec<N>,
        tick_us: u64,
        start_spread_us: u64,
        link: LinkModel,
        mut rng: SimRng,
    ) -> Self {
        let tick_us = tick_us.max(1);
        let spread = start_spread_us.max(tick_us);
        let next_tick_us = nodes.iter().map(|_| 1 + rng.below(spread)).collect();
        let mut cluster = Self {
            now_us: 0,
            tick_us,
            nodes: nodes.into_iter().map(Some).collect(),
            next_tick_us,
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
            link,
            rng,
            out: Vec::new(),
            stats: TimedStats::default(),
        };
        for i in 0..cluster.nodes.len() {
            cluster.flush(i);
        }
        cluster
    }

    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node at `i` while it is up.
    pub fn node(&self, i: usize) -> Option<&N> {
        self.nodes.get(i)?.as_ref()
    }

    pub fn node_mut(&mut self, i: usize) -> Option<&mut N> {
        self.nodes.get_mut(i)?.as_mut()
    }

    /// The live nodes with their indices.
    pub fn live(&self) -> impl Iterator<Item = (usize, &N)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
    }

    /// Stops node `i` for good: it neither ticks nor receives from now on. Messages it
    /// already sent stay on the wire.
    pub fn crash(&mut self, i: usize) {
        if let Some(n) = self.nodes.get_mut(i) {
            *n = None;
        }
    }

    /// Sends what node `i` has to send after outside calls on it (`node_mut`).
    pub fn flush(&mut self, i: usize) {
        let Some(node) = self.nodes[i].as_mut() else {
            return;
        };
        node.drain(&mut self.out);
        for msg in std::mem::take(&mut self.out) {
            let (from, to) = N::endpoints(&msg);
            match self.link.delay(from, to, &mut self.rng) {
                Some(d) => {
                    self.seq += 1;
                    let slot = match self.free.pop() {
                        Some(slot) => {
                            self.slots[slot] = Some(msg);
                            slot
                        }
                        None => {
                            self.slots.push(Some(msg));
                            self.slots.len() - 1
                        }
                    };
                    self.queue.push(Due {
                        at_us: self.now_us + d,
                        seq: self.seq,
                        slot,
                    });
                }
                None => self.stats.lost += 1,
            }
        }
    }

    /// Handles every event up to and including `until_us`, or until `stop` (asked after
    /// each event with the index of the node it touched) says so. The clock ends at
    /// `until_us`, or at the stopping event. Returns whether `stop` ended it.
    pub fn run_until(&mut self, until_us: u64, mut stop: impl FnMut(&Self, usize) -> bool) -> bool {
        loop {
            let (tick_node, tick_at) = self.next_tick();
            let msg_at = self.queue.peek().map_or(u64::MAX, |m| m.at_us);
            let at = tick_at.min(msg_at);
            if at > until_us {
                self.now_us = until_us;
                return false;
            }
            self.now_us = at;
            let touched = if msg_at <= tick_at {
                let Some(due) = self.queue.pop() else {
                    continue;
                };
                self.free.push(due.slot);
                let Some(msg) = self.slots[due.slot].take() else {
                    continue;
                };
                let to = N::endpoints(&msg).1;
                match self.nodes.get_mut(to).and_then(Option::as_mut) {
                    Some(node) => {
                        node.step(msg);
                        self.stats.delivered += 1;
                    }
                    None => continue,
                }
                to
            } else {
                self.next_tick_us[tick_node] += self.tick_us;
                if let Some(node) = self.nodes[tick_node].as_mut() {
                    node.tick();
                    self.stats.ticks += 1;
                }
                tick_node
            };
            self.flush(touched);
            if stop(self, touched) {
                return true;
            }
        }
    }

    /// The live node whose tick comes first (lowest index on a tie) and when.
    fn next_tick(&self) -> (usize, u64) {
        let mut best = (0, u64::MAX);
        for (i, at) in self.next_tick_us.iter().enumerate() {
            if *at < best.1 && self.nodes[i].is_some() {
                best = (i, *at);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts ticks; node 0 sends one message to node 1 on its first tick.
    struct Pinger {
        id: usize,
        ticks: u64,
        got: Vec<u64>,
        outbox: Vec<(usize, u64)>,
    }

    impl TimedNode for Pinger {
        type Msg = (usize, u64);
        fn tick(&mut self) {
            self.ticks += 1;
            if self.id == 0 && self.ticks == 1 {
                self.outbox.push((1, 7));
            }
        }
        fn step(&mut self, msg: Self::Msg) {
            self.got.push(msg.1);
        }
        fn drain(&mut self, out: &mut Vec<Self::Msg>) {
            out.append(&mut self.outbox);
        }
        fn endpoints(msg: &Self::Msg) -> (usize, usize) {
            (1 - msg.0, msg.0)
        }
    }

    fn pingers() -> Vec<Pinger> {
        (0..2)
            .map(|id| Pinger {
                id,
                ticks: 0,
                got: Vec::new(),
                outbox: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn ticks_at_the_tick_rate_and_delivers_after_the_latency() {
        let link = LinkModel::uniform(2, 500, 0, 0);
        let mut c = TimedCluster::new(pingers(), 100, 0, link, SimRng::new(1));
        let mut delivered_at = None;
        c.run_until(10_000, |c, i| {
            if i == 1 && !c.node(1).unwrap().got.is_empty() && delivered_at.is_none() {
                delivered_at = Some(c.now_us());
            }
            false
        });
        assert_eq!(c.now_us(), 10_000);
        // 10 ms of 100 µs ticks per node, give or take the phase.
        for i in 0..2 {
            assert!((99..=100).contains(&c.node(i).unwrap().ticks));
        }
        let at = delivered_at.expect("the message arrives");
        assert!((501..=600).contains(&at), "{at}");
        c.crash(1);
        c.run_until(20_000, |_, _| false);
        assert!(c.node(1).is_none());
        assert!(c.node(0).unwrap().ticks >= 199);
    }

    #[test]
    fn spread_links_are_symmetric_and_within_bounds() {
        let m = LinkModel::spread(4, (100, 200), 0, 0, &mut SimRng::new(3));
        for a in 0..4 {
            for b in 0..4 {
                assert_eq!(m.base_us(a, b), m.base_us(b, a));
                assert!((100..=200).contains(&m.base_us(a, b)));
            }
        }
    }

    #[test]
    fn a_lossy_link_loses_and_a_stop_ends_the_run() {
        let link = LinkModel::uniform(2, 10, 5, 1000);
        let mut c = TimedCluster::new(pingers(), 100, 0, link, SimRng::new(2));
        assert!(c.run_until(10_000, |c, _| c.stats.ticks >= 3));
        assert!(c.now_us() < 10_000);
        c.run_until(10_000, |_, _| false);
        assert_eq!(c.stats.lost, 1);
        assert!(c.node(1).unwrap().got.is_empty());
    }
}
