//! ZooKeeper's client protocol over coordbench's tree state machine, for any consensus
//! runtime.
//!
//! The server speaks ZooKeeper's wire protocol on TCP: length-prefixed jute frames
//! ([`jute`], [`proto`], [`request`], [`reply`]: the codec lives in the
//! `coordbench-zk-proto` crate, shared with the ZooKeeper driver's client, and is
//! re-exported here under these paths), a ConnectRequest / ConnectResponse
//! handshake, then requests (header: xid, op code) and replies (header: xid, zxid, error),
//! with watch notifications (xid -1) interleaved, and the four-letter words on the same
//! port. It is written against [`coordbench_node::Replicator`] over [`TreeStateMachine`]:
//! writes are `propose`d as encoded [`coordbench_tree::Command`]s and answered from the
//! proposer's own apply; reads are local (ZooKeeper's sequential consistency), `sync` is a
//! read barrier.
//!
//! Sessions: see `sessions.rs` (replicated touches, batched per tick) and `leader.rs`
//! (expiry and container / TTL checks, decided by the leader's clock, replicated as
//! commands). Watches: see `router.rs`.
//!
//! Runtime requirement: `Replicator::read` must not run concurrently with `apply` (it
//! borrows the state machine, so any sound runtime holds a lock); replies and watch
//! registrations rely on it for their ordering with notifications.
//!
//! Access control: every connection's ids (`auth.rs`: its ip, its addauth digests) go with
//! its writes into the replicated command, where the tree checks ACLs at apply; reads check
//! READ against the local tree. `ServeOptions::enforce_auth` refuses unauthenticated
//! connections as ZooKeeper's `enforce.auth.enabled` does.
//!
//! Start a member's server with [`serve`] (on a listener, until a shutdown future) or
//! [`spawn`] (in the background, with a [`ServerHandle`]).

pub mod auth;
pub mod client;
mod client_cap;
mod conn;
mod core;
pub mod four_letter;
pub mod frame;
mod handler;
mod leader;
pub mod options;
pub mod router;
mod server;
mod sessions;
pub mod state_machine;
pub mod stats;
mod wire_acl;

pub use coordbench_zk_proto::{jute, proto, reply, request};
pub use options::ServeOptions;
pub use server::{serve, spawn, ServeError, ServerHandle};
pub use state_machine::{ApplyOutput, TreeStateMachine};
