//! etcd's v3 data model as a deterministic state machine.
//!
//! [`KvStore`] sits under a consensus core that replicates opaque bytes: the
//! leader runtime turns client requests into [`Command`]s, encodes them
//! ([`Command::encode`]), and every replica applies the decoded command with
//! [`KvStore::apply`]. The store knows nothing about the protocol that
//! replicated the command, and the protocol nothing about the command.
//!
//! # Determinism
//! No I/O, no clock, no threads, no randomness, no hash-ordered containers.
//! Applying the same commands in the same order gives byte-identical
//! [`KvStore::snapshot`]s, equal [`Applied`] results (responses, errors and
//! watch events) on every replica. Errors are results too: a command that
//! fails validation fails on every replica and changes nothing (a txn is
//! rolled back whole).
//!
//! # Lease time
//! Time is an input. `LeaseGrant`, `LeaseRenew` (a replicated keep-alive)
//! and `LeaseRenewAll` carry the leader's `now_ms`; each lease stores its
//! granted TTL and `deadline_ms = now_ms + ttl * 1000`. Replicas never
//! decide expiry: the leader runtime asks [`KvStore::expired_leases`] with
//! its own clock and proposes `LeaseExpire { ids, now_ms }`, which revokes
//! (deleting attached keys) only the listed leases whose stored deadline is
//! `<= now_ms`, so a keep-alive committed in between wins on every replica.
//! A new leader proposes `LeaseRenewAll` first, as etcd's lessor extends
//! leases on promotion: no lease expires for the leaderless interval, and
//! deadlines move onto the new leader's clock (clocks of different nodes
//! need not agree). A runtime that prefers etcd's unreplicated keep-alives
//! may keep its own deadlines and propose `LeaseRevoke` instead.
//!
//! # Reads and watches
//! [`KvStore::range`] and [`KvStore::txn_read_only`] answer locally
//! (serializable); a linearizable read is the runtime's ReadIndex wait
//! followed by the same call. [`Applied::events`] carries the watch events
//! of each write; [`WatchHub`] routes them, and
//! [`KvStore::events_since`] replays history for late watchers.
//!
//! Revisions follow etcd: the store starts at revision 1, each
//! write-bearing command (a whole txn, a lease revoke) makes one new
//! revision, and compaction at `c` keeps every revision `>= c` readable.

pub mod auth;
mod auth_check;
pub mod command;
mod compare;
pub mod error;
mod history;
pub mod key_range;
pub mod lease;
mod mvcc;
mod range;
mod snapshot;
mod store;
pub mod txn;
pub mod types;
mod values;
pub mod watch;

pub use command::{Applied, Command, Response};
pub use error::{CodecError, GrpcCode, KvError};
pub use key_range::{prefix_end, KeyRange};
pub use lease::{Lease, MAX_LEASE_TTL, MIN_LEASE_TTL};
pub use store::KvStore;
pub use types::*;
pub use values::{PendingSync, MAX_VALUE_LEN};
pub use watch::{
    WatchCreateRequest, WatchCreated, WatchDelivery, WatchError, WatchFilter, WatchHub,
};
