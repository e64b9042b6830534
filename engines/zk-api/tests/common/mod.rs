//! Test harness: the ZooKeeper protocol served on 127.0.0.1 by a single member that
//! applies in-process (the degenerate one-member cluster), and small helpers.

#![allow(dead_code)] // each test binary uses a different part

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_node::{NodeError, NodeRole, NodeStatus, Replicator, StateMachine};
use coordbench_zk_api::{spawn, ApplyOutput, ServeOptions, ServerHandle, TreeStateMachine};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every proposal commits at once and is applied in the caller's task, at the next index.
/// `set_leaderless(true)` makes it behave like a member that lost its leader.
#[derive(Clone)]
pub struct LocalReplicator {
    inner: Arc<Inner>,
}

struct Inner {
    leaderless: AtomicBool,
    /// (last applied index, state machine): one lock, so reads never overlap an apply.
    state: RwLock<(u64, TreeStateMachine)>,
}

impl LocalReplicator {
    pub fn new() -> Self {
        LocalReplicator {
            inner: Arc::new(Inner {
                leaderless: AtomicBool::new(false),
                state: RwLock::new((0, TreeStateMachine::new())),
            }),
        }
    }

    pub fn set_leaderless(&self, leaderless: bool) {
        self.inner.leaderless.store(leaderless, Ordering::SeqCst);
    }

    fn leaderless(&self) -> bool {
        self.inner.leaderless.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Replicator<TreeStateMachine> for LocalReplicator {
    async fn propose(&self, command: Vec<u8>) -> Result<ApplyOutput, NodeError> {
        if self.leaderless() {
            return Err(NodeError::NoLeader);
        }
        let mut state = self.inner.state.write().map_err(|_| NodeError::Stopped)?;
        state.0 += 1;
        let index = state.0;
        Ok(state.1.apply(index, &command))
    }

    async fn read_barrier(&self) -> Result<(), NodeError> {
        if self.leaderless() {
            return Err(NodeError::NoLeader);
        }
        Ok(())
    }

    fn read<T>(&self, f: impl FnOnce(&TreeStateMachine) -> T) -> T {
        let state = self.inner.state.read().unwrap_or_else(|e| e.into_inner());
        f(&state.1)
    }

    fn status(&self) -> NodeStatus {
        let index = self.inner.state.read().map_or(0, |s| s.0);
        let leaderless = self.leaderless();
        NodeStatus {
            id: 1,
            role: if leaderless {
                NodeRole::Follower
            } else {
                NodeRole::Leader
            },
            leader: (!leaderless).then_some(1),
            term: 1,
            commit_index: index,
            applied_index: index,
        }
    }
}

/// Options for tests: 100 ms ticks (session timeouts 200 ms ..= 2 s), container checks
/// every tick.
pub fn fast_options() -> ServeOptions {
    ServeOptions {
        tick_time: Duration::from_millis(100),
        container_check_interval: Duration::from_millis(100),
        ..ServeOptions::default()
    }
}

pub struct TestServer {
    pub replicator: LocalReplicator,
    handle: ServerHandle,
}

impl TestServer {
    pub async fn start(options: ServeOptions) -> TestServer {
        let replicator = LocalReplicator::new();
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let handle = spawn(addr, replicator.clone(), options)
            .await
            .expect("server starts");
        TestServer { replicator, handle }
    }

    pub fn addr(&self) -> SocketAddr {
        self.handle.local_addr()
    }

    pub fn endpoint(&self) -> String {
        self.addr().to_string()
    }

    /// A zookeeper-client session with the given timeout.
    pub async fn client(&self, session_timeout: Duration) -> zookeeper_client::Client {
        within(
            "connect",
            5,
            zookeeper_client::Client::connector()
                .with_session_timeout(session_timeout)
                .connect(&self.endpoint()),
        )
        .await
        .expect("connect")
    }

    pub async fn stop(self) {
        within("shutdown", 15, self.handle.shutdown())
            .await
            .expect("graceful shutdown");
    }
}

/// Sends a four-letter word and returns the whole answer.
pub async fn four_letter(addr: SocketAddr, word: &str) -> String {
    within(word, 5, async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(word.as_bytes()).await.expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    })
    .await
}

/// Bounds a test step.
pub async fn within<T>(what: &str, secs: u64, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}
