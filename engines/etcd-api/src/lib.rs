//! etcd's v3 gRPC API over coordbench's kv state machine, for any consensus runtime.
//!
//! The services (KV, Watch, Lease, Maintenance, Cluster, Auth, and the v3lock / v3election
//! services behind `etcdctl lock` / `elect` and etcd-client's `LockClient` /
//! `ElectionClient`) are written against [`coordbench_node::Replicator`] over
//! [`KvStateMachine`]: writes are `propose`d as encoded [`coordbench_kv::Command`]s and
//! answered from the proposer's own apply; reads are local (`serializable`) or follow a
//! `read_barrier` (linearizable). The protobuf types and server traits are etcd-client's
//! (its `build-server` feature); only the lock and election servers are generated here.
//!
//! Runtime requirement: `Replicator::read` must not run concurrently with `apply` (it
//! borrows the state machine, so any sound runtime holds a lock); watch creation relies
//! on it to see each event exactly once.
//!
//! Start a member's API with [`serve`] (on a listener, until a shutdown future) or
//! [`spawn`] (in the background, with a [`ServerHandle`]).

mod auth;
mod authority;
mod auto_compaction;
mod check;
mod cluster;
mod compactor;
mod concurrency;
mod convert;
mod core;
mod election;
pub mod error;
pub mod fanout;
mod kv;
mod lease;
mod lease_expiry;
mod lock;
mod maintenance;
pub mod options;
pub mod pb;
mod server;
pub mod state_machine;
mod tls_incoming;
pub mod tokens;
mod watch;

pub use coordbench_kv::{AutoCompaction, LeaseTiming};
pub use error::ApiError;
pub use options::{MemberInfo, ServeOptions, WrongAnswer};
pub use server::{serve, spawn, ServeError, ServerHandle};
pub use state_machine::{ApplyOutput, KvStateMachine};
