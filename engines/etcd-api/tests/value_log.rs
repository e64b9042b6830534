//! Three Raft members over TCP on 127.0.0.1, each keeping its values in a value-log file
//! under its data directory and snapshotting (an index into that file) every few entries:
//! a member that was down past the leader's log compaction catches up from a snapshot sent
//! in its self-contained form, and members restarted (after a crash, or all at once)
//! restore the index, cut the value log back to what it covers and replay the WAL, with
//! every acknowledged value intact.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use coordbench_etcd_api::KvStateMachine;
use coordbench_kv::{Command, PutRequest, RangeRequest};
use coordbench_node::{NodeConfig, NodeTask, RaftHandle, RaftNode, Replicator};

const SNAPSHOT_EVERY: u64 = 16;

type Handle = RaftHandle<KvStateMachine>;

struct Member {
    handle: Handle,
    task: NodeTask,
}

/// Three addresses the kernel picked, chosen once per test so restarted members keep
/// theirs. (Fixed ports inside the ephemeral range collided with other tests' outgoing
/// connections: "Address already in use".)
fn peers() -> BTreeMap<u64, SocketAddr> {
    let listeners: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port"))
        .collect();
    (1..=3)
        .zip(&listeners)
        .map(|(id, l)| (id, l.local_addr().expect("local addr")))
        .collect()
}

async fn start(id: u64, peers: &BTreeMap<u64, SocketAddr>, root: &Path) -> Member {
    let dir = root.join(format!("m{id}"));
    let mut cfg = NodeConfig::new(id, peers.clone(), &dir);
    cfg.tick_interval = Duration::from_millis(10);
    cfg.heartbeat_ticks = 5;
    cfg.election_ticks_min = 30;
    cfg.election_ticks_max = 60;
    cfg.snapshot_every = SNAPSHOT_EVERY;
    let sm = KvStateMachine::with_value_dir(&dir.join("values")).expect("value log opens");
    let (handle, task) = RaftNode::start(cfg, sm).await.expect("member starts");
    Member { handle, task }
}

/// Proposes through whichever member accepts, retrying while there is no leader.
async fn put(members: &BTreeMap<u64, Member>, key: &str, value: &str) {
    let cmd = Command::Put(PutRequest {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        ..Default::default()
    })
    .encode();
    for _ in 0..200 {
        for m in members.values() {
            if let Ok(Ok(applied)) = m.handle.propose(cmd.clone()).await {
                assert!(applied.result.is_ok(), "{:?}", applied.result);
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no member accepted a put of {key}");
}

/// Every key's value and the revision on member `h`.
fn contents(h: &Handle) -> (i64, BTreeMap<String, String>) {
    h.read(|sm| {
        let all = RangeRequest {
            key: vec![0],
            range_end: vec![0],
            ..Default::default()
        };
        let resp = sm.store().range(&all).expect("range");
        let kvs = resp
            .kvs
            .into_iter()
            .map(|kv| {
                (
                    String::from_utf8(kv.key).unwrap(),
                    String::from_utf8(kv.value).unwrap(),
                )
            })
            .collect();
        (sm.store().revision(), kvs)
    })
}

/// Waits until member `id` holds `want` (bounded).
async fn converges(
    members: &BTreeMap<u64, Member>,
    id: u64,
    want: &(i64, BTreeMap<String, String>),
) {
    for _ in 0..300 {
        if &contents(&members[&id].handle) == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(&contents(&members[&id].handle), want, "member {id}");
}

async fn write_round(
    members: &BTreeMap<u64, Member>,
    round: u32,
    expect: &mut BTreeMap<String, String>,
) {
    for i in 0..3 * SNAPSHOT_EVERY as u32 {
        let (key, value) = (
            format!("k{}", i % 7),
            format!("r{round}-{i}-{}", "v".repeat(40)),
        );
        put(members, &key, &value).await;
        expect.insert(key, value);
    }
}

/// The value-log files of member `id`.
fn value_logs(root: &Path, id: u64) -> Vec<String> {
    std::fs::read_dir(root.join(format!("m{id}/values")))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_index_the_value_log_and_lose_no_acknowledged_value() {
    let root = tempfile::tempdir().unwrap();
    let peers = peers();
    let mut members = BTreeMap::new();
    for id in 1..=3 {
        members.insert(id, start(id, &peers, root.path()).await);
    }
    let mut expect = BTreeMap::new();
    write_round(&members, 0, &mut expect).await;

    // A member crashes and misses more than the leader's log keeps.
    let down = 3;
    let logs_before = value_logs(root.path(), down);
    members.remove(&down).unwrap().task.crash().await;
    write_round(&members, 1, &mut expect).await;
    let leader_view = contents(&members[&1].handle);
    assert_eq!(leader_view.1, expect);
    members.insert(down, start(down, &peers, root.path()).await);
    converges(&members, down, &leader_view).await;
    assert_ne!(
        value_logs(root.path(), down),
        logs_before,
        "caught up from a self-contained snapshot, into a new value log"
    );
    assert_eq!(
        value_logs(root.path(), down).len(),
        1,
        "the replaced one is removed"
    );

    // Everyone restarts: state comes back from index snapshots, value logs and the WAL.
    write_round(&members, 2, &mut expect).await;
    let before = contents(&members[&1].handle);
    for id in 1..=3 {
        converges(&members, id, &before).await;
    }
    for (_, m) in std::mem::take(&mut members) {
        m.task.stop().await.expect("clean stop");
    }
    for id in 1..=3 {
        members.insert(id, start(id, &peers, root.path()).await);
    }
    for id in 1..=3 {
        converges(&members, id, &before).await;
    }
    assert_eq!(before.1, expect);
    for (_, m) in members {
        m.task.stop().await.expect("clean stop");
    }
}
