//! The node runtime: what turns a sans-IO consensus core into a server.
//!
//! A core (Raft today, Zab later) only computes; this crate gives it a clock (ticks), a
//! write-ahead log on a [`Disk`](crate) with group commit, a transport to its peers, and
//! the plumbing that services need: [`Replicator::propose`] a command and get the state
//! machine's output for it once it is committed and applied, [`Replicator::read_barrier`]
//! before a linearizable read, and [`Replicator::read`] for local (serializable) reads.
//!
//! The seam to the services is the pair [`StateMachine`] / [`Replicator`]: a service (the
//! etcd v3 gRPC API over the kv state machine, the ZooKeeper protocol over the tree state
//! machine) is written against [`Replicator`] and never learns which core replicates it.

mod seam;

pub use seam::{NodeError, NodeRole, NodeStatus, Replicator, StateMachine};
