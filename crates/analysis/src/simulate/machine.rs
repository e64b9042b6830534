//! The state machines a simulated member applies its committed commands to: the engines'
//! own stores (engines/kv's `KvStore` behind raft's etcd API, engines/tree's `DataTree`
//! behind zab's ZooKeeper API), decoded from the same bytes the engines replicate, with
//! the same per-commit hook the engines' runtime calls
//! ([`coordbench_node::slowdown::per_commit`]).

use coordbench_kv::KvStore;
use coordbench_tree::DataTree;

/// One member's state.
pub enum Machine {
    Kv(Box<KvStore>),
    Tree(Box<DataTree>),
}

/// Applies committed commands to a [`Machine`], if the member has one, and counts them.
#[derive(Default)]
pub struct Applier {
    machine: Option<Machine>,
    applied: u64,
}

impl Applier {
    pub fn new(machine: Machine) -> Applier {
        Applier {
            machine: Some(machine),
            applied: 0,
        }
    }

    /// Applies one committed command. A command that does not decode is skipped, as the
    /// engines answer it with a decode error on every replica alike.
    pub fn apply(&mut self, index: u64, command: &[u8]) {
        let Some(machine) = &mut self.machine else {
            return;
        };
        coordbench_node::slowdown::per_commit();
        match machine {
            Machine::Kv(store) => {
                if let Ok(cmd) = coordbench_kv::Command::decode(command) {
                    store.apply(index, &cmd);
                }
            }
            Machine::Tree(tree) => {
                if let Ok(cmd) = coordbench_tree::Command::decode(command) {
                    tree.apply(i64::try_from(index).unwrap_or(i64::MAX), &cmd);
                }
            }
        }
        self.applied += 1;
    }

    pub fn applied(&self) -> u64 {
        self.applied
    }
}
