//! `coordbench-zab`: a sans-IO Zab (ZooKeeper atomic broadcast) core.
//!
//! Same shape as `coordbench-raft`, so the same runtime can drive either.
//! The core owns no sockets, disks, clocks, threads or entropy. A runtime
//! drives it through [`RawNode`]:
//!
//! 1. feed it time with [`RawNode::tick`], peer messages with
//!    [`RawNode::step`] and client work with [`RawNode::propose`],
//!    [`RawNode::sync_read`] and [`RawNode::compact`];
//! 2. when [`RawNode::has_ready`] is true, take a [`Ready`] with
//!    [`RawNode::ready`]: send `messages` right away, make `snapshot`,
//!    `truncate_after`, `entries` and `hard_state` durable, then send
//!    `persisted_messages`, apply `committed_entries`, and serve
//!    `read_states`;
//! 3. hand the `Ready` back to [`RawNode::advance`].
//!
//! The protocol follows ZooKeeper: fast leader election (votes ordered by
//! epoch, last zxid, id), discovery (FOLLOWERINFO / NEWEPOCH / ACKEPOCH),
//! synchronization (DIFF / TRUNC / SNAP, NEWLEADER, UPTODATE) and broadcast
//! (PROPOSAL / ACK / COMMIT, pipelined and batched), made robust to a
//! network that loses, duplicates and reorders messages. Commands are opaque
//! bytes identified by [`Zxid`]s.

mod config;
mod election;
mod error;
mod follower;
mod leader;
mod learner;
mod log;
mod message;
mod quorum;
mod raw_node;
mod read;
mod ready;
mod rng;
mod sync;
mod zab;
mod zxid;

pub use config::Config;
pub use error::{ConfigError, Error};
pub use message::{
    HardState, Message, MessageBody, NodeId, Phase, Proposal, Role, Snapshot, SyncKind, Vote,
};
pub use raw_node::{PersistedState, RawNode, Status};
pub use ready::{ReadState, Ready, SoftState};
pub use zxid::Zxid;
