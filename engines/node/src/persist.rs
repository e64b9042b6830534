//! The WAL writer: a thread that owns a member's [`Wal`] and makes the event loop's writes
//! durable in the order they were queued, with one sync for everything queued while the
//! previous sync ran (group commit).
//!
//! The event loop only queues writes and goes on stepping its core, so acks, proposals and
//! ticks are handled while a sync is in flight, and a slow sync (an emulated hdd's 8 ms)
//! gathers the next batch instead of stalling the member. This is what etcd's raft calls
//! asynchronous storage writes. The loop hears of each write's durability as a [`Durable`]
//! and only then sends what promises it (votes, acks) and advances the core.
//!
//! Local snapshots go to a thread of their own (`snapshotter`), which writes and syncs the
//! file and then queues it here as a [`Job::Snapshotted`]: the WAL records it in order with
//! the other writes, so a group commit never waits for a whole-state file.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::mpsc;

use crate::seam::SnapshotSync;
use crate::snapshotter::{self, Compaction, Snapshotted};
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
    /// A snapshot taken locally after compaction, its file now durable (see `snapshotter`),
    /// to record: covers a prefix; nothing waits on it. Or why its file could not be made
    /// durable, which stops the writer.
    Snapshotted(Snapshotted),
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

/// The loop's side of the writer thread and of the snapshot thread that feeds it.
pub(crate) struct WalWriter<F: LogFormat> {
    jobs: Option<std_mpsc::Sender<Job<F>>>,
    thread: Option<JoinHandle<Result<(), WalError>>>,
    snapshots: Option<std_mpsc::Sender<Compaction>>,
    snapshot_thread: Option<JoinHandle<()>>,
    /// Set when the loop is dropped without a clean stop (a crash, in tests): the writers
    /// end without writing what is still queued, as a crashed process would.
    abandon: Arc<AtomicBool>,
}

impl<F: LogFormat> WalWriter<F> {
    /// Starts the writer thread on `wal` (and the snapshot thread, `<name>-snap`); their
    /// reports arrive on the returned receiver.
    pub(crate) fn start(
        name: String,
        wal: Wal<F>,
    ) -> std::io::Result<(Self, mpsc::UnboundedReceiver<Report>)> {
        let (jobs, queue) = std_mpsc::channel();
        let (reports, received) = mpsc::unbounded_channel();
        let abandon = Arc::new(AtomicBool::new(false));
        let (snapshots, snapshot_queue) = std_mpsc::channel();
        let (disk, to_wal, abandoned) = (wal.disk(), jobs.clone(), abandon.clone());
        let snapshot_thread = std::thread::Builder::new()
            .name(format!("{name}-snap"))
            .spawn(move || {
                snapshotter::run(disk, snapshot_queue, &abandoned, |done| {
                    to_wal.send(Job::Snapshotted(done)).is_ok()
                })
            })?;
        let abandoned = abandon.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || write_loop(wal, queue, reports, &abandoned))?;
        Ok((
            Self {
                jobs: Some(jobs),
                thread: Some(thread),
                snapshots: Some(snapshots),
                snapshot_thread: Some(snapshot_thread),
                abandon,
            },
            received,
        ))
    }

    /// Queues `job`. False once the writer has stopped (its report says why).
    pub(crate) fn submit(&self, job: Job<F>) -> bool {
        self.jobs.as_ref().is_some_and(|q| q.send(job).is_ok())
    }

    /// Queues a local snapshot for the snapshot thread; `sync` makes the storage it refers
    /// to durable and runs first: the snapshot must not be durable before what it names is.
    /// False once that thread has stopped (the WAL writer's report says why).
    pub(crate) fn snapshot(&self, snap: Snapshot, sync: Option<SnapshotSync>) -> bool {
        self.snapshots
            .as_ref()
            .is_some_and(|q| q.send((snap, sync)).is_ok())
    }

    /// Lets the snapshot thread and then the writer finish what is queued, sync it, and
    /// waits for both threads to end.
    pub(crate) fn finish(mut self) -> Result<(), WalError> {
        self.stop_snapshots();
        self.jobs.take();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(WalError::Broken),
            None => Ok(()),
        }
    }

    /// Closes the snapshot queue and waits for the snapshot thread, which hands what it
    /// wrote to the writer before it ends (the writer's queue stays open meanwhile).
    fn stop_snapshots(&mut self) {
        self.snapshots.take();
        if let Some(thread) = self.snapshot_thread.take() {
            let _ = thread.join();
        }
    }
}

impl<F: LogFormat> Drop for WalWriter<F> {
    fn drop(&mut self) {
        // Not finished cleanly: stop after the group (and the snapshot) being written, and
        // wait for that, so that a member restarted on the same disk is its only writer.
        self.abandon.store(true, Ordering::SeqCst);
        self.stop_snapshots();
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
            Job::Snapshotted(snapshotted) => {
                let (snap, file) = snapshotted?;
                if wal.record_snapshot(snap.index, snap.term, false, &file)? {
                    if let Some(data) = wal.mapped_snapshot(&snap)? {
                        written.stored.push(Snapshot { data, ..snap });
                    }
                }
            }
        }
    }
    if must_sync {
        wal.sync()?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::{Disk, MemDisk};
    use crate::raft_node::{RaftFormat, RaftWal};
    use bytes::Bytes;
    use coordbench_raft::{Entry, EntryKind, HardState};
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn entries(lo: u64, hi: u64) -> Vec<Entry> {
        (lo..=hi)
            .map(|index| Entry {
                term: 1,
                index,
                kind: EntryKind::Normal(vec![index as u8]),
            })
            .collect()
    }

    fn wal_with_ten_entries(disk: &MemDisk) -> RaftWal {
        let (mut wal, _) = RaftWal::open(Arc::new(disk.clone()), Default::default()).unwrap();
        let hs = HardState {
            term: 1,
            vote: Some(1),
            commit: 10,
        };
        wal.append(None, &entries(1, 10), Some(&hs)).unwrap();
        wal.sync().unwrap();
        wal
    }

    fn snapshot_files(disk: &MemDisk) -> usize {
        let names = disk.list().unwrap();
        names.iter().filter(|n| n.ends_with(".snap")).count()
    }

    fn snap(index: u64) -> Snapshot {
        Snapshot {
            index,
            term: 1,
            data: Bytes::from_static(b"state"),
        }
    }

    fn writer(disk: &MemDisk) -> (WalWriter<RaftFormat>, mpsc::UnboundedReceiver<Report>) {
        WalWriter::start("wal-test".into(), wal_with_ten_entries(disk)).unwrap()
    }

    /// The next report, waiting up to a few seconds for it.
    fn next_report(reports: &mut mpsc::UnboundedReceiver<Report>) -> Report {
        for _ in 0..500 {
            match reports.try_recv() {
                Ok(r) => return r,
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        panic!("no report from the WAL writer");
    }

    fn recovered(disk: &MemDisk) -> (Option<u64>, Vec<u64>) {
        let (_, r) = RaftWal::open(Arc::new(disk.clone()), Default::default()).unwrap();
        let indexes = r.entries.iter().map(|e| e.index).collect();
        (r.snapshot.map(|s| s.index), indexes)
    }

    fn ready(seq: u64, lo: u64, hi: u64) -> Job<RaftFormat> {
        Job::Ready {
            seq,
            snapshot: None,
            truncate_after: None,
            entries: entries(lo, hi),
            hard_state: None,
            sync: true,
        }
    }

    /// A storage sync that holds the snapshot thread until `release` is sent (or dropped).
    fn held_sync() -> (SnapshotSync, std_mpsc::Sender<()>, std_mpsc::Receiver<()>) {
        let (release, held) = std_mpsc::channel::<()>();
        let (entered, started) = std_mpsc::channel::<()>();
        let sync: SnapshotSync = Box::new(move || {
            let _ = entered.send(());
            let _ = held.recv();
            Ok(())
        });
        (sync, release, started)
    }

    #[test]
    fn the_storage_a_snapshot_names_is_synced_before_the_snapshot_is_written() {
        let disk = MemDisk::new();
        let (w, _reports) = writer(&disk);
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (probe, probed) = (disk.clone(), seen.clone());
        let sync: SnapshotSync = Box::new(move || {
            probed.store(snapshot_files(&probe), Ordering::SeqCst);
            Ok(())
        });
        assert!(w.snapshot(snap(6), Some(sync)));
        // Memory disks do not map files, so the recorded snapshot is not reported: the
        // clean stop waits for both threads.
        w.finish().unwrap();
        let files_during_sync = seen.load(Ordering::SeqCst);
        assert_eq!(files_during_sync, 0, "no snapshot file during the sync");
        assert_eq!(recovered(&disk), (Some(6), (7..=10).collect()));
    }

    #[test]
    fn a_failed_storage_sync_fails_the_write_and_leaves_no_snapshot() {
        let disk = MemDisk::new();
        let (w, mut reports) = writer(&disk);
        let sync: SnapshotSync = Box::new(|| Err("disk gone".into()));
        assert!(w.snapshot(snap(6), Some(sync)));
        let err = next_report(&mut reports).err();
        assert!(matches!(err, Some(WalError::Io { .. })), "{err:?}");
        assert!(!w.submit(ready(1, 11, 11)), "the writer stopped");
        drop(w);
        assert_eq!(snapshot_files(&disk), 0);
        assert_eq!(
            recovered(&disk),
            (None, (1..=10).collect()),
            "the log is kept whole"
        );
    }

    #[test]
    fn writes_queued_after_a_snapshot_are_durable_before_it_is() {
        let disk = MemDisk::new();
        let (w, mut reports) = writer(&disk);
        let (sync, release, started) = held_sync();
        assert!(w.snapshot(snap(6), Some(sync)));
        started.recv().unwrap();
        assert!(w.submit(ready(1, 11, 12)));
        let written = next_report(&mut reports).unwrap();
        let seqs: Vec<u64> = written.durable.iter().map(|d| d.seq).collect();
        assert_eq!(
            seqs,
            [1],
            "the write went through while the snapshot was held"
        );
        assert_eq!(snapshot_files(&disk), 0);
        release.send(()).unwrap();
        w.finish().unwrap();
        assert_eq!(recovered(&disk), (Some(6), (7..=12).collect()));
    }

    #[test]
    fn a_crash_mid_snapshot_leaves_the_previous_snapshot_and_the_whole_log() {
        let disk = MemDisk::new();
        let mut wal = wal_with_ten_entries(&disk);
        wal.save_snapshot(&snap(3), false).unwrap();
        let (w, mut reports) = WalWriter::start("wal-test".into(), wal).unwrap();
        let (sync, release, started) = held_sync();
        assert!(w.snapshot(snap(6), Some(sync)));
        started.recv().unwrap();
        assert!(w.submit(ready(1, 11, 11)));
        assert_eq!(next_report(&mut reports).unwrap().durable.len(), 1);
        // The crash: the member is dropped while its snapshot is being made durable; the
        // drop waits for the snapshot thread, which stops there.
        let crashed = std::thread::spawn(move || drop(w));
        std::thread::sleep(Duration::from_millis(20));
        drop(release);
        crashed.join().unwrap();
        disk.crash(|_| 0, false);
        assert_eq!(
            snapshot_files(&disk),
            1,
            "only the previous snapshot's file"
        );
        assert_eq!(recovered(&disk), (Some(3), (4..=11).collect()));
    }
}
