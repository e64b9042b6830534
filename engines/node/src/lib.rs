//! The node runtime: what turns a sans-IO consensus core into a server.
//!
//! A core (Raft or Zab) only computes; this crate gives it a clock (ticks), a
//! write-ahead log on a [`Disk`] with group commit, a transport to its peers, and
//! the plumbing that services need: [`Replicator::propose`] a command and get the state
//! machine's output for it once it is committed and applied, [`Replicator::read_barrier`]
//! before a linearizable read, and [`Replicator::read`] for local (serializable) reads.
//!
//! The seam to the services is the pair [`StateMachine`] / [`Replicator`]: a service (the
//! etcd v3 gRPC API over the kv state machine, the ZooKeeper protocol over the tree state
//! machine) is written against [`Replicator`] and never learns which core replicates it.
//!
//! One runtime serves both cores: the event loop (`runtime`), the start-up path (`node`)
//! and the [`Wal`] are generic over a small core trait (`core::Core`) and a WAL format
//! ([`LogFormat`]); `raft_node` and `zab_node` are the adapters of the two cores.
//!
//! Start a Raft member with [`RaftNode::start`] (files + TCP) or [`RaftNode::start_with`]
//! (any [`Disk`] and [`Transport`]); it returns a [`RaftHandle`] (the `Replicator`) and a
//! [`NodeTask`] to stop it. [`ZabNode::start`] does the same for a Zab member (the Zab core,
//! a [`ZabWal`], the same transports, handle and envelopes).

mod cadence;
mod census;
mod chunk;
mod config;
mod core;
pub mod disk;
mod envelope;
mod handle;
mod local;
mod node;
mod persist;
mod raft_node;
mod record;
mod runtime;
mod seam;
pub mod since_exec;
pub mod slowdown;
mod snapfile;
mod snapshotter;
pub mod tcp;
pub mod transport;
pub mod wal;
mod zab_node;

#[cfg(test)]
mod fuzz_tests;

pub use cadence::{POSTPONE_LIMIT, SNAPSHOT_LOG_FRACTION};
pub use census::{census, DataCensus};
pub use config::NodeConfig;
pub use disk::{Disk, DiskFile, DiskKind, FileDisk, MemDisk};
pub use envelope::{Envelope, Payload, Refusal};
pub use handle::{NodeHandle, RaftHandle, ZabHandle};
pub use local::LocalReplicator;
pub use node::{NodeTask, StartError};
pub use raft_node::{RaftFormat, RaftNode, RaftWal};
pub use runtime::RuntimeError;
pub use seam::{NodeError, NodeRole, NodeStatus, Replicator, SnapshotSync, StateMachine};
pub use tcp::{TcpOptions, TcpTransport};
pub use transport::{InProcNetwork, InProcTransport, Transport};
pub use wal::{LogFormat, Wal, WalError, WalOptions, WalStats};
pub use zab_node::{ZabFormat, ZabNode, ZabWal};
