//! The Zab core's adapter: [`ZabCore`] puts the Zab [`RawNode`] behind the runtime's
//! [`Core`] trait (zxids are the positions the state machine sees as indexes, epochs the
//! terms), [`ZabFormat`] is its WAL format (proposals keyed by non-contiguous zxids,
//! truncations, Zab's hard state; snapshots are stored by zxid with term 0), and [`ZabNode`]
//! starts members with them.

use std::sync::Arc;

use coordbench_zab::{
    Error as ZabError, HardState, NodeId, PersistedState, Phase, Proposal, RawNode, Role, Zxid,
};
use tokio::sync::mpsc;

use crate::config::NodeConfig;
use crate::core::{CompactFail, Core, CoreStatus, Position, Ready, Refused};
use crate::disk::Disk;
use crate::envelope::{Envelope, Payload};
use crate::handle::ZabHandle;
use crate::node::{self, NodeTask, StartError};
use crate::seam::{NodeRole, StateMachine};
use crate::transport::Transport;
use crate::wal::{LogFormat, Recovered, Replay, Snapshot, SnapshotFiles, Wal, WalError};

/// The Zab member's WAL.
pub type ZabWal = Wal<ZabFormat>;

/// How the Zab core's durable state is stored (segments `*.zwal`).
pub struct ZabFormat;

impl LogFormat for ZabFormat {
    type Entry = Proposal;
    type HardState = HardState;

    const SEGMENT_EXT: &'static str = "zwal";

    fn index(p: &Proposal) -> u64 {
        p.zxid.0
    }

    fn term(p: &Proposal) -> u64 {
        u64::from(p.zxid.epoch())
    }

    fn command(p: &Proposal) -> Option<&[u8]> {
        Some(&p.data)
    }

    fn encoded_size(p: &Proposal) -> usize {
        p.data.len() + 16
    }

    /// Epochs and the election round must be durable before anything promising them goes out.
    fn must_sync(new: &HardState, last: &HardState) -> bool {
        (new.accepted_epoch, new.current_epoch, new.round)
            != (last.accepted_epoch, last.current_epoch, last.round)
    }

    /// Restarts from the snapshot the durable marker names (a newer file whose marker did
    /// not become durable is ignored: the history before it is still complete).
    fn recover(
        replay: Replay<Self>,
        snapshots: &SnapshotFiles<'_>,
    ) -> Result<Recovered<Self>, WalError> {
        let snapshot = match replay.marker {
            None => None,
            Some((index, _)) => Some(snapshots.at(index)?),
        };
        let mut hard_state = replay.hard_state;
        // The commit point never refers past the durable history.
        let last = replay
            .entries
            .last()
            .map(|p| p.zxid)
            .or(replay.marker.map(|(index, _)| Zxid(index)))
            .unwrap_or(Zxid::ZERO);
        hard_state.commit = hard_state.commit.min(last);
        Ok(Recovered {
            hard_state,
            snapshot,
            entries: replay.entries,
        })
    }
}

/// The Zab core as the runtime drives it. Only an established epoch (broadcast phase) has
/// a leader to propose to; during election, discovery and sync there is none.
pub(crate) struct ZabCore(RawNode);

impl Core for ZabCore {
    type Log = ZabFormat;
    type Message = coordbench_zab::Message;
    type Config = coordbench_zab::Config;
    type Rest = coordbench_zab::Ready;

    /// A follower's core asks its leader itself (ZooKeeper's `sync()`).
    const READS_VIA_LEADER: bool = false;

    fn configure(config: &NodeConfig, seed: u64) -> Result<Self::Config, StartError> {
        let zab_config = config.zab_config(seed);
        zab_config
            .validate()
            .map_err(|e| StartError::Config(e.to_string()))?;
        Ok(zab_config)
    }

    fn new(config: Self::Config, state: Recovered<ZabFormat>) -> Result<Self, StartError> {
        let state = PersistedState {
            hard_state: state.hard_state,
            snapshot: state.snapshot.map(|s| coordbench_zab::Snapshot {
                zxid: Zxid(s.index),
                data: Vec::from(s.data),
            }),
            entries: state.entries,
        };
        Ok(Self(RawNode::new(config, state)?))
    }

    fn tick(&mut self) {
        self.0.tick();
    }

    fn step(&mut self, payload: Payload) -> Result<(), String> {
        match payload {
            Payload::Zab(m) => self.0.step(m).map_err(|e| e.to_string()),
            _ => Err("not a Zab message".into()),
        }
    }

    fn wrap(m: Self::Message) -> (NodeId, Payload) {
        (m.to, Payload::Zab(m))
    }

    fn status(&self) -> CoreStatus {
        let st = self.0.status();
        let (role, leader) = match (st.role, st.phase) {
            (Role::Leading, Phase::Broadcast) => (NodeRole::Leader, Some(st.id)),
            (Role::Following, Phase::Broadcast) => (NodeRole::Follower, st.leader),
            (Role::Looking, _) => (NodeRole::Candidate, None),
            _ => (NodeRole::Follower, None),
        };
        CoreStatus {
            role,
            leader,
            term: u64::from(st.current_epoch),
            commit: st.commit.0,
        }
    }

    fn propose(&mut self, command: Vec<u8>) -> Result<Position, Refused> {
        match self.0.propose(command) {
            Ok(zxid) => Ok((zxid.0, u64::from(zxid.epoch()))),
            Err(ZabError::NotLeader { leader_hint }) => {
                Err(Refused::NotLeader { hint: leader_hint })
            }
            Err(ZabError::ZxidExhausted) => Err(Refused::Retry),
            Err(e) => Err(Refused::Other(e.to_string())),
        }
    }

    fn read(&mut self, ctx: u64) -> Result<(), Option<NodeId>> {
        self.0.sync_read(ctx).map_err(|e| match e {
            ZabError::NotLeader { leader_hint } | ZabError::NotServing { leader_hint } => {
                leader_hint
            }
            _ => None,
        })
    }

    fn has_ready(&self) -> bool {
        self.0.has_ready()
    }

    fn ready(&mut self) -> Ready<Self> {
        let mut rd = self.0.ready();
        let read_states = std::mem::take(&mut rd.read_states);
        Ready {
            messages: std::mem::take(&mut rd.messages),
            snapshot: rd.snapshot.take().map(|s| Snapshot {
                index: s.zxid.0,
                term: 0,
                data: s.data.into(),
            }),
            truncate_after: rd.truncate_after.map(|z| z.0),
            entries: std::mem::take(&mut rd.entries),
            // `advance` needs it too.
            hard_state: rd.hard_state.clone(),
            persisted_messages: std::mem::take(&mut rd.persisted_messages),
            committed: std::mem::take(&mut rd.committed_entries),
            read_states: read_states.into_iter().map(|r| (r.ctx, r.zxid.0)).collect(),
            dropped_reads: std::mem::take(&mut rd.dropped_reads),
            rest: rd,
        }
    }

    fn advance(&mut self, rest: coordbench_zab::Ready) {
        self.0.advance(rest);
    }

    fn applied(&mut self, index: u64) {
        self.0.applied_to(Zxid(index));
    }

    fn peer_disconnected(&mut self, peer: NodeId) {
        self.0.peer_disconnected(peer);
    }

    fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<Snapshot, CompactFail> {
        let zxid = Zxid(index);
        match self.0.compact(zxid, data.clone()) {
            Ok(()) => Ok(Snapshot {
                index,
                term: 0,
                data: data.into(),
            }),
            Err(ZabError::SnapshotInstallPending) => Err(CompactFail::Pending),
            Err(e) => Err(CompactFail::Refused(e.to_string())),
        }
    }
}

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
        node::start::<ZabCore, S>(config, state_machine).await
    }

    /// Starts a member on any [`Disk`] and [`Transport`]; `inbox` receives the envelopes
    /// addressed to it.
    pub async fn start_with<S: StateMachine, T: Transport>(
        config: NodeConfig,
        state_machine: S,
        disk: Arc<dyn Disk>,
        transport: T,
        inbox: mpsc::Receiver<Envelope>,
    ) -> Result<(ZabHandle<S>, NodeTask), StartError> {
        node::start_with::<ZabCore, S, T>(config, state_machine, disk, transport, inbox).await
    }
}
