//! Bounded recovery: one member of three (either engine; in-process network, in-memory
//! disks) is killed and restarted 50 times in a row while clients keep writing through the
//! other two. Before each restart the test opens the killed member's write-ahead log the
//! way the restart does and counts the entries it will replay past its snapshot: that
//! count must stay within what the snapshot cadence allows (`POSTPONE_LIMIT` times
//! `snapshot_every`, plus the entries a member may hold unapplied), however long the
//! history behind it. Acknowledged writes must all survive, as in `power_failure`.
//!
//! A seed draws the member to kill and how many writes each of its lives sees; a failure
//! prints the seed and how to replay it (`RESTART_REPLAY_SEED=N cargo test -p
//! coordbench-node --test restart_replay -- --nocapture`).

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, Engine, Log};
use coordbench_node::{
    Disk, InProcNetwork, MemDisk, NodeConfig, NodeError, NodeHandle, NodeTask, RaftWal, Replicator,
    WalOptions, ZabWal, POSTPONE_LIMIT,
};
use coordbench_sim::SimRng;
use tokio::task::JoinSet;

const SNAPSHOT_EVERY: u64 = 40;
const MAX_INFLIGHT: usize = 4;
const MAX_ENTRIES_PER_MSG: usize = 32;
const CLIENTS: u64 = 8;
const RESTARTS: u64 = 50;

/// Entries a restart may replay past its snapshot: a log the cadence let grow to its limit,
/// plus what the member held but had not applied when it died (a follower's in-flight
/// appends, a leader's uncommitted proposals).
fn replay_bound() -> u64 {
    POSTPONE_LIMIT * SNAPSHOT_EVERY + (MAX_INFLIGHT * MAX_ENTRIES_PER_MSG) as u64 + CLIENTS
}

fn config(id: u64) -> NodeConfig {
    let unused: SocketAddr = ([127, 0, 0, 1], 0).into();
    let peers: BTreeMap<u64, SocketAddr> = (1..=3).map(|i| (i, unused)).collect();
    let mut cfg = NodeConfig::new(id, peers, "unused");
    cfg.tick_interval = Duration::from_millis(10);
    cfg.heartbeat_ticks = 5;
    cfg.election_ticks_min = 30;
    cfg.election_ticks_max = 60;
    cfg.snapshot_every = SNAPSHOT_EVERY;
    cfg.max_inflight = MAX_INFLIGHT;
    cfg.max_entries_per_msg = MAX_ENTRIES_PER_MSG;
    cfg
}

/// The entries a member restarted on `disk` replays past its snapshot (opening the WAL as
/// the restart does: a torn tail is cut the same way either time).
fn replayed(engine: Engine, disk: &MemDisk) -> usize {
    let disk: Arc<dyn Disk> = Arc::new(disk.clone());
    let opened = match engine {
        Engine::Raft => RaftWal::open(disk, WalOptions::default()).map(|(_, r)| r.entries.len()),
        Engine::Zab => ZabWal::open(disk, WalOptions::default()).map(|(_, r)| r.entries.len()),
    };
    opened.unwrap_or_else(|e| panic!("the killed member's WAL does not open: {e}"))
}

struct Cluster {
    engine: Engine,
    net: InProcNetwork,
    disks: BTreeMap<u64, MemDisk>,
    handles: BTreeMap<u64, NodeHandle<Log>>,
    tasks: BTreeMap<u64, NodeTask>,
}

impl Cluster {
    async fn start(&mut self, id: u64) {
        let (transport, inbox) = self.net.join(id, 4096);
        let disk = Arc::new(self.disks[&id].clone());
        let (h, t) = self
            .engine
            .start_with(config(id), disk, transport, inbox)
            .await
            .unwrap_or_else(|e| panic!("node {id} failed to (re)start: {e}"));
        self.handles.insert(id, h);
        self.tasks.insert(id, t);
    }

    /// Kills `id` like a process kill: unsynced writes are lost.
    async fn kill(&mut self, id: u64) {
        if let Some(t) = self.tasks.remove(&id) {
            t.crash().await;
        }
        self.handles.remove(&id);
        self.disks[&id].crash(|_| 0, false);
    }

    fn commit(&self) -> u64 {
        let st = self.handles.values().map(|h| h.status());
        st.map(|s| s.commit_index).max().unwrap_or(0)
    }
}

/// Clients writing through `handles` until `stop`; acknowledged commands go to `acked`.
fn load(
    handles: &[NodeHandle<Log>],
    stop: &Arc<AtomicBool>,
    acked: &Arc<Mutex<Vec<Vec<u8>>>>,
) -> JoinSet<()> {
    let mut set = JoinSet::new();
    for w in 0..CLIENTS {
        let h = handles[(w as usize) % handles.len()].clone();
        let (stop, acked) = (stop.clone(), acked.clone());
        set.spawn(async move {
            let mut k = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let cmd = format!("w{w}-{k}").into_bytes();
                k += 1;
                match h.propose(cmd.clone()).await {
                    Ok(_) => acked.lock().unwrap_or_else(|e| e.into_inner()).push(cmd),
                    Err(NodeError::Stopped) => break,
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
        });
    }
    set
}

async fn restarts(engine: Engine, seed: u64) -> Result<(), String> {
    let mut rng = SimRng::new(seed);
    let mut c = Cluster {
        engine,
        net: InProcNetwork::new(),
        disks: (1..=3).map(|id| (id, MemDisk::new())).collect(),
        handles: BTreeMap::new(),
        tasks: BTreeMap::new(),
    };
    for id in 1..=3 {
        c.start(id).await;
    }
    let victim = 1 + rng.below(3);
    let writers: Vec<_> = (1..=3)
        .filter(|&id| id != victim)
        .map(|id| c.handles[&id].clone())
        .collect();
    let (stop, acked) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let mut clients = load(&writers, &stop, &acked);
    let mut worst = 0;
    for round in 0..RESTARTS {
        // A life of a few writes to a few cadences' worth: most die before a snapshot of
        // their own would be due if the count started afresh at every start.
        let writes = 1 + rng.below(2 * SNAPSHOT_EVERY);
        let target = c.commit() + writes;
        let h = c.handles[&victim].clone();
        eventually(
            Duration::from_secs(20),
            "the member applies its writes",
            || std::future::ready((h.status().applied_index >= target).then_some(())),
        )
        .await;
        c.kill(victim).await;
        let n = replayed(engine, &c.disks[&victim]) as u64;
        worst = worst.max(n);
        if n > replay_bound() {
            stop.store(true, Ordering::SeqCst);
            return Err(format!(
                "restart {round}: node {victim} replays {n} entries past its snapshot \
                 (bound {})",
                replay_bound()
            ));
        }
        c.start(victim).await;
    }
    stop.store(true, Ordering::SeqCst);
    while clients.join_next().await.is_some() {}
    let acked = std::mem::take(&mut *acked.lock().unwrap_or_else(|e| e.into_inner()));
    let last = c.commit();
    for (&id, h) in &c.handles {
        let h = h.clone();
        eventually(Duration::from_secs(20), "members converge", || {
            std::future::ready((h.status().applied_index >= last).then_some(()))
        })
        .await;
        let missing = h.read(|l| acked.iter().filter(|a| !l.contains(a)).count());
        if missing > 0 {
            return Err(format!("node {id} lost {missing} acknowledged writes"));
        }
    }
    eprintln!(
        "{engine:?} seed {seed}: node {victim} restarted {RESTARTS} times, {} writes \
         acknowledged, at most {worst} entries replayed (bound {})",
        acked.len(),
        replay_bound()
    );
    for (_, t) in std::mem::take(&mut c.tasks) {
        let _ = t.stop().await;
    }
    Ok(())
}

/// Runs `seed` (or `RESTART_REPLAY_SEED`), failing with the command that replays it.
async fn run(engine: Engine, seed: u64) {
    let seed = std::env::var("RESTART_REPLAY_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(seed);
    let why = match tokio::spawn(restarts(engine, seed)).await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e,
        Err(e) => format!("panicked: {e}"),
    };
    panic!(
        "{engine:?} seed {seed} FAILED: {why}\n  reproduce: RESTART_REPLAY_SEED={seed} \
         cargo test -p coordbench-node --test restart_replay -- --nocapture"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_restarts_replay_a_bounded_log() {
    run(Engine::Raft, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zab_restarts_replay_a_bounded_log() {
    run(Engine::Zab, 2).await;
}
