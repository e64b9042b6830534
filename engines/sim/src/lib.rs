//! Deterministic simulation harness shared by the sans-IO consensus cores'
//! tests (`coordbench-raft`, `coordbench-zab`).
//!
//! One seed drives everything: [`SimRng`] draws every fault, delay and
//! client action; [`Sim`] owns the simulated network (loss, duplication,
//! delay, reordering, partitions), schedules crashes (losing whatever was
//! not yet "fsynced") and restarts, runs the fault phase, heals and waits
//! for convergence; [`Harness`] sweeps seeds and prints how to replay a
//! failing one. Everything protocol-specific — configuration, the durable
//! state, what a Ready means, the client operations and the invariant
//! checker — lives in each core's tests behind the [`Core`] trait.
//!
//! Also shared by the engines' other tests: [`fuzz`] (bounded, seeded fuzzing of
//! decoders) and [`tools`] (tests driving an external tool skip without it, except
//! under CI).
//! [`TimedCluster`] is the timed counterpart for measurements (`coordbench simulate`): a
//! virtual clock in microseconds, per-node tick phases and a link latency with jitter.

//!
//! Only [`SimRng`] and the timed cluster are built by default; the test support (the
//! deterministic harness, fuzzing, property-test generators, external tools) is behind the
//! `test-support` feature, which the engines' dev-dependencies enable, so the release
//! binary links neither proptest nor the harness.

#[cfg(feature = "test-support")]
pub mod fuzz;
#[cfg(feature = "test-support")]
mod harness;
#[cfg(feature = "test-support")]
mod prop_rng;
mod rng;
#[cfg(feature = "test-support")]
mod sim;
mod timed;
#[cfg(feature = "test-support")]
pub mod tools;

#[cfg(feature = "test-support")]
pub use harness::{Harness, Summary};
#[cfg(feature = "test-support")]
pub use prop_rng::PropRng;
pub use rng::SimRng;
#[cfg(feature = "test-support")]
pub use sim::{Core, Faults, Node, Sim, SimOptions};
pub use timed::{LinkModel, TimedCluster, TimedNode, TimedStats};
