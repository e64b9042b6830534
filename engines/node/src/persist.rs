//! The WAL writer: a thread that owns a member's [`Wal`] and makes the event loop's writes
//! durable in the order they were queued, with one sync for everything queued while the
//! previous sync ran (group commit).
//!
//! The event loop only queues writes and goes on stepping its core, so acks, proposals and
//! ticks are handled while a sync is in flight, and a slow sync (an emulated hdd's 8 ms)
//! gathers the next batch instead of stalling the member. This is what etcd's raft calls
//! asynchronous storage writes. The loop hears of each write's durability as a [`Durable`]
//! and only then sends what promises it (votes, acks) and advances the core.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::mpsc;

use crate::seam::SnapshotSync;
use crate::wal::{LogFormat, Snapshot, Wal, WalError};

/// Jobs written (and synced once) per group at most, so completions keep flowing.
const GROUP: usize = 1024;

/// A write to make durable, in queue order.
pub(crate) enum Job<F: LogFormat> {
    /// The durable part of one core `Ready`: a received snapshot to store (it replaces the
    /// whole log), a truncation, entries and hard state. `sync`: whether it must be synced
    /// before it is reported (a commit-point-only hard state need not be).
    Ready {
        seq: u64,
        snapshot: Option<Snapshot>,
        truncate_after: Option<u64>,
        entries: Vec<F::Entry>,
        hard_state: Option<F::HardState>,
        sync: bool,
    },
    /// A snapshot taken locally after compaction: covers a prefix; nothing waits on it. The
    /// sync, if any, makes the storage the snapshot refers to durable and runs first: the
    /// snapshot must not be durable before what it names is.
    Compacted(Snapshot, Option<SnapshotSync>),
}

/// A queued `Ready` is durable (with every job queued before it). A received snapshot
/// comes back, to be installed in the state machine.
pub(crate) struct Durable {
    pub seq: u64,
    pub snapshot: Option<Snapshot>,
}

/// One group written: durable jobs in queue order, and the local snapshots it stored, with
/// their data now mapped from the snapshot file (see [`Wal::mapped_snapshot`]) so the core
/// can let go of the heap copy it keeps for followers.
#[derive(Default)]
pub(crate) struct Written {
    pub durable: Vec<Durable>,
    pub stored: Vec<Snapshot>,
}

/// What the writer reports to the loop: a group written, or the failure that stopped it
/// (the member must stop: what it promised may not be on disk).
pub(crate) type Report = Result<Written, WalError>;

/// The loop's side of the writer thread.
pub(crate) struct WalWriter<F: LogFormat> {
    jobs: Option<std_mpsc::Sender<Job<F>>>,
    thread: Option<JoinHandle<Result<(), WalError>>>,
    /// Set when the loop is dropped without a clean stop (a crash, in tests): the writer
    /// ends without writing what is still queued, as a crashed process would.
    abandon: Arc<AtomicBool>,
}

impl<F: LogFormat> WalWriter<F> {
    /// Starts the writer thread on `wal`; its reports arrive on the returned receiver.
    pub(crate) fn start(
        name: String,
        wal: Wal<F>,
    ) -> std::io::Result<(Self, mpsc::UnboundedReceiver<Report>)> {
        let (jobs, queue) = std_mpsc::channel();
        let (reports, received) = mpsc::unbounded_channel();
        let abandon = Arc::new(AtomicBool::new(false));
        let abandoned = abandon.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || write_loop(wal, queue, reports, &abandoned))?;
        Ok((
            Self {
                jobs: Some(jobs),
                thread: Some(thread),
                abandon,
            },
            received,
        ))
    }

    /// Queues `job`. False once the writer has stopped (its report says why).
    pub(crate) fn submit(&self, job: Job<F>) -> bool {
        self.jobs.as_ref().is_some_and(|q| q.send(job).is_ok())
    }

    /// Lets the writer finish what is queued, sync it, and waits for the thread to end.
    pub(crate) fn finish(mut self) -> Result<(), WalError> {
        self.jobs.take();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(WalError::Broken),
            None => Ok(()),
        }
    }
}

impl<F: LogFormat> Drop for WalWriter<F> {
    fn drop(&mut self) {
        // Not finished cleanly: stop after the group being written (at most one sync), and
        // wait for that, so that a member restarted on the same disk is its only writer.
        self.abandon.store(true, Ordering::SeqCst);
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn write_loop<F: LogFormat>(
    mut wal: Wal<F>,
    queue: std_mpsc::Receiver<Job<F>>,
    reports: mpsc::UnboundedSender<Report>,
    abandon: &AtomicBool,
) -> Result<(), WalError> {
    // Blocks for the first job of a group; the queue closing ends the writer.
    while let Ok(first) = queue.recv() {
        if abandon.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut group = vec![first];
        while group.len() < GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        match write_group(&mut wal, group) {
            Ok(written) => {
                if !written.durable.is_empty() || !written.stored.is_empty() {
                    // The loop may be gone (stopping); the write stands either way.
                    let _ = reports.send(Ok(written));
                }
            }
            Err(e) => {
                let _ = reports.send(Err(e));
                return Err(WalError::Broken);
            }
        }
    }
    if abandon.load(Ordering::SeqCst) {
        return Ok(());
    }
    wal.sync()
}

/// Writes a group in order and syncs once if any job needs it.
fn write_group<F: LogFormat>(wal: &mut Wal<F>, group: Vec<Job<F>>) -> Result<Written, WalError> {
    let mut written = Written {
        durable: Vec::with_capacity(group.len()),
        stored: Vec::new(),
    };
    let mut must_sync = false;
    for job in group {
        match job {
            Job::Ready {
                seq,
                snapshot,
                truncate_after,
                entries,
                hard_state,
                sync,
            } => {
                if let Some(s) = &snapshot {
                    wal.save_snapshot(s, true)?;
                }
                wal.append(truncate_after, &entries, hard_state.as_ref())?;
                must_sync |= sync;
                written.durable.push(Durable { seq, snapshot });
            }
            Job::Compacted(snap, sync) => {
                store_compacted(wal, &snap, sync)?;
                if let Some(data) = wal.mapped_snapshot(&snap)? {
                    written.stored.push(Snapshot { data, ..snap });
                }
            }
        }
    }
    if must_sync {
        wal.sync()?;
    }
    Ok(written)
}

/// Syncs what a local snapshot refers to, then writes the snapshot (timed: a large state's
/// sync and write are why they are done here rather than on the event loop).
fn store_compacted<F: LogFormat>(
    wal: &mut Wal<F>,
    snap: &Snapshot,
    sync: Option<SnapshotSync>,
) -> Result<(), WalError> {
    let started = Instant::now();
    if let Some(sync) = sync {
        sync().map_err(|why| WalError::Io {
            file: "the snapshot's storage".into(),
            source: std::io::Error::other(why),
        })?;
    }
    let synced = started.elapsed();
    wal.save_snapshot(snap, false)?;
    tracing::debug!(
        index = snap.index,
        bytes = snap.data.len(),
        storage_sync_us = synced.as_micros() as u64,
        snapshot_write_us = (started.elapsed() - synced).as_micros() as u64,
        "stored local snapshot"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::{Disk, MemDisk};
    use crate::raft_node::RaftWal;
    use bytes::Bytes;
    use coordbench_raft::{Entry, EntryKind, HardState};
    use std::sync::atomic::AtomicUsize;

    fn wal_with_ten_entries(disk: &MemDisk) -> RaftWal {
        let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), Default::default()).unwrap();
        let entries: Vec<Entry> = (1..=10)
            .map(|index| Entry {
                term: 1,
                index,
                kind: EntryKind::Normal(vec![index as u8]),
            })
            .collect();
        let hs = HardState {
            term: 1,
            vote: Some(1),
            commit: 10,
        };
        wal.append(None, &entries, Some(&hs)).unwrap();
        wal.sync().unwrap();
        wal
    }

    fn snapshot_files(disk: &MemDisk) -> usize {
        let names = disk.list().unwrap();
        names.iter().filter(|n| n.ends_with(".snap")).count()
    }

    fn compacted(sync: SnapshotSync) -> Job<crate::raft_node::RaftFormat> {
        let snap = Snapshot {
            index: 6,
            term: 1,
            data: Bytes::from_static(b"state"),
        };
        Job::Compacted(snap, Some(sync))
    }

    #[test]
    fn the_storage_a_snapshot_names_is_synced_before_the_snapshot_is_written() {
        let disk = MemDisk::new();
        let mut wal = wal_with_ten_entries(&disk);
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (probe, probed) = (disk.clone(), seen.clone());
        let sync: SnapshotSync = Box::new(move || {
            probed.store(snapshot_files(&probe), Ordering::SeqCst);
            Ok(())
        });
        write_group(&mut wal, vec![compacted(sync)]).unwrap();
        assert_eq!(
            seen.load(Ordering::SeqCst),
            0,
            "no snapshot file during the sync"
        );
        drop(wal);
        let (_, recovered) = RaftWal::open(Arc::new(disk), Default::default()).unwrap();
        assert_eq!(recovered.snapshot.map(|s| s.index), Some(6));
    }

    #[test]
    fn a_failed_storage_sync_fails_the_write_and_leaves_no_snapshot() {
        let disk = MemDisk::new();
        let mut wal = wal_with_ten_entries(&disk);
        let sync: SnapshotSync = Box::new(|| Err("disk gone".into()));
        let err = write_group(&mut wal, vec![compacted(sync)]).err();
        assert!(matches!(err, Some(WalError::Io { .. })), "{err:?}");
        drop(wal);
        let (_, recovered) = RaftWal::open(Arc::new(disk), Default::default()).unwrap();
        assert!(recovered.snapshot.is_none());
        assert_eq!(recovered.entries.len(), 10, "the log is kept whole");
    }
}
