//! Test harness: the etcd API served on 127.0.0.1 over either backend, and connected
//! clients. `Kind::Local` is a single member that applies in-process (the degenerate
//! one-member cluster); `Kind::Raft` is three Raft members in one process (in-memory disks,
//! in-process network), one etcd API server per member, with clients talking to a
//! follower so that forwarding, follower reads and follower-side watches are exercised.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use coordbench_etcd_api::{
    spawn, KvStateMachine, LeaseTiming, MemberInfo, ServeOptions, ServerHandle,
};
use coordbench_node::{
    InProcNetwork, MemDisk, NodeConfig, NodeRole, NodeStatus, NodeTask, RaftHandle, RaftNode,
    Replicator,
};

/// Which replication backs the served member(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Local,
    Raft,
}

pub const MEMBER_ID: u64 = 0x8e9e_05c5_2164_694d;

/// The degenerate one-member cluster (engines/node's `LocalReplicator`) over the kv model.
pub type LocalReplicator = coordbench_node::LocalReplicator<KvStateMachine>;

/// Options for tests: fast lease expiry, 1 s minimum TTL.
pub fn fast_options() -> ServeOptions {
    ServeOptions {
        min_lease_ttl_secs: 1,
        lease_tick: Duration::from_millis(100),
        ..ServeOptions::default()
    }
}

/// Lease timing of the Raft test members: a new leader extends leases by one election
/// timeout (300 ms), and leases longer than 1 s are checkpointed every second.
pub const LEASE_TIMING: LeaseTiming = LeaseTiming {
    promote_extension_ms: 300,
    checkpoint_interval_ms: 1_000,
};

/// Raft test timing: 10 ms ticks, heartbeat 50 ms, election timeout 300–600 ms.
fn raft_config(id: u64, peers: &BTreeMap<u64, SocketAddr>) -> NodeConfig {
    let mut cfg = NodeConfig::new(id, peers.clone(), format!("/nonexistent/n{id}"));
    cfg.tick_interval = Duration::from_millis(10);
    cfg.heartbeat_ticks = 5;
    cfg.election_ticks_min = 30;
    cfg.election_ticks_max = 60;
    cfg.request_timeout = Duration::from_secs(5);
    cfg
}

enum Backend {
    Local(LocalReplicator),
    Raft {
        net: InProcNetwork,
        handles: BTreeMap<u64, RaftHandle<KvStateMachine>>,
        tasks: Vec<NodeTask>,
    },
}

pub struct TestServer {
    pub kind: Kind,
    backend: Backend,
    /// One API server per member, by member id.
    servers: BTreeMap<u64, ServerHandle>,
    /// The member clients talk to (a follower in a Raft cluster).
    target: MemberInfo,
}

/// Member `n` (1-based) of a test cluster.
fn member(id: u64, n: u16) -> MemberInfo {
    MemberInfo {
        id,
        name: format!("m{n}"),
        peer_urls: vec![format!("http://127.0.0.1:{}", 2380 + n)],
        client_urls: Vec::new(),
    }
}

fn any_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

impl TestServer {
    pub async fn start(kind: Kind, options: ServeOptions) -> TestServer {
        match kind {
            Kind::Local => {
                let replicator = LocalReplicator::new(MEMBER_ID, KvStateMachine::new());
                let handle = spawn(
                    any_addr(),
                    replicator.clone(),
                    vec![member(MEMBER_ID, 1)],
                    options,
                )
                .await
                .expect("server starts");
                TestServer {
                    kind,
                    backend: Backend::Local(replicator),
                    servers: BTreeMap::from([(MEMBER_ID, handle)]),
                    target: member(MEMBER_ID, 1),
                }
            }
            Kind::Raft => Self::start_raft(options).await,
        }
    }

    async fn start_raft(options: ServeOptions) -> TestServer {
        let net = InProcNetwork::new();
        // Addresses are only labels on an in-process network.
        let peers: BTreeMap<u64, SocketAddr> = (1..=3)
            .map(|id| (id, SocketAddr::from(([127, 0, 0, 1], 2380 + id as u16))))
            .collect();
        let members: Vec<MemberInfo> = (1..=3).map(|n| member(u64::from(n), n)).collect();
        let mut handles = BTreeMap::new();
        let mut tasks = Vec::new();
        let mut servers = BTreeMap::new();
        for id in 1..=3 {
            let (transport, inbox) = net.join(id, 4096);
            let (handle, task) = RaftNode::start_with(
                raft_config(id, &peers),
                KvStateMachine::new().with_lease_timing(LEASE_TIMING),
                Arc::new(MemDisk::new()),
                transport,
                inbox,
            )
            .await
            .expect("raft member starts");
            let server = spawn(any_addr(), handle.clone(), members.clone(), options.clone())
                .await
                .expect("server starts");
            handles.insert(id, handle);
            tasks.push(task);
            servers.insert(id, server);
        }
        let leader = within("a leader all members agree on", 10, async {
            loop {
                let statuses: Vec<NodeStatus> = handles.values().map(|h| h.status()).collect();
                let leader = statuses[0].leader;
                if leader.is_some()
                    && statuses.iter().all(|s| s.leader == leader)
                    && statuses
                        .iter()
                        .any(|s| Some(s.id) == leader && s.role == NodeRole::Leader)
                {
                    break leader;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        let target = members
            .iter()
            .find(|m| Some(m.id) != leader)
            .cloned()
            .expect("a follower");
        TestServer {
            kind: Kind::Raft,
            backend: Backend::Raft {
                net,
                handles,
                tasks,
            },
            servers,
            target,
        }
    }

    /// The member clients talk to.
    pub fn target(&self) -> &MemberInfo {
        &self.target
    }

    pub fn member_id(&self) -> u64 {
        self.target.id
    }

    pub fn members(&self) -> usize {
        self.servers.len()
    }

    fn status(&self) -> NodeStatus {
        match &self.backend {
            Backend::Local(r) => r.status(),
            Backend::Raft { handles, .. } => handles[&self.target.id].status(),
        }
    }

    /// The leader as the target member knows it.
    pub fn leader_id(&self) -> Option<u64> {
        self.status().leader
    }

    pub fn endpoint(&self) -> String {
        self.servers[&self.target.id].local_addr().to_string()
    }

    pub async fn client(&self) -> etcd_client::Client {
        within(
            "connect",
            5,
            etcd_client::Client::connect([self.endpoint()], None),
        )
        .await
        .expect("connect")
    }

    /// Makes the target member lose (or regain) its leader: a switch on the local
    /// replicator; network isolation of the member in a Raft cluster.
    pub async fn lose_leader(&self, lost: bool) {
        match &self.backend {
            Backend::Local(r) => r.set_leaderless(lost),
            Backend::Raft { net, handles, .. } => {
                net.isolate(self.target.id, lost);
                let h = &handles[&self.target.id];
                within("leader change seen", 10, async {
                    while h.status().leader.is_some() == lost {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })
                .await;
            }
        }
    }

    /// The leader of a Raft cluster, once every member agrees on it.
    pub async fn leader(&self) -> u64 {
        let Backend::Raft { handles, .. } = &self.backend else {
            return MEMBER_ID;
        };
        within("a leader all members agree on", 10, async {
            loop {
                let leaders: Vec<Option<u64>> =
                    handles.values().map(|h| h.status().leader).collect();
                if leaders[0].is_some() && leaders.iter().all(|l| *l == leaders[0]) {
                    break leaders[0].unwrap_or_default();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }

    /// Cuts the Raft leader off the network until the other two elect a new leader;
    /// returns (old leader, new leader). Clients keep talking to the target member, a
    /// follower of both.
    pub async fn isolate_leader(&self) -> (u64, u64) {
        let Backend::Raft { net, handles, .. } = &self.backend else {
            panic!("only a Raft cluster changes leaders");
        };
        let old = self.leader().await;
        net.isolate(old, true);
        let new = within("a new leader", 10, async {
            loop {
                let elected = handles
                    .iter()
                    .filter(|(&id, _)| id != old)
                    .find(|(_, h)| h.status().role == NodeRole::Leader);
                if let Some((&id, _)) = elected {
                    break id;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        (old, new)
    }

    /// Reconnects member `id` (Raft).
    pub fn reconnect(&self, id: u64) {
        if let Backend::Raft { net, .. } = &self.backend {
            net.isolate(id, false);
        }
    }

    pub async fn stop(self) {
        for (_, server) in self.servers {
            server.shutdown().await.expect("graceful shutdown");
        }
        if let Backend::Raft { tasks, .. } = self.backend {
            for t in tasks {
                within("raft member stops", 10, t.stop())
                    .await
                    .expect("clean stop");
            }
        }
    }
}

/// Generates, for each named `async fn name(kind: Kind)`, one test per backend:
/// `local::name` and `raft::name` (use with `#[macro_use] mod common;`).
#[allow(unused_macros)]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Kind::Local).await
                }
            )*
        }
        mod raft {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Kind::Raft).await
                }
            )*
        }
    };
}

/// A watch on `key` from now, once the server confirmed its creation.
pub async fn watching(c: &mut etcd_client::Client, key: &str) -> etcd_client::WatchStream {
    let mut w = c.watch(key, None).await.expect("watch");
    within("created", 5, w.message())
        .await
        .expect("msg")
        .expect("created");
    w
}

/// Bounds a test step.
pub async fn within<T>(what: &str, secs: u64, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}
