//! [`NodeConfig`]: everything a Raft or Zab member needs to start, with defaults close to etcd's.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use coordbench_raft::NodeId;

use crate::disk::DiskKind;
use crate::tcp::TcpOptions;
use crate::wal::WalOptions;

/// Configuration of one member.
///
/// Timing defaults follow etcd's (100 ms heartbeat, 1 s election timeout) expressed in
/// ticks of 10 ms: heartbeat every 10 ticks, election timeout drawn from [100, 200) ticks.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub id: NodeId,
    /// Every voter of the cluster (this node included) and the address it listens on.
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// Where the WAL and snapshots live.
    pub data_dir: PathBuf,
    /// How the WAL makes writes durable.
    pub disk: DiskKind,
    /// Length of one logical tick (default 10 ms).
    pub tick_interval: Duration,
    /// Leader heartbeat period in ticks (default 10 = 100 ms).
    pub heartbeat_ticks: u32,
    /// Randomized election timeout range in ticks, [min, max) (default 100..200 = 1–2 s).
    pub election_ticks_min: u32,
    pub election_ticks_max: u32,
    /// Applied entries between two snapshots / log compactions (default 10 000).
    pub snapshot_every: u64,
    /// AppendEntries messages in flight per follower (default 256).
    pub max_inflight: usize,
    /// Entries per AppendEntries message (default 256).
    pub max_entries_per_msg: usize,
    /// Deadline of one propose or read barrier (default 5 s).
    pub request_timeout: Duration,
    /// Proposals and reads waiting at this node at most; beyond, requests are refused with
    /// `Rejected("overloaded")` (default 65 536).
    pub max_pending: usize,
    pub pre_vote: bool,
    pub check_quorum: bool,
    pub wal: WalOptions,
    pub tcp: TcpOptions,
}

impl NodeConfig {
    pub fn new(
        id: NodeId,
        peers: BTreeMap<NodeId, SocketAddr>,
        data_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            id,
            peers,
            data_dir: data_dir.into(),
            disk: DiskKind::Disk,
            tick_interval: Duration::from_millis(10),
            heartbeat_ticks: 10,
            election_ticks_min: 100,
            election_ticks_max: 200,
            snapshot_every: 10_000,
            max_inflight: 256,
            max_entries_per_msg: 256,
            request_timeout: Duration::from_secs(5),
            max_pending: 65_536,
            pre_vote: true,
            check_quorum: true,
            wal: WalOptions::default(),
            tcp: TcpOptions::default(),
        }
    }

    /// The longest election timeout (how long a cluster may go without a leader after
    /// losing one, plus one voting round).
    pub fn election_timeout(&self) -> Duration {
        self.tick_interval * self.election_ticks_max
    }

    /// The Zab core's configuration, from the same timing: pings every heartbeat, a
    /// follower or leader gives up on its peer after the shortest election timeout
    /// (syncLimit), discovery and sync must finish within the longest (initLimit).
    pub fn zab_config(&self, seed: u64) -> coordbench_zab::Config {
        let mut c = coordbench_zab::Config::new(self.id, self.peers.keys().copied().collect());
        c.ping_ticks = self.heartbeat_ticks.max(1);
        c.sync_limit = self.election_ticks_min.max(c.ping_ticks + 1);
        c.init_limit = self.election_ticks_max.max(c.sync_limit);
        // Fast leader election settles after a short quiet period (ZooKeeper: 200 ms).
        c.finalize_ticks = (self.heartbeat_ticks / 2).max(1);
        c.notify_ticks = self.heartbeat_ticks.max(1);
        c.max_inflight_msgs = self.max_inflight.max(1);
        c.max_proposals_per_msg = self.max_entries_per_msg.max(1);
        c.seed = seed;
        c
    }

    /// The core's configuration; `seed` varies the election timeouts between incarnations.
    pub fn raft_config(&self, seed: u64) -> coordbench_raft::Config {
        let mut c = coordbench_raft::Config::new(self.id, self.peers.keys().copied().collect());
        c.heartbeat_ticks = self.heartbeat_ticks;
        c.election_ticks_min = self.election_ticks_min;
        c.election_ticks_max = self.election_ticks_max;
        c.pre_vote = self.pre_vote;
        c.check_quorum = self.check_quorum;
        c.max_inflight_msgs = self.max_inflight;
        c.max_entries_per_msg = self.max_entries_per_msg;
        c.seed = seed;
        c
    }
}
