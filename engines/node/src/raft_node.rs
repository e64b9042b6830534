//! The Raft core's adapter: [`RaftCore`] puts the Raft [`RawNode`] behind the runtime's
//! [`Core`] trait, [`RaftFormat`] is its WAL format (entries, hard state, snapshots and
//! Raft's recovery rule), and [`RaftNode`] starts members with them.

use std::sync::Arc;

use coordbench_raft::{
    Bytes, Entry, EntryKind, Error as RaftError, HardState, NodeId, PersistedState, RawNode, Role,
};
use tokio::sync::mpsc;

use crate::config::NodeConfig;
use crate::core::{CompactFail, Core, CoreStatus, Position, Ready, Refused};
use crate::disk::Disk;
use crate::envelope::{Envelope, Payload};
use crate::handle::RaftHandle;
use crate::node::{self, NodeTask, StartError};
use crate::seam::{NodeRole, StateMachine};
use crate::transport::Transport;
use crate::wal::{LogFormat, Recovered, Replay, Snapshot, SnapshotFiles, Wal, WalError};

/// The Raft member's WAL.
pub type RaftWal = Wal<RaftFormat>;

/// How the Raft core's durable state is stored (segments `*.wal`).
pub struct RaftFormat;

impl LogFormat for RaftFormat {
    type Entry = Entry;
    type HardState = HardState;

    const SEGMENT_EXT: &'static str = "wal";

    fn index(e: &Entry) -> u64 {
        e.index
    }

    fn term(e: &Entry) -> u64 {
        e.term
    }

    fn command(e: &Entry) -> Option<&[u8]> {
        match &e.kind {
            EntryKind::Normal(cmd) => Some(cmd),
            EntryKind::Noop => None,
        }
    }

    fn encoded_size(e: &Entry) -> usize {
        Self::command(e).map_or(0, <[u8]>::len) + 24
    }

    /// A new term or vote must be durable before the vote (or anything in the term) goes out.
    fn must_sync(new: &HardState, last: &HardState) -> bool {
        new.term != last.term || new.vote != last.vote
    }

    /// Entries are contiguous; a batch replaces the log from its first index on. A batch
    /// that does not continue the log (an overwrite reaching before it, or a gap left by
    /// segments removed after a snapshot) starts it over.
    fn replay_entries(log: &mut Vec<Entry>, ents: Vec<Entry>) -> Result<(), WalError> {
        let Some(first) = ents.first().map(|e| e.index) else {
            return Ok(());
        };
        if ents
            .iter()
            .enumerate()
            .any(|(k, e)| e.index != first + k as u64)
        {
            return Err(WalError::Corrupt(format!(
                "entries record from {first} is not contiguous"
            )));
        }
        match log.first().map(|e| e.index) {
            Some(start) if first >= start && first <= start + log.len() as u64 => {
                log.truncate((first - start) as usize);
                log.extend(ents);
            }
            _ => *log = ents,
        }
        Ok(())
    }

    /// Restarts from the newest readable snapshot file and the log after it.
    fn recover(
        replay: Replay<Self>,
        snapshots: &SnapshotFiles<'_>,
    ) -> Result<Recovered<Self>, WalError> {
        let snapshot = snapshots.newest()?;
        let Replay {
            mut entries,
            mut hard_state,
            marker,
        } = replay;
        let (snap_index, snap_term) = snapshot.as_ref().map_or((0, 0), |s| (s.index, s.term));
        let marker_index = marker.map_or(0, |m| m.0);
        if marker_index > snap_index {
            return Err(WalError::Corrupt(format!(
                "log refers to a snapshot at {marker_index} but the newest snapshot file is at {snap_index}"
            )));
        }
        if snap_index > marker_index {
            // The snapshot file became durable but a crash came before its marker did.
            // Raft's rule for installing a snapshot: keep the entries after it only if the
            // log agrees with it at its index.
            let agrees = entries
                .iter()
                .any(|e| e.index == snap_index && e.term == snap_term);
            if !agrees {
                entries.clear();
            }
        }
        entries.retain(|e| e.index > snap_index);
        if let Some(first) = entries.first() {
            if first.index != snap_index + 1 {
                return Err(WalError::Corrupt(format!(
                    "log starts at {} but the snapshot ends at {snap_index}",
                    first.index
                )));
            }
        }
        // Entries (or a snapshot) of a newer term can outlive the hard state written after
        // them in the same batch. No vote in that term was sent (votes go out only after a
        // sync), so adopting the term without a vote is safe.
        let newest = entries.last().map_or(snap_term, |e| e.term).max(snap_term);
        if newest > hard_state.term {
            hard_state.term = newest;
            hard_state.vote = None;
        }
        Ok(Recovered {
            hard_state,
            snapshot,
            entries,
        })
    }
}

/// The Raft core as the runtime drives it, and the ticks it fast-forwards at start-up.
pub(crate) struct RaftCore(RawNode, u32);

impl Core for RaftCore {
    type Log = RaftFormat;
    type Message = coordbench_raft::Message;
    type Config = coordbench_raft::Config;
    type Rest = coordbench_raft::Ready;

    const READS_VIA_LEADER: bool = true;

    fn configure(config: &NodeConfig, seed: u64) -> Result<Self::Config, StartError> {
        let raft_config = config.raft_config(seed);
        raft_config
            .validate()
            .map_err(|e| StartError::Config(e.to_string()))?;
        if config.election_ticks_max == 0 {
            return Err(StartError::Config("tick interval must be positive".into()));
        }
        Ok(raft_config)
    }

    fn new(config: Self::Config, state: Recovered<RaftFormat>) -> Result<Self, StartError> {
        let state = PersistedState {
            hard_state: state.hard_state,
            snapshot: state.snapshot.map(|s| coordbench_raft::Snapshot {
                index: s.index,
                term: s.term,
                data: s.data,
            }),
            entries: state.entries,
        };
        // As etcd does for a cluster of one member (fresh or restarted): no peer can lead,
        // so the election timeout's fixed part is skipped and only its random part is
        // waited out. A larger cluster waits the whole timeout (etcd's advance there needs
        // its peers' connections reported first; ours are not).
        let boot_ticks = match config.peers.len() {
            1 => config.election_ticks_min.saturating_sub(1),
            _ => 0,
        };
        Ok(Self(RawNode::new(config, state)?, boot_ticks))
    }

    fn tick(&mut self) {
        self.0.tick();
    }

    fn boot_ticks(&self) -> u32 {
        self.1
    }

    fn step(&mut self, payload: Payload) -> Result<(), String> {
        match payload {
            Payload::Raft(m) => self.0.step(m).map_err(|e| e.to_string()),
            _ => Err("not a Raft message".into()),
        }
    }

    fn wrap(m: Self::Message) -> (NodeId, Payload) {
        (m.to, Payload::Raft(m))
    }

    fn snapshot_data(m: &mut Self::Message) -> Option<&mut Bytes> {
        match &mut m.body {
            coordbench_raft::MessageBody::InstallSnapshot { snapshot } => Some(&mut snapshot.data),
            _ => None,
        }
    }

    fn status(&self) -> CoreStatus {
        let st = self.0.status();
        CoreStatus {
            role: match st.role {
                Role::Leader => NodeRole::Leader,
                Role::Candidate | Role::PreCandidate => NodeRole::Candidate,
                Role::Follower => NodeRole::Follower,
            },
            leader: st.leader,
            term: st.term,
            commit: st.commit,
        }
    }

    fn propose(&mut self, command: Vec<u8>) -> Result<Position, Refused> {
        let term = self.0.status().term;
        match self.0.propose(command) {
            Ok(index) => Ok((index, term)),
            Err(RaftError::NotLeader { leader_hint }) => {
                Err(Refused::NotLeader { hint: leader_hint })
            }
            Err(RaftError::TransferInProgress) => Err(Refused::Retry),
            Err(e) => Err(Refused::Other(e.to_string())),
        }
    }

    fn read(&mut self, ctx: u64) -> Result<(), Option<NodeId>> {
        self.0.read_index(ctx).map_err(|e| match e {
            RaftError::NotLeader { leader_hint } => leader_hint,
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
                index: s.index,
                term: s.term,
                data: s.data,
            }),
            truncate_after: None,
            entries: std::mem::take(&mut rd.entries),
            hard_state: rd.hard_state.take(),
            persisted_messages: std::mem::take(&mut rd.persisted_messages),
            committed: std::mem::take(&mut rd.committed_entries),
            read_states: read_states.into_iter().map(|r| (r.ctx, r.index)).collect(),
            dropped_reads: std::mem::take(&mut rd.dropped_reads),
            rest: rd,
        }
    }

    fn advance(&mut self, rest: coordbench_raft::Ready) {
        self.0.advance(rest);
    }

    fn applied(&mut self, index: u64) {
        self.0.applied_to(index);
    }

    fn followers_need_log_through(&self, index: u64) -> bool {
        self.0.followers_need_log_through(index)
    }

    fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<Snapshot, CompactFail> {
        // One buffer for the core (to catch followers up) and the snapshot file.
        let data = Bytes::from(data);
        match self.0.compact(index, data.clone()) {
            Ok(()) => {}
            Err(RaftError::SnapshotInstallPending) => return Err(CompactFail::Pending),
            Err(e) => return Err(CompactFail::Refused(e.to_string())),
        }
        let term = self
            .0
            .term_at(index)
            .ok_or_else(|| CompactFail::Fatal(format!("no term at compacted index {index}")))?;
        Ok(Snapshot { index, term, data })
    }

    fn snapshot_stored(&mut self, stored: Snapshot) {
        self.0
            .replace_snapshot_data(stored.index, stored.term, stored.data);
    }
}

/// Starts Raft members.
pub struct RaftNode;

impl RaftNode {
    /// Starts member `config.id` on real files under `config.data_dir` and TCP on
    /// `config.peers[id]`. `state_machine` must be empty: it is restored from the latest
    /// snapshot and the committed log after it is applied again.
    pub async fn start<S: StateMachine>(
        config: NodeConfig,
        state_machine: S,
    ) -> Result<(RaftHandle<S>, NodeTask), StartError> {
        node::start::<RaftCore, S>(config, state_machine).await
    }

    /// Starts a member on any [`Disk`] and [`Transport`] (in-memory disks and in-process
    /// networks in tests). `inbox` receives the envelopes addressed to it.
    pub async fn start_with<S: StateMachine, T: Transport>(
        config: NodeConfig,
        state_machine: S,
        disk: Arc<dyn Disk>,
        transport: T,
        inbox: mpsc::Receiver<Envelope>,
    ) -> Result<(RaftHandle<S>, NodeTask), StartError> {
        node::start_with::<RaftCore, S, T>(config, state_machine, disk, transport, inbox).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(peers: Vec<NodeId>) -> RaftCore {
        let mut config = coordbench_raft::Config::new(1, peers);
        config.election_ticks_min = 100;
        config.election_ticks_max = 200;
        RaftCore::new(config, Recovered::default()).expect("a valid configuration")
    }

    #[test]
    fn only_a_cluster_of_one_fast_forwards_its_first_election() {
        assert_eq!(core(vec![1]).boot_ticks(), 99);
        assert_eq!(core(vec![1, 2, 3]).boot_ticks(), 0);
    }
}
