//! coordbench: a benchmarking and workload-comparison suite for coordination services.
//!
//! The binary (`src/main.rs`) is a thin shell over this library. The pieces, in the order a
//! run uses them: [`cli`] parses, [`config`] validates, [`targets`] starts or attaches the
//! cluster ([`provision`]) and connects its driver, [`runner`] drives the workload and
//! records, [`results`] writes the files, [`console`] shows progress and the summary. [`sweep`] runs
//! many points, [`report`] charts them, [`compare`] judges two sets of results and
//! [`gate`] runs a baseline and a candidate interleaved and holds them to thresholds;
//! [`simulate`] runs the sans-IO cores in a deterministic simulated cluster.
//! See ARCHITECTURE.md for the seams.

pub mod affinity;
pub mod app;
pub mod capacity;
pub mod cli;
pub mod compare;
pub mod config;
pub mod console;
pub mod cumulative;
pub mod election_timing;
pub mod environment;
pub mod etcd_access;
pub mod fault;
pub mod gate;
pub mod generator;
pub mod install;
pub mod merge;
pub mod netdelay;
pub mod preload;
pub mod provision;
pub mod report;
pub mod resources;
pub mod results;
pub mod runner;
pub mod serve;
pub mod server_stats;
pub mod shard;
pub mod signals;
pub mod simulate;
pub mod sweep;
pub mod syncfs;
pub mod targets;
pub mod tls_access;
pub mod workload_options;
pub mod zk_access;
