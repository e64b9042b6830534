//! Starting a Zab member: recovers the [`ZabWal`], restores the state machine from the
//! latest snapshot, builds the Zab core and spawns its loop (`zab_runtime`). The handle,
//! the task, the start errors and the production disk/TCP setup are the Raft member's.

use std::sync::{Arc, RwLock};

use coordbench_zab::RawNode;
use tokio::sync::{mpsc, watch};

use crate::config::NodeConfig;
use crate::disk::Disk;
use crate::envelope::Envelope;
use crate::handle::ZabHandle;
use crate::raft_node::{incarnation_seed, open_files_and_tcp, NodeTask, StartError};
use crate::runtime::retry_pause;
use crate::seam::StateMachine;
use crate::transport::Transport;
use crate::zab_runtime::{node_status, ZabRuntime};
use crate::zab_wal::ZabWal;

/// Starts Zab members.
pub struct ZabNode;

impl ZabNode {
    /// Starts member `config.id` on real files under `config.data_dir` and TCP on
    /// `config.peers[id]`. `state_machine` must be empty: it is restored from the latest
    /// snapshot and the committed proposals after it are applied again (with their zxids
    /// as indexes).
    pub async fn start<S: StateMachine>(
        config: NodeConfig,
        state_machine: S,
    ) -> Result<(ZabHandle<S>, NodeTask), StartError> {
        let (disk, transport, inbox) = open_files_and_tcp(&config).await?;
        Self::start_with(config, state_machine, disk, transport, inbox).await
    }

    /// Starts a member on any [`Disk`] and [`Transport`]; `inbox` receives the envelopes
    /// addressed to it.
    pub async fn start_with<S: StateMachine, T: Transport>(
        config: NodeConfig,
        mut state_machine: S,
        disk: Arc<dyn Disk>,
        transport: T,
        inbox: mpsc::Receiver<Envelope>,
    ) -> Result<(ZabHandle<S>, NodeTask), StartError> {
        let zab_config = config.zab_config(incarnation_seed(config.id));
        zab_config
            .validate()
            .map_err(|e| StartError::Config(e.to_string()))?;
        if config.tick_interval.is_zero() {
            return Err(StartError::Config("tick interval must be positive".into()));
        }
        let opts = config.wal;
        let (wal, state) = tokio::task::spawn_blocking(move || ZabWal::open(disk, opts))
            .await
            .map_err(|e| StartError::Task(e.to_string()))??;
        if let Some(s) = &state.snapshot {
            state_machine
                .restore(&s.data)
                .map_err(|reason| StartError::Restore {
                    index: s.zxid.0,
                    reason,
                })?;
        }
        tracing::info!(
            id = config.id,
            epoch = state.hard_state.current_epoch,
            commit = %state.hard_state.commit,
            snapshot = %state.snapshot.as_ref().map_or(Default::default(), |s| s.zxid),
            proposals = state.entries.len(),
            "recovered"
        );
        let hard_state = state.hard_state.clone();
        let raw = RawNode::new(zab_config, state)?;
        let st = raw.status();
        let (status_tx, status_rx) = watch::channel(node_status(&st, st.applied));
        let (req_tx, req_rx) = mpsc::channel(config.max_pending.clamp(1, 4096));
        let sm = Arc::new(RwLock::new(state_machine));
        let handle = ZabHandle::new(
            config.id,
            req_tx,
            sm.clone(),
            status_rx,
            config.request_timeout,
            config.election_timeout(),
            retry_pause(&config),
        );
        let runtime = ZabRuntime::new(
            config,
            raw,
            wal,
            sm,
            Box::new(transport),
            inbox,
            req_rx,
            status_tx,
            hard_state,
        );
        Ok((handle, NodeTask::spawn(|stop| runtime.run(stop))))
    }
}
