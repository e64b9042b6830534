//! ZooKeeper's client protocol records and their jute encoding, in both directions: what a
//! client sends and what a server answers, each codable either way.
//!
//! [`jute`] holds the primitives (a bounds-checked [`jute::Reader`], a [`jute::Writer`],
//! [`jute::DecodeError`]); [`proto`] the records of zookeeper.jute with the op codes and
//! special xids; [`request`] a request frame as a typed [`request::Request`]; [`reply`]
//! reply bodies by the request's op, reply frames and watch notification frames.
//!
//! Shared by the Zab engine's server (engines/zk-api, which re-exports these modules under
//! its own paths) and the ZooKeeper driver's client, so that a driver need not depend on an
//! engine crate. The records carry coordbench-tree's own `Stat`, `Acl` and `WatchEvent`.

/// `KeeperException.Code`s, as reply headers and multi results carry them.
pub use coordbench_tree::error::code;

pub mod jute;
pub mod proto;
pub mod reply;
pub mod request;

#[cfg(test)]
mod codec_tests;
