//! Node configuration and its validation.

use crate::error::ConfigError;
use crate::message::NodeId;

/// Static configuration of one Zab node. The ensemble is fixed for the
/// lifetime of the cluster (no reconfiguration). Time is counted in ticks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// This node's id; must appear in `peers`.
    pub id: NodeId,
    /// Every voting member of the ensemble, including this node.
    pub peers: Vec<NodeId>,
    /// An established leader pings its followers every this many ticks; the
    /// same interval paces retransmissions during discovery and sync.
    pub ping_ticks: u32,
    /// ZooKeeper's syncLimit: a follower that hears nothing from its leader
    /// for this many ticks goes back to election, and a leader that did not
    /// hear from a quorum within this many ticks steps down.
    pub sync_limit: u32,
    /// ZooKeeper's initLimit: discovery and synchronization must complete
    /// within this many ticks of following / leading, else back to election.
    pub init_limit: u32,
    /// Fast leader election's finalize wait: once a quorum agrees on a vote,
    /// decide after this many ticks without a better vote.
    pub finalize_ticks: u32,
    /// While looking, resend the current vote every this many ticks (plus up
    /// to half again as much jitter).
    pub notify_ticks: u32,
    /// Maximum number of proposal batches in flight to one follower.
    pub max_inflight_msgs: usize,
    /// Maximum number of proposals carried by one PROPOSAL message.
    pub max_proposals_per_msg: usize,
    /// Seed of the deterministic generator that jitters notification resends.
    pub seed: u64,
}

impl Config {
    /// A configuration with commonly used defaults: ping every 2 ticks,
    /// syncLimit 10, initLimit 20, finalize wait 2, notification resend 4.
    pub fn new(id: NodeId, peers: Vec<NodeId>) -> Self {
        Self {
            id,
            peers,
            ping_ticks: 2,
            sync_limit: 10,
            init_limit: 20,
            finalize_ticks: 2,
            notify_ticks: 4,
            max_inflight_msgs: 64,
            max_proposals_per_msg: 64,
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
        if self.ping_ticks == 0 {
            return Err(ConfigError::ZeroPing);
        }
        if self.notify_ticks == 0 {
            return Err(ConfigError::ZeroNotify);
        }
        // Followers must see several pings per syncLimit, otherwise a single
        // lost ping ends the session.
        if self.sync_limit <= self.ping_ticks {
            return Err(ConfigError::SyncLimitNotAbovePing {
                sync_limit: self.sync_limit,
                ping: self.ping_ticks,
            });
        }
        if self.init_limit < self.sync_limit {
            return Err(ConfigError::InitBelowSync {
                init_limit: self.init_limit,
                sync_limit: self.sync_limit,
            });
        }
        if self.max_inflight_msgs == 0 {
            return Err(ConfigError::ZeroInflight);
        }
        if self.max_proposals_per_msg == 0 {
            return Err(ConfigError::ZeroProposalsPerMsg);
        }
        Ok(())
    }

    /// Ticks after which an unanswered discovery/sync message or an
    /// unacknowledged proposal batch is sent again.
    pub(crate) fn resend_ticks(&self) -> u32 {
        self.ping_ticks.saturating_mul(2)
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
        check(&|c| c.ping_ticks = 0, ConfigError::ZeroPing);
        check(&|c| c.notify_ticks = 0, ConfigError::ZeroNotify);
        check(
            &|c| c.sync_limit = 2,
            ConfigError::SyncLimitNotAbovePing {
                sync_limit: 2,
                ping: 2,
            },
        );
        check(
            &|c| c.init_limit = 5,
            ConfigError::InitBelowSync {
                init_limit: 5,
                sync_limit: 10,
            },
        );
        check(&|c| c.max_inflight_msgs = 0, ConfigError::ZeroInflight);
        check(
            &|c| c.max_proposals_per_msg = 0,
            ConfigError::ZeroProposalsPerMsg,
        );
    }
}
