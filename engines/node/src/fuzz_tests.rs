//! Bounded fuzzing of the node's decoders (see `coordbench_sim::fuzz`): peer frames and
//! envelopes, chunk reassembly, WAL segments of both cores (record framing and the records
//! themselves, also with valid checksums so the record decoder is reached) and snapshot
//! files. Each must answer bad bytes with an error, never a panic.

use std::sync::Arc;

use bytes::Bytes;
use coordbench_raft::{Entry, EntryKind, HardState, Message, MessageBody};
use coordbench_sim::fuzz;
use proptest::prelude::*;

use crate::chunk::{self, ChunkHeader, Frame, Outgoing, Reassembly};
use crate::disk::{Disk, MemDisk};
use crate::envelope::{Envelope, Payload};
use crate::raft_node::RaftWal;
use crate::record::{self, Record};
use crate::snapfile;
use crate::wal::{Snapshot, WalOptions};
use crate::zab_node::ZabWal;

const CASES: u32 = 3_000;

fn entry(index: u64) -> Entry {
    Entry {
        term: 2,
        index,
        kind: EntryKind::Normal(format!("command {index}").into_bytes()),
    }
}

fn peer_frames() -> Vec<Vec<u8>> {
    let raft = |body| {
        Payload::Raft(Message {
            from: 1,
            to: 2,
            term: 3,
            body,
        })
    };
    let payloads = [
        raft(MessageBody::AppendEntries {
            prev_index: 4,
            prev_term: 2,
            entries: vec![entry(5), entry(6)],
            commit: 4,
        }),
        raft(MessageBody::Heartbeat {
            commit: 6,
            read_seq: 1,
        }),
        Payload::Forward {
            request_id: 9,
            command: b"put k v".to_vec(),
        },
        Payload::ReadIndexReply {
            request_id: 9,
            index: 6,
        },
    ];
    let mut frames: Vec<Vec<u8>> = payloads
        .into_iter()
        .map(|payload| {
            let env = Envelope {
                from: 1,
                to: 2,
                payload,
            };
            let mut f = vec![chunk::WHOLE];
            f.extend(env.encode().expect("encodes"));
            f
        })
        .collect();
    let mut out = Outgoing::new(3, frames[0][1..].to_vec(), 16);
    if let Some((header, data)) = out.next_chunk() {
        let mut f = chunk::chunk_prefix(&header);
        f.extend_from_slice(data);
        frames.push(f);
    }
    frames
}

#[test]
fn peer_frames_decode_without_panics_and_envelopes_round_trip() {
    fuzz::run(
        "peer frame",
        CASES,
        0xe7_01,
        fuzz::inputs(peer_frames()),
        |bytes| {
            if let Ok(Frame::Whole(env)) = chunk::decode(&bytes) {
                let again = Envelope::decode(&env.encode().expect("re-encodes"));
                assert_eq!(again.expect("decodes again"), env);
            }
        },
    );
}

/// Any sequence of chunk headers and data: reassembly never panics, never holds more than
/// its bound, and what it hands out has exactly the announced length.
#[test]
fn reassembly_of_arbitrary_chunks_stays_bounded() {
    let chunk =
        (0..3u64, 0..300u64, 0..300u64, 0..120usize).prop_map(|(transfer, total, offset, len)| {
            let header = ChunkHeader {
                transfer,
                total,
                offset,
            };
            (header, vec![0xab; len])
        });
    let sequences = proptest::collection::vec(chunk, 0..40);
    fuzz::run("chunk reassembly", CASES, 0xe7_02, sequences, |chunks| {
        let mut r = Reassembly::new(200);
        for (header, data) in chunks {
            if let Ok(Some(bytes)) = r.accept(header, &data) {
                assert_eq!(bytes.len() as u64, header.total);
            }
            if let Some((got, total)) = r.in_progress() {
                assert!(got <= total && total <= 200);
            }
        }
    });
}

/// The files of a small Raft WAL and of a small Zab WAL, each with a snapshot.
fn wal_files() -> Vec<(String, Vec<u8>)> {
    let opts = WalOptions {
        segment_bytes: 400,
        record_bytes: 120,
    };
    let raft = Arc::new(MemDisk::new());
    let (mut wal, _) = RaftWal::open(raft.clone(), opts).expect("opens");
    let hs = HardState {
        term: 2,
        vote: Some(1),
        commit: 3,
    };
    let entries: Vec<Entry> = (1..=8).map(entry).collect();
    wal.append(None, &entries, Some(&hs)).expect("appends");
    wal.append(Some(6), &[entry(7)], None).expect("appends");
    let snap = Snapshot {
        index: 4,
        term: 2,
        data: Bytes::from_static(b"state machine"),
    };
    wal.save_snapshot(&snap, false).expect("snapshot");
    // One append per entry, so the log rolls over into several segments.
    for i in 8..=40 {
        wal.append(None, &[entry(i)], None).expect("appends");
    }
    wal.sync().expect("syncs");

    let zab = Arc::new(MemDisk::new());
    let (mut zwal, _) = ZabWal::open(zab.clone(), opts).expect("opens");
    let proposals: Vec<coordbench_zab::Proposal> = (1..=5u64)
        .map(|i| coordbench_zab::Proposal {
            zxid: coordbench_zab::Zxid::new(1, i as u32),
            data: vec![i as u8; 20],
        })
        .collect();
    zwal.append(
        None,
        &proposals,
        Some(&coordbench_zab::HardState::default()),
    )
    .expect("appends");
    zwal.sync().expect("syncs");

    let mut files = Vec::new();
    for disk in [raft, zab] {
        for name in disk.list().expect("lists") {
            let bytes = disk.read(&name).expect("reads");
            files.push((name, bytes));
        }
    }
    files
}

/// Replaces the checksum of every record header it can find, so that edited payloads reach
/// the record decoder instead of stopping at the checksum.
fn with_valid_checksums(mut bytes: Vec<u8>) -> Vec<u8> {
    let mut pos = 0;
    while pos + record::HEADER <= bytes.len() {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let end = pos + record::HEADER + len;
        if end > bytes.len() {
            break;
        }
        let crc = crc32fast::hash(&bytes[pos + record::HEADER..end]);
        bytes[pos + 4..pos + 8].copy_from_slice(&crc.to_le_bytes());
        pos = end;
    }
    bytes
}

/// Recovers both kinds of WAL from `files` with `name`'s content replaced by `bytes`.
fn recover_with(files: &[(String, Vec<u8>)], name: &str, bytes: &[u8]) {
    let disk = Arc::new(MemDisk::new());
    for (n, b) in files {
        let content = if n == name { bytes } else { b.as_slice() };
        disk.write_atomic(n, &[content]).expect("writes");
    }
    let opts = WalOptions::default();
    let _ = RaftWal::open(disk.clone(), opts);
    let _ = ZabWal::open(disk, opts);
}

#[test]
fn wal_segments_and_records_recover_or_fail_without_panics() {
    let files = wal_files();
    let segments: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter(|(n, _)| n.ends_with("wal"))
        .cloned()
        .collect();
    let names: Vec<&String> = files.iter().map(|(n, _)| n).collect();
    assert!(
        segments.len() >= 3,
        "several segments of both formats: {names:?}"
    );
    let corpus: Vec<Vec<u8>> = segments.iter().map(|(_, b)| b.clone()).collect();
    let cases = (0..segments.len(), fuzz::inputs(corpus), any::<bool>());
    fuzz::run(
        "wal segment",
        CASES,
        0xe7_03,
        cases,
        |(which, bytes, fix)| {
            let bytes = if fix {
                with_valid_checksums(bytes)
            } else {
                bytes
            };
            let _ = record::scan::<Record<Entry, HardState>>(&bytes);
            let _ =
                record::scan::<Record<coordbench_zab::Proposal, coordbench_zab::HardState>>(&bytes);
            recover_with(&files, &segments[which].0, &bytes);
        },
    );
}

#[test]
fn snapshot_files_decode_or_fail_without_panics() {
    let files = wal_files();
    let (name, snap) = files
        .iter()
        .find(|(n, _)| n.ends_with(".snap"))
        .cloned()
        .expect("a snapshot file");
    fuzz::run(
        "snapshot file",
        CASES,
        0xe7_04,
        fuzz::inputs(vec![snap]),
        |bytes| {
            if let Ok(s) = snapfile::decode(&bytes) {
                assert_eq!(s.data.len() + 32, bytes.len());
            }
            recover_with(&files, &name, &bytes);
        },
    );
}
