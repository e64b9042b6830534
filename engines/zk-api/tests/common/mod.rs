//! Test harness: the ZooKeeper protocol served on 127.0.0.1 by a single member that
//! applies in-process (the degenerate one-member cluster), and small helpers.

#![allow(dead_code)] // each test binary uses a different part

use std::net::SocketAddr;
use std::time::Duration;

use coordbench_zk_api::{spawn, ServeOptions, ServerHandle, TreeStateMachine};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The degenerate one-member cluster (engines/node's `LocalReplicator`) over the tree
/// model, as member 1.
pub type LocalReplicator = coordbench_node::LocalReplicator<TreeStateMachine>;

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
        let replicator = LocalReplicator::new(1, TreeStateMachine::new());
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
