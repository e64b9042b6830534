//! One coordbench run, start to finish. [`args`] is `run`'s command line, [`config`]
//! checks it into a [`config::RunConfig`], [`targets`] starts or attaches the cluster (the
//! lab's provisioning) and connects its driver, [`run`] drives the workload through the
//! [`runner`] while [`fault`] injects faults and [`generator`] watches the generator's own
//! cost, and [`outputs`] writes the result files; [`console`] shows progress and the
//! summary. [`shard`] splits one run over several generator machines, [`preload`] fills
//! the store first, and the `*_access` modules hold the security options.

pub mod args;
pub mod config;
pub mod console;
pub mod engine_cost;
pub mod etcd_access;
pub mod fault;
pub mod generator;
pub mod outputs;
pub mod preload;
pub mod run;
pub mod runner;
pub mod server_stats;
pub mod shard;
pub mod targets;
pub mod tls_access;
pub mod zk_access;
