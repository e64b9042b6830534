//! The `coordbench` command: its command line ([`cli`]) and the commands that compose the
//! workspace's crates into more than one run: [`sweep`] runs a spec's points and reports
//! them, [`capacity`] searches for the highest rate that meets an objective, [`gate`] runs
//! a baseline and a candidate interleaved and holds them to thresholds, and [`merge`] joins
//! a sharded run's shards. One run is the bench crate's, reading results the analysis
//! crate's, clusters the lab crate's; ARCHITECTURE.md maps them.

pub mod capacity;
pub mod cli;
pub mod gate;
pub mod merge;
pub mod sweep;
