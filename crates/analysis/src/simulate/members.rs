//! The two cores as members of a [`TimedCluster`]: each adapter ticks and steps its
//! `RawNode`, hands every Ready's messages to the network at once (no disk: a write is
//! durable the moment it is asked for), applies its committed commands to a state machine
//! when it was given one ([`Applier`]) and says who leads. The cores are configured through
//! engines/node's `NodeConfig`, so the simulated timing maps to the cores exactly as the
//! engines' does.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use coordbench_node::NodeConfig;
use coordbench_sim::TimedNode;

use super::machine::{Applier, Machine};

/// How the simulation sees one member's leadership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leadership {
    /// Won an election (raft: Leader; zab: Leading).
    pub leads: bool,
    /// A majority holds its first entry (raft: its no-op committed; zab: broadcast phase
    /// reached, i.e. a quorum synchronized with it).
    pub established: bool,
    /// Raft's term, Zab's election round: how many elections this member has seen.
    pub term: u64,
}

/// Timing of one simulated cluster, in ticks of the core.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub heartbeat_ticks: u32,
    /// `[min, max)`.
    pub election_ticks: (u32, u32),
    pub pre_vote: bool,
    pub check_quorum: bool,
}

/// What the election trial needs of a member.
pub trait Member: TimedNode + Sized {
    fn boot(id: u64, members: u64, timing: &Timing, seed: u64) -> Result<Self, String>;
    fn leadership(&self) -> Leadership;
    /// Offers a write; whether the core took it (only a serving leader does).
    fn propose(&mut self, data: &[u8]) -> bool;
    /// Applies this member's committed commands to `machine` from now on.
    fn apply_to(&mut self, machine: Machine);
    /// Commands applied so far (0 without a machine).
    fn applied(&self) -> u64;
}

fn node_config(id: u64, members: u64, timing: &Timing) -> NodeConfig {
    // The addresses are never used: the simulation carries messages itself.
    let unused = SocketAddr::from(([127, 0, 0, 1], 0));
    let peers: BTreeMap<u64, SocketAddr> = (1..=members).map(|i| (i, unused)).collect();
    let mut c = NodeConfig::new(id, peers, "");
    c.heartbeat_ticks = timing.heartbeat_ticks;
    (c.election_ticks_min, c.election_ticks_max) = timing.election_ticks;
    c.pre_vote = timing.pre_vote;
    c.check_quorum = timing.check_quorum;
    c
}

/// Both cores step, tick and hand out Readies alike; only their types and how an entry
/// yields its (index, command) differ.
macro_rules! timed_node {
    ($member:ident, $core:ident, $command:expr) => {
        impl TimedNode for $member {
            type Msg = $core::Message;

            fn tick(&mut self) {
                self.0.tick();
            }

            fn step(&mut self, msg: Self::Msg) {
                // A stale or duplicated message is refused by the core and has no effect.
                let _ = self.0.step(msg);
            }

            fn drain(&mut self, out: &mut Vec<Self::Msg>) {
                while self.0.has_ready() {
                    let mut rd = self.0.ready();
                    out.append(&mut rd.messages);
                    out.append(&mut rd.persisted_messages);
                    for entry in &rd.committed_entries {
                        let (index, command) = $command(entry);
                        if let Some(command) = command {
                            self.1.apply(index, command);
                        }
                    }
                    self.0.advance(rd);
                }
            }

            fn endpoints(msg: &Self::Msg) -> (usize, usize) {
                ((msg.from - 1) as usize, (msg.to - 1) as usize)
            }
        }
    };
}

pub struct RaftMember(coordbench_raft::RawNode, Applier);

/// A leader's no-op carries no command.
fn raft_command(e: &coordbench_raft::Entry) -> (u64, Option<&[u8]>) {
    match &e.kind {
        coordbench_raft::EntryKind::Normal(data) => (e.index, Some(data)),
        coordbench_raft::EntryKind::Noop => (e.index, None),
    }
}

timed_node!(RaftMember, coordbench_raft, raft_command);

impl Member for RaftMember {
    fn boot(id: u64, members: u64, timing: &Timing, seed: u64) -> Result<Self, String> {
        let config = node_config(id, members, timing).raft_config(seed);
        coordbench_raft::RawNode::new(config, Default::default())
            .map(|node| RaftMember(node, Applier::default()))
            .map_err(|e| e.to_string())
    }

    fn leadership(&self) -> Leadership {
        let s = self.0.status();
        let leads = s.role == coordbench_raft::Role::Leader;
        Leadership {
            leads,
            established: leads && self.0.term_at(s.commit) == Some(s.term),
            term: s.term,
        }
    }

    fn propose(&mut self, data: &[u8]) -> bool {
        self.0.propose(data.to_vec()).is_ok()
    }

    fn apply_to(&mut self, machine: Machine) {
        self.1 = Applier::new(machine);
    }

    fn applied(&self) -> u64 {
        self.1.applied()
    }
}

pub struct ZabMember(coordbench_zab::RawNode, Applier);

fn zab_command(p: &coordbench_zab::Proposal) -> (u64, Option<&[u8]>) {
    (p.zxid.0, Some(&p.data))
}

timed_node!(ZabMember, coordbench_zab, zab_command);

impl Member for ZabMember {
    fn boot(id: u64, members: u64, timing: &Timing, seed: u64) -> Result<Self, String> {
        let config = node_config(id, members, timing).zab_config(seed);
        coordbench_zab::RawNode::new(config, Default::default())
            .map(|node| ZabMember(node, Applier::default()))
            .map_err(|e| e.to_string())
    }

    fn leadership(&self) -> Leadership {
        let s = self.0.status();
        Leadership {
            leads: s.role == coordbench_zab::Role::Leading,
            established: s.is_established_leader(),
            term: s.round,
        }
    }

    fn propose(&mut self, data: &[u8]) -> bool {
        self.0.propose(data.to_vec()).is_ok()
    }

    fn apply_to(&mut self, machine: Machine) {
        self.1 = Applier::new(machine);
    }

    fn applied(&self) -> u64 {
        self.1.applied()
    }
}
