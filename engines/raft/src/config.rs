//! Node configuration and its validation.

use crate::error::ConfigError;
use crate::message::NodeId;

/// Static configuration of one Raft node. The voter set is fixed for the
/// lifetime of the cluster (no membership changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// This node's id; must appear in `peers`.
    pub id: NodeId,
    /// Every voter of the cluster, including this node.
    pub peers: Vec<NodeId>,
    /// A leader sends heartbeats every this many ticks.
    pub heartbeat_ticks: u32,
    /// Lower bound (inclusive) of the randomized election timeout, in ticks.
    /// Also the length of the leader-lease / check-quorum window.
    pub election_ticks_min: u32,
    /// Upper bound (exclusive) of the randomized election timeout, in ticks.
    pub election_ticks_max: u32,
    /// Run a PreVote round before incrementing the term, so a node that was
    /// partitioned away cannot disrupt a healthy leader when it returns.
    pub pre_vote: bool,
    /// A leader that has not heard from a quorum within an election timeout
    /// steps down, and followers that heard from a leader recently refuse
    /// (pre)votes.
    pub check_quorum: bool,
    /// Maximum number of AppendEntries messages in flight to one follower
    /// while it is in the pipelined (replicate) state.
    pub max_inflight_msgs: usize,
    /// Maximum number of entries carried by one AppendEntries message.
    pub max_entries_per_msg: usize,
    /// Seed of the deterministic generator for election timeouts. Give every
    /// node (and every restart) a different seed to avoid split votes.
    pub seed: u64,
}

impl Config {
    /// A configuration with commonly used defaults: heartbeat every 2 ticks,
    /// election timeout in [10, 20) ticks, PreVote and CheckQuorum on.
    pub fn new(id: NodeId, peers: Vec<NodeId>) -> Self {
        Self {
            id,
            peers,
            heartbeat_ticks: 2,
            election_ticks_min: 10,
            election_ticks_max: 20,
            pre_vote: true,
            check_quorum: true,
            max_inflight_msgs: 64,
            max_entries_per_msg: 64,
            seed: id,
        }
    }

    /// Checks the configuration; the core refuses to start on an invalid one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.peers.is_empty() {
            return Err(ConfigError::NoPeers);
        }
        if !self.peers.contains(&self.id) {
            return Err(ConfigError::SelfNotInPeers(self.id));
        }
        let mut sorted = self.peers.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(ConfigError::DuplicatePeer(w[0]));
        }
        if self.heartbeat_ticks == 0 {
            return Err(ConfigError::ZeroHeartbeat);
        }
        // Followers must hear several heartbeats per election timeout,
        // otherwise a single lost heartbeat triggers an election.
        if self.election_ticks_min <= self.heartbeat_ticks {
            return Err(ConfigError::ElectionNotAboveHeartbeat {
                election_min: self.election_ticks_min,
                heartbeat: self.heartbeat_ticks,
            });
        }
        if self.election_ticks_max <= self.election_ticks_min {
            return Err(ConfigError::EmptyElectionRange {
                min: self.election_ticks_min,
                max: self.election_ticks_max,
            });
        }
        if self.max_inflight_msgs == 0 {
            return Err(ConfigError::ZeroInflight);
        }
        if self.max_entries_per_msg == 0 {
            return Err(ConfigError::ZeroEntriesPerMsg);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        assert_eq!(Config::new(1, vec![1, 2, 3]).validate(), Ok(()));
    }

    #[test]
    fn rejects_bad_configs() {
        let base = Config::new(1, vec![1, 2, 3]);
        let check = |f: &dyn Fn(&mut Config), want: ConfigError| {
            let mut c = base.clone();
            f(&mut c);
            assert_eq!(c.validate(), Err(want));
        };
        check(&|c| c.peers.clear(), ConfigError::NoPeers);
        check(&|c| c.id = 9, ConfigError::SelfNotInPeers(9));
        check(&|c| c.peers = vec![1, 2, 2], ConfigError::DuplicatePeer(2));
        check(&|c| c.heartbeat_ticks = 0, ConfigError::ZeroHeartbeat);
        check(
            &|c| c.election_ticks_min = 2,
            ConfigError::ElectionNotAboveHeartbeat {
                election_min: 2,
                heartbeat: 2,
            },
        );
        check(
            &|c| c.election_ticks_max = 10,
            ConfigError::EmptyElectionRange { min: 10, max: 10 },
        );
        check(&|c| c.max_inflight_msgs = 0, ConfigError::ZeroInflight);
        check(
            &|c| c.max_entries_per_msg = 0,
            ConfigError::ZeroEntriesPerMsg,
        );
    }
}
