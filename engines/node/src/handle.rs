//! [`NodeHandle`] ([`RaftHandle`], [`ZabHandle`]): the services' side of a running member,
//! implementing [`Replicator`]. The same handle serves both cores: it only speaks the
//! runtime's request channel and watches the published status (for Zab, indexes are zxids).
//!
//! Requests go to the node's loop over a bounded channel (a full channel makes callers
//! wait: backpressure). Every call has one deadline (`request_timeout`); retries happen
//! only when the loop hands the command back, i.e. when it was certainly not appended.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_raft::NodeId;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{timeout_at, Instant};

use crate::runtime::{ProposeFail, Request};
use crate::seam::{NodeError, NodeStatus, Replicator, StateMachine};

/// Attempts per request at most (each bounded by the request's deadline anyway).
const MAX_ATTEMPTS: usize = 32;

/// A Raft member's handle.
pub type RaftHandle<S> = NodeHandle<S>;
/// A Zab member's handle (`status().term` is the epoch; indexes are zxids).
pub type ZabHandle<S> = NodeHandle<S>;

/// A cheap, cloneable handle to a running member.
pub struct NodeHandle<S: StateMachine> {
    inner: Arc<Inner<S>>,
}

struct Inner<S: StateMachine> {
    id: NodeId,
    requests: mpsc::Sender<Request<S>>,
    sm: Arc<RwLock<S>>,
    status: watch::Receiver<NodeStatus>,
    request_timeout: Duration,
    /// How long to wait for a leader to appear before answering `NoLeader`.
    leader_wait: Duration,
    retry_pause: Duration,
}

impl<S: StateMachine> Clone for NodeHandle<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<S: StateMachine> NodeHandle<S> {
    pub(crate) fn new(
        id: NodeId,
        requests: mpsc::Sender<Request<S>>,
        sm: Arc<RwLock<S>>,
        status: watch::Receiver<NodeStatus>,
        request_timeout: Duration,
        leader_wait: Duration,
        retry_pause: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                id,
                requests,
                sm,
                status,
                request_timeout,
                leader_wait,
                retry_pause,
            }),
        }
    }

    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// Status updates (leader, role, term, commit and applied index) as they happen, for
    /// services that act on leadership (e.g. lease expiry runs on the leader only).
    pub fn subscribe(&self) -> watch::Receiver<NodeStatus> {
        self.inner.status.clone()
    }

    /// Waits until the local state machine has applied `index`.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<(), NodeError> {
        self.wait_applied_until(index, Instant::now() + timeout)
            .await
    }

    async fn wait_applied_until(&self, index: u64, deadline: Instant) -> Result<(), NodeError> {
        let mut rx = self.inner.status.clone();
        let seen = timeout_at(deadline, rx.wait_for(|s| s.applied_index >= index))
            .await
            .map(|r| r.is_ok());
        match seen {
            Ok(true) => Ok(()),
            Ok(false) => Err(NodeError::Stopped),
            Err(_) => Err(NodeError::Timeout),
        }
    }

    /// Waits (up to an election timeout, within `deadline`) for some leader to be known.
    async fn wait_for_leader(&self, deadline: Instant) -> Result<(), NodeError> {
        let limit = deadline.min(Instant::now() + self.inner.leader_wait);
        let mut rx = self.inner.status.clone();
        let seen = timeout_at(limit, rx.wait_for(|s| s.leader.is_some()))
            .await
            .map(|r| r.is_ok());
        match seen {
            Ok(true) => Ok(()),
            Ok(false) => Err(NodeError::Stopped),
            Err(_) if Instant::now() >= deadline => Err(NodeError::Timeout),
            Err(_) => Err(NodeError::NoLeader),
        }
    }

    async fn submit(&self, req: Request<S>, deadline: Instant) -> Result<(), NodeError> {
        match timeout_at(deadline, self.inner.requests.send(req)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(NodeError::Stopped),
            Err(_) => Err(NodeError::Timeout),
        }
    }

    async fn pause(&self, deadline: Instant) -> Result<(), NodeError> {
        let until = deadline.min(Instant::now() + self.inner.retry_pause);
        tokio::time::sleep_until(until).await;
        if Instant::now() >= deadline {
            Err(NodeError::Timeout)
        } else {
            Ok(())
        }
    }

    async fn read_index(&self, deadline: Instant) -> Result<u64, NodeError> {
        self.until_answered(deadline, |reply| Request::ReadIndex { reply })
            .await
    }

    /// Submits the request `make` builds and waits for its answer, again (after a pause)
    /// while no leader could answer it: reads and leader queries are safe to repeat.
    async fn until_answered<T>(
        &self,
        deadline: Instant,
        make: impl Fn(oneshot::Sender<Result<T, NodeError>>) -> Request<S>,
    ) -> Result<T, NodeError> {
        for _ in 0..MAX_ATTEMPTS {
            self.wait_for_leader(deadline).await?;
            let (tx, rx) = oneshot::channel();
            self.submit(make(tx), deadline).await?;
            match timeout_at(deadline, rx).await {
                Err(_) => return Err(NodeError::Timeout),
                Ok(Err(_)) => return Err(NodeError::Stopped),
                Ok(Ok(Ok(answer))) => return Ok(answer),
                Ok(Ok(Err(NodeError::NoLeader))) => self.pause(deadline).await?,
                Ok(Ok(Err(e))) => return Err(e),
            }
        }
        Err(NodeError::NoLeader)
    }
}

#[async_trait]
impl<S: StateMachine> Replicator<S> for NodeHandle<S> {
    async fn propose(&self, command: Vec<u8>) -> Result<S::Output, NodeError> {
        let deadline = Instant::now() + self.inner.request_timeout;
        let mut command = command;
        for _ in 0..MAX_ATTEMPTS {
            self.wait_for_leader(deadline).await?;
            let (tx, rx) = oneshot::channel();
            self.submit(Request::Propose { command, reply: tx }, deadline)
                .await?;
            match timeout_at(deadline, rx).await {
                Err(_) => return Err(NodeError::Timeout),
                Ok(Err(_)) => return Err(NodeError::Stopped),
                Ok(Ok(Ok(out))) => return Ok(out),
                Ok(Ok(Err(ProposeFail {
                    error: NodeError::NoLeader,
                    command: Some(c),
                }))) => {
                    command = c;
                    self.pause(deadline).await?;
                }
                Ok(Ok(Err(f))) => return Err(f.error),
            }
        }
        Err(NodeError::NoLeader)
    }

    async fn read_barrier(&self) -> Result<(), NodeError> {
        let deadline = Instant::now() + self.inner.request_timeout;
        let index = self.read_index(deadline).await?;
        self.wait_applied_until(index, deadline).await
    }

    async fn ask_leader(&self, query: Vec<u8>) -> Result<Vec<u8>, NodeError> {
        let deadline = Instant::now() + self.inner.request_timeout;
        self.until_answered(deadline, |reply| Request::LeaderQuery {
            query: query.clone(),
            reply,
        })
        .await
    }

    fn read<R>(&self, f: impl FnOnce(&S) -> R) -> R {
        let sm = self.inner.sm.read().unwrap_or_else(|e| e.into_inner());
        f(&sm)
    }

    fn status(&self) -> NodeStatus {
        self.inner.status.borrow().clone()
    }
}
