//! Three members (of either engine) on an in-process network with in-memory disks, hit by
//! repeated power failures while proposals are in flight: every member loses (or tears)
//! whatever no sync covered. After each restart no acknowledged write may be missing.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, Engine, Log};
use coordbench_node::{
    InProcNetwork, MemDisk, NodeConfig, NodeHandle, NodeRole, NodeTask, Replicator,
};
use tokio::task::JoinSet;

struct Member {
    disk: MemDisk,
    handle: Option<NodeHandle<Log>>,
    task: Option<NodeTask>,
}

fn config(id: u64) -> NodeConfig {
    let unused: SocketAddr = ([127, 0, 0, 1], 0).into();
    let peers: BTreeMap<u64, SocketAddr> = (1..=3).map(|i| (i, unused)).collect();
    let mut cfg = NodeConfig::new(id, peers, "unused");
    cfg.tick_interval = Duration::from_millis(10);
    cfg.heartbeat_ticks = 5;
    cfg.election_ticks_min = 30;
    cfg.election_ticks_max = 60;
    cfg.snapshot_every = 40;
    cfg
}

async fn start(engine: Engine, net: &InProcNetwork, members: &mut BTreeMap<u64, Member>) {
    for (&id, m) in members.iter_mut() {
        let (transport, inbox) = net.join(id, 4096);
        let (h, t) = engine
            .start_with(config(id), Arc::new(m.disk.clone()), transport, inbox)
            .await
            .unwrap_or_else(|e| panic!("node {id} failed to (re)start: {e}"));
        m.handle = Some(h);
        m.task = Some(t);
    }
}

fn handles(members: &BTreeMap<u64, Member>) -> Vec<NodeHandle<Log>> {
    members.values().filter_map(|m| m.handle.clone()).collect()
}

async fn wait_leader(members: &BTreeMap<u64, Member>) {
    let hs = handles(members);
    eventually(Duration::from_secs(10), "a leader", || {
        let ok = hs.iter().any(|h| h.status().role == NodeRole::Leader)
            && hs.iter().all(|h| h.status().leader.is_some());
        std::future::ready(ok.then_some(()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_failures_lose_no_acknowledged_write() {
    power_failures(Engine::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zab_power_failures_lose_no_acknowledged_write() {
    power_failures(Engine::Zab).await;
}

async fn power_failures(engine: Engine) {
    let net = InProcNetwork::new();
    let mut members: BTreeMap<u64, Member> = (1..=3)
        .map(|id| {
            (
                id,
                Member {
                    disk: MemDisk::new(),
                    handle: None,
                    task: None,
                },
            )
        })
        .collect();
    let mut acked: Vec<Vec<u8>> = Vec::new();
    for round in 0..3u64 {
        start(engine, &net, &mut members).await;
        wait_leader(&members).await;
        let hs = handles(&members);
        // Proposals in flight on every member when the power goes: 30 clients, each
        // proposing one command after another until its member dies.
        let mut set = JoinSet::new();
        for w in 0..30u64 {
            let h = hs[(w % 3) as usize].clone();
            set.spawn(async move {
                let mut ok = Vec::new();
                let mut outcomes = (0u64, 0u64);
                for k in 0..100_000u64 {
                    let cmd = format!("r{round}-w{w}-{k}").into_bytes();
                    match h.propose(cmd.clone()).await {
                        Ok(_) => ok.push(cmd),
                        Err(coordbench_node::NodeError::Stopped) => break,
                        Err(_) => outcomes.1 += 1,
                    }
                    outcomes.0 += 1;
                }
                (ok, outcomes)
            });
        }
        tokio::time::sleep(Duration::from_millis(150 + 50 * round)).await;
        for m in members.values_mut() {
            if let Some(t) = m.task.take() {
                t.crash().await;
            }
        }
        for (i, m) in members.values().enumerate() {
            // Lose everything unsynced, or keep a torn (garbled) part of it.
            let k = round as usize + i;
            m.disk
                .crash(|n| if k % 2 == 0 { 0 } else { n / 3 }, k % 3 == 0);
        }
        let mut failed = 0;
        while let Some(r) = set.join_next().await {
            let (ok, (_, errors)) = r.expect("client task");
            acked.extend(ok);
            failed += errors;
        }
        eprintln!(
            "round {round}: {} acknowledged so far, {failed} failed",
            acked.len()
        );
    }
    start(engine, &net, &mut members).await;
    wait_leader(&members).await;
    let hs = handles(&members);
    let last = hs[0]
        .propose(b"final".to_vec())
        .await
        .unwrap_or_else(|e| panic!("propose after the last restart: {e}"));
    eventually(Duration::from_secs(10), "members converge", || {
        let ok = hs.iter().all(|h| h.status().applied_index >= last);
        std::future::ready(ok.then_some(()))
    })
    .await;
    assert!(
        acked.len() > 50,
        "too few writes acknowledged to mean anything: {}",
        acked.len()
    );
    for h in &hs {
        let missing = h.read(|l| acked.iter().filter(|a| !l.contains(a)).count());
        assert_eq!(missing, 0, "node {} lost acknowledged writes", h.id());
        let dupes = h.read(|l| {
            let mut seen = std::collections::HashSet::new();
            l.items
                .iter()
                .filter(|(_, c)| !seen.insert(c.clone()))
                .count()
        });
        assert_eq!(dupes, 0, "a command was applied twice on node {}", h.id());
    }
    eprintln!(
        "{engine:?}: {} acknowledged writes survived 3 power failures",
        acked.len()
    );
    for m in members.values_mut() {
        if let Some(t) = m.task.take() {
            let _ = t.stop().await;
        }
    }
}
