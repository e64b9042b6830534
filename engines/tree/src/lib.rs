//! ZooKeeper's data model as a deterministic state machine.
//!
//! [`DataTree`] sits under a consensus core that replicates opaque bytes: a member turns
//! client requests into [`Command`]s, encodes them ([`Command::encode`]), and every
//! replica applies the decoded command with [`DataTree::apply`] at the command's zxid
//! (its log position, given by the runtime). The tree knows nothing about the protocol
//! that replicated the command, and the protocol nothing about the tree's internals.
//!
//! # Model
//! Znodes are persistent, ephemeral (owned by a session), sequential (named with a
//! 10-digit counter from the parent's cversion), container (deleted once empty after
//! having had children) or TTL (deleted once empty and unmodified for the TTL). Each has
//! ZooKeeper's full [`Stat`]. Writes (create, delete, setData, check, and multi, which
//! applies all of its ops or none) check versions (-1 matches any) and fail with
//! ZooKeeper's codes ([`TreeError::code`]). The tree starts with `/`, `/zookeeper`,
//! `/zookeeper/quota` and `/zookeeper/config`, as ZooKeeper's does.
//!
//! # Access control
//! Every node keeps its ACL (set at create, changed by `SetAcl`, with the stat's
//! aversion). Writes carry the ids their session authenticated (`auth`), and the tree
//! checks them as ZooKeeper does: CREATE and DELETE on the parent, WRITE for setData,
//! READ for check, ADMIN for setACL; readers check READ through [`DataTree::check_perm`].
//! See [`acl`].
//!
//! # Determinism and time
//! No I/O, no clock, no threads, no randomness, no hash-ordered containers: the same
//! commands at the same zxids give equal [`Applied`] outputs (results, watch events, ended
//! sessions) and byte-identical [`DataTree::snapshot`]s on every replica. Time is an input:
//! ctime/mtime and session deadlines come from the `now_ms` inside commands.
//!
//! # Sessions
//! `CreateSession` opens a session whose id is its zxid (unique, nonzero) and whose
//! password the proposer chose. Its deadline is `now_ms + timeout`; `TouchSessions` (and
//! any write of the session) moves it forward. Replicas never decide expiry: the leader
//! asks [`DataTree::expired_sessions`] with its own clock and proposes `ExpireSessions`,
//! which ends only sessions still expired when it applies (a touch committed in between
//! wins), deleting their ephemerals. A new leader first proposes `RenewAllSessions`, so
//! that no session expires for the leaderless interval. Container and TTL deletion works
//! the same way: [`DataTree::reap_candidates`] then `Reap`.
//!
//! # Watches
//! Every applied command lists its [`WatchEvent`]s (NodeCreated, NodeDeleted,
//! NodeDataChanged, NodeChildrenChanged; in the order made). A server routes them with a
//! [`WatchManager`]: one-shot data / exist / child watches, and addWatch's persistent and
//! persistent-recursive ones.

pub mod acl;
pub mod command;
pub mod error;
mod node;
pub mod path;
mod snapshot;
mod tree;
pub mod types;
pub mod watch;
mod write;

pub use acl::{Acl, Id};
pub use command::{Applied, Command, MultiOutcome, Op, OpResult, Response};
pub use error::{code, CodecError, TreeError};
pub use node::Session;
pub use tree::DataTree;
pub use types::{CreateMode, EventType, NodeKind, Stat, WatchEvent, MAX_TTL_MS};
pub use watch::{WatchKind, WatchManager, WatchSet};
