//! Shared helpers of the cluster tests: the engine under test, a small state machine,
//! polling with deadlines, and the cluster harness (`cluster`).

#![allow(dead_code)]

pub mod cluster;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use coordbench_node::{
    Disk, Envelope, InProcTransport, NodeConfig, NodeHandle, NodeTask, RaftNode, StartError,
    StateMachine, ZabNode,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Which core the members run. Both give the same handle (`NodeHandle`) and task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Raft,
    Zab,
}

pub type Started = Result<(NodeHandle<Log>, NodeTask), StartError>;

impl Engine {
    /// Starts a member on real files and TCP.
    pub async fn start(self, cfg: NodeConfig) -> Started {
        match self {
            Engine::Raft => RaftNode::start(cfg, Log::default()).await,
            Engine::Zab => ZabNode::start(cfg, Log::default()).await,
        }
    }

    /// Starts a member on `disk` and the in-process network.
    pub async fn start_with(
        self,
        cfg: NodeConfig,
        disk: Arc<dyn Disk>,
        transport: InProcTransport,
        inbox: mpsc::Receiver<Envelope>,
    ) -> Started {
        match self {
            Engine::Raft => RaftNode::start_with(cfg, Log::default(), disk, transport, inbox).await,
            Engine::Zab => ZabNode::start_with(cfg, Log::default(), disk, transport, inbox).await,
        }
    }
}

/// An append-only list of commands. The output of a command is the log index it was
/// applied at. `restores` counts snapshot installs and `leading` the terms of the runtime's
/// empty leader queries (neither is part of the state). A leader query is answered with
/// the term it is answered in, how many commands were applied, and the query.
#[derive(Debug, Default)]
pub struct Log {
    pub items: Vec<(u64, Vec<u8>)>,
    pub restores: u64,
    pub leading: std::sync::Mutex<Vec<u64>>,
}

impl Log {
    pub fn contains(&self, cmd: &[u8]) -> bool {
        self.items.iter().any(|(_, c)| c == cmd)
    }
}

impl StateMachine for Log {
    type Output = u64;

    fn apply(&mut self, index: u64, command: &[u8]) -> u64 {
        self.items.push((index, command.to_vec()));
        index
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(self.items.len() as u64).to_le_bytes());
        for (i, c) in &self.items {
            out.extend_from_slice(&i.to_le_bytes());
            out.extend_from_slice(&(c.len() as u32).to_le_bytes());
            out.extend_from_slice(c);
        }
        out
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
            if b.len() < n {
                return Err("short snapshot".into());
            }
            let (h, t) = b.split_at(n);
            *b = t;
            Ok(h)
        }
        let mut b = snapshot;
        let u64_of = |b: &mut &[u8]| -> Result<u64, String> {
            let mut a = [0u8; 8];
            a.copy_from_slice(take(b, 8)?);
            Ok(u64::from_le_bytes(a))
        };
        let n = u64_of(&mut b)?;
        let mut items = Vec::new();
        for _ in 0..n {
            let i = u64_of(&mut b)?;
            let mut l = [0u8; 4];
            l.copy_from_slice(take(&mut b, 4)?);
            let c = take(&mut b, u32::from_le_bytes(l) as usize)?.to_vec();
            items.push((i, c));
        }
        self.items = items;
        self.restores += 1;
        Ok(())
    }

    fn leader_query(&self, term: u64, query: &[u8]) -> Vec<u8> {
        if query.is_empty() {
            self.leading
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(term);
        }
        let mut answer = format!("term {term} applied {} ", self.items.len()).into_bytes();
        answer.extend_from_slice(query);
        answer
    }
}

/// Polls `f` every 10 ms until it yields `Some`, or panics with `what` after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
