//! The snapshot writer: a thread that makes a member's local snapshots durable off the WAL
//! writer's thread, so writing and syncing a whole-state file never holds group commits.
//!
//! The event loop takes the state machine's image at a point of the log and compacts the
//! core there (`runtime`); this thread syncs the storage the image refers to (the value log
//! of the kv state machine), then writes and syncs the snapshot file, then hands it to the
//! WAL writer (`persist`), which records it in the log in order with its other writes and
//! only then removes what it made obsolete. Until then the file counts for nothing: a crash
//! before the record leaves the previous snapshot and the whole log, as before the
//! snapshot was taken (a file cut short is never seen: it is written aside and renamed).
//!
//! Snapshots queued while one is written are coalesced into the newest: it covers what
//! the older ones would, and its storage sync covers theirs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Instant;

use crate::disk::Disk;
use crate::seam::SnapshotSync;
use crate::wal::{write_snapshot_file, Snapshot, WalError};

/// A local snapshot to make durable, with what makes the storage it names durable first.
pub(crate) type Compaction = (Snapshot, Option<SnapshotSync>);

/// A snapshot whose file is durable, named `file`; or why it could not be made durable
/// (the member must stop: the storage it names may be half-synced).
pub(crate) type Snapshotted = Result<(Snapshot, String), WalError>;

/// Runs until `queue` closes, reporting each snapshot it made durable through `done`
/// (which returns false once its receiver is gone). Stops early once `abandon` is set (a
/// crash: nothing more is written).
pub(crate) fn run(
    disk: Arc<dyn Disk>,
    queue: std_mpsc::Receiver<Compaction>,
    abandon: &AtomicBool,
    mut done: impl FnMut(Snapshotted) -> bool,
) {
    while let Ok(mut job) = queue.recv() {
        while let Ok(newer) = queue.try_recv() {
            job = newer;
        }
        let result = match store(disk.as_ref(), job, abandon) {
            Ok(None) => return,
            Ok(Some(stored)) => Ok(stored),
            Err(e) => Err(e),
        };
        let failed = result.is_err();
        if !done(result) || failed {
            return;
        }
    }
}

/// Syncs what the snapshot refers to, then writes its file, unless `abandon` is set before
/// either (then `None`). Timed: a large state's sync and write are why they are done here.
fn store(
    disk: &dyn Disk,
    (snap, sync): Compaction,
    abandon: &AtomicBool,
) -> Result<Option<(Snapshot, String)>, WalError> {
    let started = Instant::now();
    if let Some(sync) = sync {
        if abandon.load(Ordering::SeqCst) {
            return Ok(None);
        }
        sync().map_err(|why| WalError::Io {
            file: "the snapshot's storage".into(),
            source: std::io::Error::other(why),
        })?;
    }
    let synced = started.elapsed();
    if abandon.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let file = write_snapshot_file(disk, &snap)?;
    tracing::debug!(
        index = snap.index,
        bytes = snap.data.len(),
        storage_sync_us = synced.as_micros() as u64,
        snapshot_write_us = (started.elapsed() - synced).as_micros() as u64,
        "wrote local snapshot"
    );
    Ok(Some((snap, file)))
}
