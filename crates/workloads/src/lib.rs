//! Workloads: what each simulated client does, and the checkers that judge the history.
//!
//! A [`Workload`] prepares the target, hands out one [`Actor`] per client, and checks the
//! recorded history afterwards. It sees only the driver seam ([`coordbench_drivers`]), never
//! which server it runs against. Timing, loops and recording belong to the runner.

pub mod background;
pub mod barrier;
pub mod bounded;
pub mod checker;
pub mod clock;
pub mod config_watch;
mod crashable;
pub mod discovery;
pub mod election;
pub mod fencing;
pub mod herd;
pub mod histogram;
pub mod kv;
pub mod linearizability;
pub mod lock;
pub mod part;
pub mod pause;
pub mod preload;
pub mod propagation;
pub mod register;
pub mod resource;
pub mod section_log;
pub mod versions;
pub mod workload;

pub use checker::{CheckReport, LockCheck, Section};
pub use clock::RunClock;
pub use workload::{Actor, OpClass, OpResult, Workload, WorkloadError};
