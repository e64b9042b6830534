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
//! Time is an input, and only the leader's clock counts, as in etcd: no deadline is
//! replicated. The leader's [`LeaseClock`] (outside the store, fed every applied command
//! and the leader's `now_ms`) keeps each lease's deadline, renews it on a keep-alive
//! without a log entry, and says which leases expired (the leader proposes
//! `LeaseExpire { ids, .. }`, which revokes them on every replica) and which remaining
//! TTLs to checkpoint (`LeaseCheckpoint`, kept in each [`Lease`] and in snapshots). A new
//! leader's clock resumes every lease from its checkpointed remaining TTL, else its full
//! TTL, plus one election timeout, so a leader change neither revokes a lease early nor
//! (for checkpointed leases) gives it its whole TTL again.
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
pub mod auto_compaction;
pub mod command;
mod compare;
pub mod error;
mod history;
pub mod key_range;
pub mod lease;
pub mod lease_clock;
mod mvcc;
mod range;
mod snapshot;
mod store;
pub mod txn;
pub mod types;
mod values;
pub mod watch;

pub use auto_compaction::{AutoCompaction, AutoCompactionError, CompactionMode, Retention};
pub use command::{Applied, Command, Response};
pub use error::{CodecError, GrpcCode, KvError};
pub use key_range::{prefix_end, KeyRange};
pub use lease::{Lease, MAX_LEASE_TTL, MIN_LEASE_TTL};
pub use lease_clock::{LeaseAnswer, LeaseClock, LeaseQuery, LeaseTiming};
pub use store::KvStore;
pub use types::*;
pub use values::{PendingSync, MAX_VALUE_LEN};
pub use watch::{
    WatchCreateRequest, WatchCreated, WatchDelivery, WatchError, WatchFilter, WatchHub,
};
