//! The cluster harness of both engines' tests, and the scenarios they share: three members
//! of one [`Engine`] in one process, over TCP on real files (tmpfs when available) or over
//! the in-process network on memory disks.

use std::collections::{BTreeMap, HashSet};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use coordbench_node::{
    DiskKind, InProcNetwork, MemDisk, NodeConfig, NodeError, NodeHandle, NodeRole, NodeTask,
    Replicator, StateMachine,
};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{eventually, Engine, Log};

pub type Handle = NodeHandle<Log>;

/// Test timing: 10 ms ticks, heartbeat (Zab: ping) 50 ms, election timeout (Zab: syncLimit
/// and initLimit) 300–600 ms.
const TICK: Duration = Duration::from_millis(10);
const HEARTBEAT_TICKS: u32 = 5;
const ELECTION_MIN: u32 = 30;
const ELECTION_MAX: u32 = 60;

enum Net {
    InProc {
        net: InProcNetwork,
        disks: BTreeMap<u64, Arc<MemDisk>>,
    },
    Tcp {
        _dir: tempfile::TempDir,
        root: PathBuf,
        disk: DiskKind,
    },
}

pub struct Cluster {
    engine: Engine,
    net: Net,
    peers: BTreeMap<u64, SocketAddr>,
    snapshot_every: u64,
    /// The TCP transport's frame limit, when a test lowers it.
    max_frame_bytes: Option<usize>,
    handles: BTreeMap<u64, Handle>,
    pub tasks: BTreeMap<u64, NodeTask>,
}

fn free_addrs(n: usize) -> Vec<SocketAddr> {
    // Bind them all at once so they are distinct, then release them for the nodes.
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr"))
        .collect()
}

fn temp_root() -> (tempfile::TempDir, DiskKind) {
    let shm = Path::new("/dev/shm");
    if coordbench_node::disk::is_tmpfs(shm).unwrap_or(false) {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return (d, DiskKind::Tmpfs);
        }
    }
    (tempfile::tempdir().expect("temp dir"), DiskKind::NoFsync)
}

impl Cluster {
    /// Starts three members, over TCP on files (`tcp`) or in-process on memory disks.
    pub async fn start(engine: Engine, tcp: bool, snapshot_every: u64) -> Self {
        Self::start_framed(engine, tcp, snapshot_every, None).await
    }

    /// Like [`Cluster::start`], with the TCP transport's frame limit set to `max_frame_bytes`.
    pub async fn start_framed(
        engine: Engine,
        tcp: bool,
        snapshot_every: u64,
        max_frame_bytes: Option<usize>,
    ) -> Self {
        let peers: BTreeMap<u64, SocketAddr> = (1..=3).zip(free_addrs(3)).collect();
        let net = if tcp {
            let (dir, disk) = temp_root();
            Net::Tcp {
                root: dir.path().to_path_buf(),
                _dir: dir,
                disk,
            }
        } else {
            Net::InProc {
                net: InProcNetwork::new(),
                disks: (1..=3).map(|id| (id, Arc::new(MemDisk::new()))).collect(),
            }
        };
        let mut c = Self {
            engine,
            net,
            peers,
            snapshot_every,
            max_frame_bytes,
            handles: BTreeMap::new(),
            tasks: BTreeMap::new(),
        };
        for id in 1..=3 {
            c.start_node(id).await;
        }
        c
    }

    fn config(&self, id: u64, dir: PathBuf) -> NodeConfig {
        let mut cfg = NodeConfig::new(id, self.peers.clone(), dir);
        cfg.tick_interval = TICK;
        cfg.heartbeat_ticks = HEARTBEAT_TICKS;
        cfg.election_ticks_min = ELECTION_MIN;
        cfg.election_ticks_max = ELECTION_MAX;
        cfg.snapshot_every = self.snapshot_every;
        cfg.request_timeout = Duration::from_secs(5);
        if let Some(max) = self.max_frame_bytes {
            cfg.tcp.max_frame_bytes = max;
        }
        cfg
    }

    pub fn election_timeout(&self) -> Duration {
        TICK * ELECTION_MAX
    }

    /// Starts (or restarts, on its data) member `id`.
    pub async fn start_node(&mut self, id: u64) {
        let started = match &self.net {
            Net::Tcp { root, disk, .. } => {
                let mut cfg = self.config(id, root.join(format!("n{id}")));
                cfg.disk = *disk;
                self.engine.start(cfg).await
            }
            Net::InProc { net, disks } => {
                let (transport, inbox) = net.join(id, 4096);
                let cfg = self.config(id, PathBuf::from("/nonexistent"));
                let disk = disks[&id].clone();
                self.engine.start_with(cfg, disk, transport, inbox).await
            }
        };
        let (h, t) = started.unwrap_or_else(|e| panic!("node {id} failed to start: {e}"));
        self.handles.insert(id, h);
        self.tasks.insert(id, t);
    }

    pub fn handle(&self, id: u64) -> Handle {
        self.handles[&id].clone()
    }

    /// Member `id`'s memory disk (in-process clusters only).
    pub fn mem_disk(&self, id: u64) -> Arc<MemDisk> {
        match &self.net {
            Net::InProc { disks, .. } => disks[&id].clone(),
            Net::Tcp { .. } => panic!("a TCP cluster runs on files, not memory disks"),
        }
    }

    pub fn running(&self) -> Vec<u64> {
        self.tasks.keys().copied().collect()
    }

    /// The leader every running member agrees on.
    pub async fn leader(&self, limit: Duration) -> u64 {
        let running = self.running();
        eventually(limit, "a leader all running members agree on", || {
            let statuses: Vec<_> = running.iter().map(|id| self.handles[id].status()).collect();
            let leader = statuses[0].leader;
            let agreed = leader.is_some()
                && statuses.iter().all(|s| s.leader == leader)
                && statuses
                    .iter()
                    .any(|s| Some(s.id) == leader && s.role == NodeRole::Leader);
            std::future::ready(if agreed { leader } else { None })
        })
        .await
    }

    pub async fn crash(&mut self, id: u64) {
        if let Some(t) = self.tasks.remove(&id) {
            t.crash().await;
        }
    }

    /// Waits until every running member applied at least `index` and holds the same state.
    pub async fn converge(&self, index: u64, limit: Duration) {
        let running = self.running();
        eventually(limit, "all running members apply the same log", || {
            let done = running
                .iter()
                .all(|id| self.handles[id].status().applied_index >= index);
            let same = done && {
                let first = self.handles[&running[0]].read(|l| l.items.clone());
                running
                    .iter()
                    .all(|id| self.handles[id].read(|l| l.items == first))
            };
            std::future::ready(same.then_some(()))
        })
        .await;
    }

    pub async fn stop_all(mut self) {
        for (id, t) in std::mem::take(&mut self.tasks) {
            if let Err(e) = t.stop().await {
                panic!("node {id} did not stop cleanly: {e}");
            }
        }
    }
}

/// The two members other than `leader`.
pub fn others(leader: u64) -> (u64, u64) {
    let mut o = (1..=3).filter(|&i| i != leader);
    (o.next().unwrap_or(1), o.next().unwrap_or(2))
}

/// Proposals on the leader and on followers return outputs (the applied index: Raft's log
/// index, Zab's zxid); a follower's read barrier sees a write acknowledged elsewhere just
/// before; 1000 concurrent proposals spread over all members all succeed.
pub async fn replicates_and_reads(engine: Engine, tcp: bool) {
    let started = Instant::now();
    let c = Cluster::start(engine, tcp, 10_000).await;
    let leader = c.leader(Duration::from_secs(10)).await;
    let elected = started.elapsed();
    let (follower, other) = others(leader);
    let term = c.handle(leader).status().term;
    assert!(term > 0, "the term (Zab: epoch) is reported");

    let a = c.handle(leader).propose(b"on-leader".to_vec()).await;
    let a = a.unwrap_or_else(|e| panic!("propose on leader: {e}"));
    let b = c.handle(follower).propose(b"on-follower".to_vec()).await;
    let b = b.unwrap_or_else(|e| panic!("propose on follower: {e}"));
    assert!(b > a && a > 0, "outputs are increasing indexes: {a} {b}");
    if engine == Engine::Zab {
        assert_eq!(a >> 32, term, "a zxid's high half is the epoch");
    }
    assert!(c.handle(follower).read(|l| l.contains(b"on-follower")));

    for k in 0..20 {
        let cmd = format!("rb-{k}").into_bytes();
        c.handle(leader)
            .propose(cmd.clone())
            .await
            .unwrap_or_else(|e| panic!("propose: {e}"));
        c.handle(other)
            .read_barrier()
            .await
            .unwrap_or_else(|e| panic!("read barrier on follower: {e}"));
        assert!(
            c.handle(other).read(|l| l.contains(&cmd)),
            "follower read after barrier misses write {k}"
        );
    }

    leader_queries(&c, leader, term).await;

    let burst = Instant::now();
    let mut set = JoinSet::new();
    for k in 0..1000u64 {
        let h = c.handle(1 + k % 3);
        set.spawn(async move { (k, h.propose(format!("c-{k}").into_bytes()).await) });
    }
    let mut outputs = HashSet::new();
    let mut max = 0;
    while let Some(r) = set.join_next().await {
        let (k, r) = r.expect("task");
        let index = r.unwrap_or_else(|e| panic!("concurrent proposal {k}: {e}"));
        assert!(outputs.insert(index), "two proposals got index {index}");
        max = max.max(index);
    }
    let burst = burst.elapsed();
    c.converge(max, Duration::from_secs(10)).await;
    let items = c.handle(1).read(|l| l.items.len());
    assert_eq!(items, 1022, "every command applied once on every member");
    eprintln!(
        "{engine:?} (tcp: {tcp}): elected in {elected:?}; 1000 concurrent proposals in {burst:?}"
    );
    c.stop_all().await;
}

/// Leader queries are answered by the leader in its term, after everything acknowledged
/// before (22 commands here), whichever member asks; the runtime asked its own empty one
/// as the leader took over.
async fn leader_queries(c: &Cluster, leader: u64, term: u64) {
    for id in 1..=3 {
        let answer = c
            .handle(id)
            .ask_leader(format!("from {id}").into_bytes())
            .await;
        let answer = answer.unwrap_or_else(|e| panic!("leader query on member {id}: {e}"));
        let answer = String::from_utf8(answer).expect("text");
        let applied: usize = answer
            .split(' ')
            .nth(3)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("answer {answer:?}"));
        assert!(
            answer.starts_with(&format!("term {term} applied ")) && applied >= 22,
            "member {id} got {answer:?}"
        );
        assert!(answer.ends_with(&format!(" from {id}")), "{answer:?}");
    }
    let leading = c.handle(leader).read(|l| l.leading.lock().unwrap().clone());
    assert_eq!(leading.last(), Some(&term), "terms led: {leading:?}");
}

/// The leader's disk stalls every sync for three election timeouts while a write is in
/// flight. Its loop goes on heartbeating (the WAL writer waits, not the loop), so no
/// follower starts an election: the leader and term stay, and the write completes once the
/// slow sync does. A loop that waited for its own sync would lose the leadership here.
pub async fn slow_leader_sync_keeps_leadership(engine: Engine) {
    let c = Cluster::start(engine, false, 0).await;
    let leader = c.leader(Duration::from_secs(10)).await;
    c.handle(leader)
        .propose(b"before".to_vec())
        .await
        .unwrap_or_else(|e| panic!("propose before the stall: {e}"));
    let term = c.handle(leader).status().term;
    let stall = c.election_timeout() * 3;
    c.mem_disk(leader).set_sync_delay(stall);
    let started = Instant::now();
    let during = c.handle(leader).propose(b"during".to_vec()).await;
    let took = started.elapsed();
    c.mem_disk(leader).set_sync_delay(Duration::ZERO);
    during.unwrap_or_else(|e| panic!("the write during the stall failed: {e}"));
    assert!(
        took >= stall,
        "the write waited for the stalled sync ({took:?} < {stall:?})"
    );
    for id in c.running() {
        let st = c.handle(id).status();
        assert_eq!(
            (st.leader, st.term),
            (Some(leader), term),
            "member {id} saw a leader change during the leader's {stall:?} sync"
        );
    }
    assert_eq!(c.handle(leader).status().role, NodeRole::Leader);
    c.stop_all().await;
}

/// The leader crashes: a new one is elected (Raft: within twice the election timeout),
/// proposals resume on the survivors, which compact well past everything the crashed
/// member has; it restarts from its data dir, catches up through a snapshot and serves
/// again; no acknowledged write is lost anywhere.
pub async fn survives_leader_crash(engine: Engine) {
    let mut c = Cluster::start(engine, true, 100).await;
    let leader = c.leader(Duration::from_secs(10)).await;
    let mut acked: Vec<Vec<u8>> = Vec::new();
    for k in 0..30 {
        let cmd = format!("before-{k}").into_bytes();
        c.handle(1 + k % 3)
            .propose(cmd.clone())
            .await
            .unwrap_or_else(|e| panic!("propose before crash: {e}"));
        acked.push(cmd);
    }

    c.crash(leader).await;
    let crashed = Instant::now();
    let survivors = c.running();
    let new_leader = c.leader(Duration::from_secs(10)).await;
    let failover = crashed.elapsed();
    assert_ne!(new_leader, leader);
    if engine == Engine::Raft {
        assert!(
            failover < 2 * c.election_timeout(),
            "fail-over took {failover:?}, more than twice the election timeout"
        );
    }
    assert_eq!(
        c.handle(leader).propose(b"x".to_vec()).await,
        Err(NodeError::Stopped)
    );

    for k in 0..250 {
        let cmd = format!("after-{k}").into_bytes();
        c.handle(survivors[k % 2])
            .propose(cmd.clone())
            .await
            .unwrap_or_else(|e| panic!("propose after crash: {e}"));
        acked.push(cmd);
    }
    let commit = c.handle(new_leader).status().commit_index;
    c.converge(commit, Duration::from_secs(10)).await;

    let restarted = Instant::now();
    c.start_node(leader).await;
    let commit = c.handle(new_leader).status().commit_index;
    c.converge(commit, Duration::from_secs(15)).await;
    let caught_up = restarted.elapsed();
    assert!(
        c.handle(leader).read(|l| l.restores) > 0,
        "the restarted member caught up without a snapshot"
    );
    let cmd = b"after-restart".to_vec();
    let last = eventually(
        Duration::from_secs(15),
        "the restarted member serves",
        || {
            let h = c.handle(leader);
            let cmd = cmd.clone();
            async move { h.propose(cmd).await.ok() }
        },
    )
    .await;
    acked.push(cmd);
    c.converge(last, Duration::from_secs(10)).await;
    for id in 1..=3 {
        let missing: Vec<String> = c.handle(id).read(|l| {
            acked
                .iter()
                .filter(|a| !l.contains(a))
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        });
        assert!(
            missing.is_empty(),
            "node {id} lost acknowledged writes: {missing:?}"
        );
    }
    eprintln!("{engine:?}: fail-over in {failover:?}; restarted member caught up in {caught_up:?}");
    c.stop_all().await;
}

/// With the peer frame limit at 256 KiB, a follower that was down while the others
/// compacted catches up through a snapshot several times that size (sent in chunks), and
/// holds every acknowledged write.
pub async fn catches_up_through_a_snapshot_above_the_frame_limit(engine: Engine) {
    const FRAME: usize = 256 << 10;
    let mut c = Cluster::start_framed(engine, true, 100, Some(FRAME)).await;
    let leader = c.leader(Duration::from_secs(10)).await;
    let (follower, other) = others(leader);
    c.crash(follower).await;
    let mut acked = Vec::new();
    for k in 0..400u32 {
        // 4 KiB commands: 1.6 MB of state, about six frame limits.
        let mut cmd = format!("big-{k}-").into_bytes();
        cmd.resize(4096, b'x');
        c.handle([leader, other][k as usize % 2])
            .propose(cmd.clone())
            .await
            .unwrap_or_else(|e| panic!("propose: {e}"));
        acked.push(cmd);
    }
    let snapshot_len = c.handle(leader).read(|l| l.snapshot().len());
    assert!(
        snapshot_len > 4 * FRAME,
        "the snapshot ({snapshot_len} bytes) is several frame limits"
    );
    c.start_node(follower).await;
    let commit = c.handle(leader).status().commit_index;
    c.converge(commit, Duration::from_secs(30)).await;
    assert!(
        c.handle(follower).read(|l| l.restores) > 0,
        "the follower caught up without a snapshot"
    );
    let lost = c
        .handle(follower)
        .read(|l| acked.iter().filter(|a| !l.contains(a)).count());
    assert_eq!(lost, 0, "the follower misses acknowledged writes");
    eprintln!("{engine:?}: caught up through a {snapshot_len}-byte snapshot, frames of {FRAME}");
    c.stop_all().await;
}

/// Every member stops cleanly and restarts from its WAL and snapshots: the state survives
/// and the cluster serves again.
pub async fn whole_cluster_restarts(engine: Engine) {
    let mut c = Cluster::start(engine, true, 50).await;
    c.leader(Duration::from_secs(10)).await;
    let mut last = 0;
    for k in 0..120u64 {
        last = c
            .handle(1 + k % 3)
            .propose(format!("w-{k}").into_bytes())
            .await
            .unwrap_or_else(|e| panic!("propose: {e}"));
    }
    c.converge(last, Duration::from_secs(10)).await;
    let before = c.handle(1).read(|l| l.items.clone());
    for id in 1..=3 {
        if let Some(t) = c.tasks.remove(&id) {
            t.stop().await.unwrap_or_else(|e| panic!("stop {id}: {e}"));
        }
    }
    for id in 1..=3 {
        c.start_node(id).await;
    }
    c.leader(Duration::from_secs(10)).await;
    let next = c
        .handle(2)
        .propose(b"after-restart".to_vec())
        .await
        .unwrap_or_else(|e| panic!("propose after restart: {e}"));
    assert!(next > last);
    c.converge(next, Duration::from_secs(10)).await;
    let after = c.handle(3).read(|l| l.items.clone());
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "state survives a full restart"
    );
    c.stop_all().await;
}
