//! Starting and stopping a member of either core: recovers the WAL, restores the state
//! machine from the latest snapshot, builds the core (through its [`Core`] adapter), and
//! spawns the loop (`runtime`) that the returned [`NodeHandle`] talks to. [`crate::RaftNode`]
//! and [`crate::ZabNode`] are this with their core.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::census::{census, DataCensus};
use crate::config::NodeConfig;
use crate::core::{Core, CoreStatus};
use crate::disk::{Disk, FileDisk};
use crate::envelope::Envelope;
use crate::handle::NodeHandle;
use crate::runtime::{retry_pause, Parts, Runtime, RuntimeError};
use crate::seam::{NodeStatus, StateMachine};
use crate::since_exec;
use crate::tcp::TcpTransport;
use crate::transport::Transport;
use crate::wal::{Wal, WalError};

/// Why a member could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("data directory {dir}: {source}")]
    DataDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error("restoring the state machine from the snapshot at {index}: {reason}")]
    Restore { index: u64, reason: String },
    #[error("the Raft core refused the recovered state: {0}")]
    Raft(#[from] coordbench_raft::Error),
    #[error("the Zab core refused the recovered state: {0}")]
    Zab(#[from] coordbench_zab::Error),
    #[error("startup task failed: {0}")]
    Task(String),
}

/// Starts member `config.id` of core `C` on real files under `config.data_dir` and TCP on
/// `config.peers[id]`.
pub(crate) async fn start<C: Core, S: StateMachine>(
    config: NodeConfig,
    state_machine: S,
) -> Result<(NodeHandle<S>, NodeTask), StartError> {
    let listen = *config
        .peers
        .get(&config.id)
        .ok_or_else(|| StartError::Config(format!("node {} is not in peers", config.id)))?;
    let disk =
        FileDisk::open(&config.data_dir, config.disk).map_err(|source| StartError::DataDir {
            dir: config.data_dir.clone(),
            source,
        })?;
    let (inbox_tx, inbox) = mpsc::channel(config.tcp.queue_capacity.max(1));
    let peers: HashMap<_, _> = config.peers.iter().map(|(&k, &v)| (k, v)).collect();
    let transport = TcpTransport::start(config.id, listen, &peers, inbox_tx, config.tcp)
        .await
        .map_err(|source| StartError::Listen {
            addr: listen,
            source,
        })?;
    start_with::<C, S, _>(config, state_machine, Arc::new(disk), transport, inbox).await
}

/// Starts member `config.id` of core `C` on any [`Disk`] and [`Transport`]; `inbox`
/// receives the envelopes addressed to it. `state_machine` must be empty: it is restored
/// from the latest snapshot and the committed log after it is applied again.
pub(crate) async fn start_with<C: Core, S: StateMachine, T: Transport>(
    config: NodeConfig,
    mut state_machine: S,
    disk: Arc<dyn Disk>,
    transport: T,
    inbox: mpsc::Receiver<Envelope>,
) -> Result<(NodeHandle<S>, NodeTask), StartError> {
    // Varies the core's randomized timeouts between incarnations of the same member.
    let seed = config.id
        ^ SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    let core_config = C::configure(&config, seed)?;
    if config.tick_interval.is_zero() {
        return Err(StartError::Config("tick interval must be positive".into()));
    }

    // What the directory holds, counted before the open removes leftover temporary files.
    let census = census::<C::Log>(disk.as_ref())
        .inspect_err(|e| tracing::warn!(error = %e, "cannot count the WAL directory's files"))
        .ok();
    let opts = config.wal;
    let began = Instant::now();
    let (wal, state) = tokio::task::spawn_blocking(move || Wal::<C::Log>::open(disk, opts))
        .await
        .map_err(|e| StartError::Task(e.to_string()))??;
    let wal_open = began.elapsed();
    let applied = state.snapshot.as_ref().map_or(0, |s| s.index);
    let began = Instant::now();
    if let Some(s) = &state.snapshot {
        state_machine
            .restore(&s.data)
            .map_err(|reason| StartError::Restore {
                index: applied,
                reason,
            })?;
    }
    let restore = began.elapsed();
    let hard_state = state.hard_state.clone();
    let entries = state.entries.len();
    let began = Instant::now();
    let core = C::new(core_config, state)?;
    let phases = StartPhases {
        census,
        wal_open,
        restore,
        core: began.elapsed(),
    };

    let st = core.status();
    phases.log(config.id, &st, applied, entries);
    let (status_tx, status_rx) = watch::channel(NodeStatus {
        id: config.id,
        role: st.role,
        leader: st.leader,
        term: st.term,
        commit_index: st.commit,
        applied_index: applied,
    });
    let (req_tx, req_rx) = mpsc::channel(config.max_pending.clamp(1, 4096));
    let sm = Arc::new(RwLock::new(state_machine));
    let handle = NodeHandle::new(
        config.id,
        req_tx,
        sm.clone(),
        status_rx,
        config.request_timeout,
        config.election_timeout(),
        retry_pause(&config),
    );
    let runtime = Runtime::new(Parts {
        cfg: config,
        core,
        wal,
        sm,
        transport: Box::new(transport),
        inbox,
        requests: req_rx,
        status: status_tx,
        hard_state,
        applied,
    })
    .map_err(|e| StartError::Task(format!("starting the WAL writer thread: {e}")))?;
    Ok((handle, NodeTask::spawn(|stop| runtime.run(stop))))
}

/// Where a start's time went, and what the WAL's directory held: the `recovered` line's
/// figures, so that a start that grows over a run's restarts shows which phase grew.
struct StartPhases {
    census: Option<DataCensus>,
    /// `Wal::open` on its blocking thread (waiting for the thread included): the segment
    /// scan and replay, and reading the snapshot file.
    wal_open: Duration,
    /// The state machine's restore from the snapshot.
    restore: Duration,
    /// Building the core on the recovered log.
    core: Duration,
}

impl StartPhases {
    /// The `recovered` line. `since_exec_ms` (to one clock tick, see `since_exec`) and the
    /// census are left out where they could not be read.
    fn log(&self, id: u64, st: &CoreStatus, snapshot: u64, entries: usize) {
        let ms = |d: Duration| d.as_micros() as f64 / 1000.0;
        tracing::info!(
            id,
            term = st.term,
            commit = st.commit,
            snapshot,
            entries,
            since_exec_ms = since_exec::millis(),
            wal_open_ms = ms(self.wal_open),
            restore_ms = ms(self.restore),
            core_ms = ms(self.core),
            segments = self.census.map(|c| c.segments),
            snapshots = self.census.map(|c| c.snapshots),
            other_files = self.census.map(|c| c.others),
            data_bytes = self.census.map(|c| c.bytes),
            "recovered"
        );
    }
}

/// Controls a running member's task. Dropping it stops the member cleanly in the
/// background.
pub struct NodeTask {
    stop: Option<oneshot::Sender<()>>,
    join: Option<JoinHandle<Result<(), RuntimeError>>>,
}

impl NodeTask {
    /// Spawns a member's loop, handing it the receiving end of the stop signal.
    fn spawn<F>(run: impl FnOnce(oneshot::Receiver<()>) -> F) -> Self
    where
        F: std::future::Future<Output = Result<(), RuntimeError>> + Send + 'static,
    {
        let (stop_tx, stop_rx) = oneshot::channel();
        let join = tokio::spawn(run(stop_rx));
        Self {
            stop: Some(stop_tx),
            join: Some(join),
        }
    }

    /// Clean stop: finishes the `Ready` in progress, syncs the WAL, closes the network.
    /// Handles answer `Stopped` afterwards.
    pub async fn stop(mut self) -> Result<(), RuntimeError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.join_inner().await
    }

    /// Crash-like stop for tests: the task is dropped wherever it is, without a final sync.
    /// (A process crash: what was written reached the OS and stays in the files; use
    /// [`crate::MemDisk::crash`] to also lose what no sync covered.)
    pub async fn crash(mut self) {
        if let Some(join) = self.join.take() {
            join.abort();
            let _ = join.await;
        }
    }

    /// Waits for the member to stop on its own (only a fatal error stops it).
    pub async fn wait(mut self) -> Result<(), RuntimeError> {
        self.join_inner().await
    }

    pub fn is_finished(&self) -> bool {
        self.join.as_ref().is_none_or(|j| j.is_finished())
    }

    async fn join_inner(&mut self) -> Result<(), RuntimeError> {
        match self.join.take() {
            Some(join) => match join.await {
                Ok(r) => r,
                Err(e) => Err(RuntimeError::Task(e.to_string())),
            },
            None => Ok(()),
        }
    }
}
