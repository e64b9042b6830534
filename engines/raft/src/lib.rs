//! `coordbench-raft`: a sans-IO Raft consensus core.
//!
//! The core owns no sockets, disks, clocks, threads or entropy. A runtime
//! drives it through [`RawNode`]:
//!
//! 1. feed it time with [`RawNode::tick`], peer messages with [`RawNode::step`]
//!    and client work with [`RawNode::propose`], [`RawNode::read_index`],
//!    [`RawNode::transfer_leader`] and [`RawNode::compact`];
//! 2. when [`RawNode::has_ready`] is true, take a [`Ready`] with [`RawNode::ready`]:
//!    send `messages` right away, make `snapshot`, `entries` and `hard_state`
//!    durable, then send `persisted_messages`, apply `committed_entries`, and
//!    serve `read_states`;
//! 3. hand the `Ready` back to [`RawNode::advance`].
//!
//! Commands are opaque bytes; the core never interprets them. Randomized
//! election timeouts come from a deterministic generator seeded by
//! [`Config::seed`], so a run is reproducible from its inputs.

mod config;
mod election;
mod error;
mod log;
mod message;
mod progress;
mod quorum;
mod raft;
mod raw_node;
mod read_index;
mod ready;
mod replication;
mod rng;

/// The shared byte buffer snapshots carry.
pub use bytes::Bytes;
pub use config::Config;
pub use error::{ConfigError, Error};
pub use message::{
    Entry, EntryKind, HardState, Message, MessageBody, NodeId, RejectHint, Snapshot,
};
pub use raft::Role;
pub use raw_node::{PersistedState, RawNode, Status};
pub use ready::{ReadState, Ready, SoftState};
