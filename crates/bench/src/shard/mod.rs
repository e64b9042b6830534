//! Sharded runs (`coordbench run --shard I/N`): N plain coordbench processes, on one
//! machine or many, share one run. [`Part`] (in the workloads crate, whose election
//! observers follow it too) decides which clients, start slots and operations are a
//! shard's; [`plan`] validates the options; [`start`] gives the shards a
//! common start (a wall-clock time, or a rendezvous at the target); [`record`] is what a
//! shard writes into run.json; [`intervals`] keeps its measured intervals losslessly for
//! `coordbench merge` (src/merge).

pub mod args;
pub mod intervals;
pub mod plan;
pub mod record;
pub mod start;

pub use args::ShardArgs;
pub use coordbench_workloads::part::Part;
pub use plan::{Sharding, StartRule};
pub use record::{MergeRecord, MergedShard, ShardRecord, WallAnchor};
pub use start::{wait_for_start, StartError, Started};
