//! WAL group commit on tmpfs and without fsync.
//!
//! - `wal_append_sync`: one `append` of a batch of N entries + one `sync`, i.e. what one
//!   Raft `Ready` costs (throughput in entries/s).
//! - `wal_group_commit`: K clients each submit one entry and wait for it to be durable; a
//!   writer thread takes everything queued, appends it as one batch and syncs once (what
//!   the node loop does). Throughput in entries/s; the mean batch size (entries per sync)
//!   is printed after each run.

use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use coordbench_node::wal::Snapshot;
use coordbench_node::{DiskKind, FileDisk, RaftWal, WalOptions};
use coordbench_raft::{Entry, EntryKind, HardState};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const ENTRY_BYTES: usize = 128;
/// Compact every this many entries so the benchmark does not fill tmpfs.
const COMPACT_EVERY: u64 = 200_000;

fn kinds() -> Vec<(DiskKind, tempfile::TempDir)> {
    let mut v = Vec::new();
    let shm = Path::new("/dev/shm");
    if coordbench_node::disk::is_tmpfs(shm).unwrap_or(false) {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            v.push((DiskKind::Tmpfs, d));
        }
    }
    if let Ok(d) = tempfile::tempdir() {
        v.push((DiskKind::NoFsync, d));
    }
    v
}

struct Log {
    wal: RaftWal,
    next: u64,
    compacted: u64,
}

impl Log {
    fn open(dir: &Path, kind: DiskKind) -> Self {
        let disk = FileDisk::open(dir, kind).expect("open bench dir");
        let opts = WalOptions {
            segment_bytes: 8 << 20,
            ..WalOptions::default()
        };
        let (wal, state) = RaftWal::open(Arc::new(disk), opts).expect("open WAL");
        let next = state
            .entries
            .last()
            .map(|e| e.index)
            .or(state.snapshot.as_ref().map(|s| s.index))
            .unwrap_or(0)
            + 1;
        Self {
            wal,
            next,
            compacted: next - 1,
        }
    }

    fn batch(&mut self, n: usize) -> Vec<Entry> {
        let v: Vec<Entry> = (0..n as u64)
            .map(|k| Entry {
                term: 1,
                index: self.next + k,
                kind: EntryKind::Normal(vec![0xab; ENTRY_BYTES]),
            })
            .collect();
        self.next += n as u64;
        v
    }

    fn commit(&mut self, entries: &[Entry]) {
        let hs = HardState {
            term: 1,
            vote: Some(1),
            commit: self.next - 1,
        };
        self.wal.append(None, entries, Some(&hs)).expect("append");
        self.wal.sync().expect("sync");
        if self.next - 1 - self.compacted >= COMPACT_EVERY {
            let index = self.next - 1;
            let snap = Snapshot {
                index,
                term: 1,
                data: Vec::new().into(),
            };
            self.wal.save_snapshot(&snap, false).expect("snapshot");
            self.compacted = index;
        }
    }
}

fn append_sync(c: &mut Criterion) {
    let mut g = c.benchmark_group("wal_append_sync");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (kind, dir) in kinds() {
        let mut log = Log::open(dir.path(), kind);
        for batch in [1usize, 16, 256] {
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_with_input(
                BenchmarkId::new(kind.to_string(), batch),
                &batch,
                |b, &n| {
                    b.iter(|| {
                        let entries = log.batch(n);
                        log.commit(&entries);
                    })
                },
            );
        }
    }
    g.finish();
}

/// Runs `total` closed-loop submissions from `clients` threads through one writer;
/// returns the elapsed time and the number of syncs.
fn group_commit_run(log: &mut Log, clients: usize, total: u64) -> (Duration, u64) {
    let (tx, rx) = mpsc::sync_channel::<mpsc::SyncSender<()>>(clients * 2);
    let per_client = total.div_ceil(clients as u64);
    let start = Instant::now();
    let syncs_before = log.wal.stats().syncs;
    thread::scope(|s| {
        for _ in 0..clients {
            let tx = tx.clone();
            s.spawn(move || {
                let (ack_tx, ack_rx) = mpsc::sync_channel(1);
                for _ in 0..per_client {
                    if tx.send(ack_tx.clone()).is_err() || ack_rx.recv().is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        // The writer: block for one request, then take everything else queued.
        while let Ok(first) = rx.recv() {
            let mut acks = vec![first];
            while let Ok(more) = rx.try_recv() {
                acks.push(more);
            }
            let entries = log.batch(acks.len());
            log.commit(&entries);
            for a in acks {
                let _ = a.send(());
            }
        }
    });
    (start.elapsed(), log.wal.stats().syncs - syncs_before)
}

fn group_commit(c: &mut Criterion) {
    let mut g = c.benchmark_group("wal_group_commit");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(1));
    for (kind, dir) in kinds() {
        let mut log = Log::open(dir.path(), kind);
        for clients in [1usize, 16, 128] {
            let (mut entries, mut syncs) = (0u64, 0u64);
            g.bench_with_input(
                BenchmarkId::new(kind.to_string(), format!("clients={clients}")),
                &clients,
                |b, &k| {
                    b.iter_custom(|iters| {
                        let (t, s) = group_commit_run(&mut log, k, iters);
                        entries += iters.div_ceil(k as u64) * k as u64;
                        syncs += s;
                        t
                    })
                },
            );
            if syncs > 0 {
                eprintln!(
                    "wal_group_commit/{kind}/clients={clients}: mean batch {:.1} entries per sync",
                    entries as f64 / syncs as f64
                );
            }
        }
    }
    g.finish();
}

criterion_group!(benches, append_sync, group_commit);
criterion_main!(benches);
