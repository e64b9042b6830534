//! Wire and storage types: proposals, hard state, snapshots, votes and the
//! messages nodes exchange. All derive serde so a runtime can frame them.

use serde::{Deserialize, Serialize};

use crate::zxid::Zxid;

/// Identifier of a node in the ensemble.
pub type NodeId = u64;

/// One entry of the replicated history: an opaque command and its zxid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub zxid: Zxid,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// A state-machine snapshot covering every proposal up to `zxid`. `data` is
/// opaque to the core.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub zxid: Zxid,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// State that must be durable before the node sends `persisted_messages`.
///
/// The votes of leader election need no durability (safety rests on the
/// epochs: a node that acknowledged epoch `e` never helps a leader of an epoch
/// `<= e`), but the election round is kept so a restarted node does not reuse
/// a round it already voted in, and the leader can tell a new attempt to
/// follow it from a stale one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardState {
    /// The newest epoch this node acknowledged (NEWEPOCH, ZooKeeper's
    /// `acceptedEpoch`). It never helps establish an epoch at or below it.
    pub accepted_epoch: u32,
    /// The epoch of the last leader whose history this node adopted
    /// (NEWLEADER, ZooKeeper's `currentEpoch`). Orders votes.
    pub current_epoch: u32,
    /// Every stored proposal with a zxid `<= commit` is committed. Written
    /// lazily (a lower value after a crash only delays applying), but never
    /// before the history it refers to.
    pub commit: Zxid,
    /// The last election round this node took part in.
    pub round: u64,
}

/// A vote of fast leader election: the proposed leader and the freshness of
/// its history. Votes are totally ordered by (epoch, zxid, leader), the field
/// order, so the derived `Ord` is the election's order.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Vote {
    /// The proposed leader's current epoch.
    pub epoch: u32,
    /// The proposed leader's last zxid.
    pub zxid: Zxid,
    pub leader: NodeId,
}

/// The role a node plays (ZooKeeper's server states).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    /// Electing a leader.
    Looking,
    Following,
    Leading,
}

/// How far a leader or follower got with its current leader's epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// Looking for a leader (fast leader election).
    Election,
    /// Agreeing on the new epoch (FOLLOWERINFO, NEWEPOCH, ACKEPOCH).
    Discovery,
    /// Bringing followers to the leader's history (DIFF/TRUNC/SNAP,
    /// NEWLEADER, ACK, UPTODATE).
    Synchronization,
    /// Established: the leader proposes and commits, followers serve.
    Broadcast,
}

/// How a leader brings a follower's history to its own. In every case the
/// follower's history afterwards is the leader's up to NEWLEADER's
/// `last_zxid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SyncKind {
    /// The follower's history is a prefix of the leader's ending at `from`;
    /// the proposals that follow it are attached.
    Diff { from: Zxid },
    /// The follower holds proposals the leader does not have: discard every
    /// proposal after `to` (which both hold), then append the attached ones.
    Trunc { to: Zxid },
    /// The follower is behind the leader's compacted history: replace
    /// everything with the snapshot, then append the attached proposals.
    Snap(Snapshot),
}

/// A message between two nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub from: NodeId,
    pub to: NodeId,
    pub body: MessageBody,
}

/// Every message after election carries the epoch of the leader's session it
/// belongs to; anything from another session is ignored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageBody {
    /// Fast leader election: the sender's current vote, its election round
    /// and its state. Non-looking nodes answer looking ones with their own.
    Notification {
        vote: Vote,
        round: u64,
        state: Role,
    },
    /// Follower -> leader on starting to follow. `round` is the follower's
    /// (durable) election round: it names this attempt to follow, and the
    /// discovery and synchronization messages of the attempt echo it so that
    /// late copies from an earlier attempt are ignored.
    FollowerInfo {
        accepted_epoch: u32,
        round: u64,
    },
    /// Leader -> follower: the epoch the leader proposes to establish.
    NewEpoch {
        epoch: u32,
        round: u64,
    },
    /// Follower -> leader, once `epoch` is durably accepted. `fresh`: the
    /// follower accepted `epoch` from this leader, not earlier from another
    /// (only fresh acknowledgements count toward establishing an epoch).
    /// `current_epoch` and `last_zxid` describe its history.
    AckEpoch {
        epoch: u32,
        round: u64,
        fresh: bool,
        current_epoch: u32,
        last_zxid: Zxid,
    },
    /// Leader -> follower: synchronize to the leader's history (the DIFF,
    /// TRUNC or SNAP together with the proposals to append) and adopt the
    /// epoch. `sync_id` numbers the leader's synchronizations of this
    /// follower; `commit` is the leader's commit point.
    NewLeader {
        epoch: u32,
        round: u64,
        sync_id: u64,
        sync: SyncKind,
        proposals: Vec<Proposal>,
        last_zxid: Zxid,
        commit: Zxid,
    },
    /// Follower -> leader: the synchronized history and `current_epoch ==
    /// epoch` are durable.
    AckNewLeader {
        epoch: u32,
        round: u64,
        sync_id: u64,
        last_zxid: Zxid,
    },
    /// Leader -> follower: the epoch is established; start serving.
    UpToDate {
        epoch: u32,
        commit: Zxid,
    },
    /// PROPOSAL, batched: `proposals` follow `prev` in the leader's history.
    Propose {
        epoch: u32,
        prev: Zxid,
        proposals: Vec<Proposal>,
        commit: Zxid,
    },
    /// The follower durably holds the leader's history up to `zxid`.
    Ack {
        epoch: u32,
        zxid: Zxid,
    },
    /// A proposal batch did not follow the follower's history, which ends at
    /// `last_zxid`: resend from there. Promises nothing about durability.
    Nack {
        epoch: u32,
        last_zxid: Zxid,
    },
    /// Everything up to `zxid` is committed.
    Commit {
        epoch: u32,
        zxid: Zxid,
    },
    /// Leader liveness; `read_seq` names the newest pending sync read
    /// (0 = none) so the answer confirms leadership for it.
    Ping {
        epoch: u32,
        commit: Zxid,
        read_seq: u64,
    },
    PingAck {
        epoch: u32,
        read_seq: u64,
    },
    /// ZooKeeper's sync(), forwarded by a follower.
    SyncRequest {
        epoch: u32,
        ctx: u64,
    },
    /// The follower has caught up with everything committed before the sync
    /// once it has applied `zxid`.
    SyncResponse {
        epoch: u32,
        ctx: u64,
        zxid: Zxid,
    },
}

impl MessageBody {
    /// Short name for logs and traces.
    pub fn name(&self) -> &'static str {
        match self {
            MessageBody::Notification { .. } => "Notification",
            MessageBody::FollowerInfo { .. } => "FollowerInfo",
            MessageBody::NewEpoch { .. } => "NewEpoch",
            MessageBody::AckEpoch { .. } => "AckEpoch",
            MessageBody::NewLeader { .. } => "NewLeader",
            MessageBody::AckNewLeader { .. } => "AckNewLeader",
            MessageBody::UpToDate { .. } => "UpToDate",
            MessageBody::Propose { .. } => "Propose",
            MessageBody::Ack { .. } => "Ack",
            MessageBody::Nack { .. } => "Nack",
            MessageBody::Commit { .. } => "Commit",
            MessageBody::Ping { .. } => "Ping",
            MessageBody::PingAck { .. } => "PingAck",
            MessageBody::SyncRequest { .. } => "SyncRequest",
            MessageBody::SyncResponse { .. } => "SyncResponse",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn votes_order_by_epoch_then_zxid_then_id() {
        let v = |epoch, zxid, leader| Vote {
            epoch,
            zxid: Zxid(zxid),
            leader,
        };
        assert!(v(2, 0, 1) > v(1, 99, 9));
        assert!(v(1, 5, 1) > v(1, 4, 9));
        assert!(v(1, 5, 2) > v(1, 5, 1));
    }
}
