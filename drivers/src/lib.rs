//! The driver seam of coordbench: one [`Coordinator`] per API family.
//!
//! A workload talks only to the traits in [`coordinator`]; it never learns which server it
//! runs against. The etcd driver speaks etcd's v3 gRPC API (real etcd and the built-in Raft
//! engine), the ZooKeeper driver ZooKeeper's protocol (real ZooKeeper and the built-in Zab
//! engine); the null driver runs in-process and measures the load generator itself.
//! Lock recipes live with their API family, because a recipe is a protocol over that API.

pub mod backoff;
pub mod coordinator;
pub mod counters;
pub mod error;
pub mod etcd;
pub mod freeze;
pub mod null;
pub mod postgres;
pub mod probe;
pub mod recipe;
pub mod redis;
pub mod schedule;
pub mod zookeeper;
pub mod zookeeper_async;

pub use coordinator::{
    CasOutcome, Consistency, Coordinator, LeaderView, LeaderWatch, Leadership, LockGuard,
    MembersWatch, Registration, Session, SessionOptions, ValueWatch, Versioned,
};
pub use counters::{ClientCounters, CounterHandle};
pub use error::DriverError;
pub use freeze::FreezeGate;
pub use recipe::{ApiFamily, LockRecipe};
