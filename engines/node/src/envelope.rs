//! What nodes send each other: the core's Raft (or Zab) messages plus the runtime's own requests
//! (a follower forwarding a proposal, a ReadIndex request or a leader query to the leader, and
//! the answers).
//! Encoded with postcard; the transport frames it.

use coordbench_raft::{Message, NodeId};
use serde::{Deserialize, Serialize};

/// One message between two nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    pub from: NodeId,
    pub to: NodeId,
    pub payload: Payload,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Payload {
    /// A message of the consensus core.
    Raft(Message),
    /// A message of the Zab core (a Zab member's proposal forwarding reuses `Forward*`,
    /// with the zxid as `index` and the epoch as `term`; its reads use the core's sync).
    Zab(coordbench_zab::Message),
    /// A follower asks the leader to propose `command`.
    Forward {
        request_id: u64,
        #[serde(with = "serde_bytes")]
        command: Vec<u8>,
    },
    /// The leader appended the command at (`index`, `term`): the follower answers its
    /// client when it applies that index, if the entry there has that term.
    ForwardAccepted {
        request_id: u64,
        index: u64,
        term: u64,
    },
    /// The leader did not append the command (so it is safe to retry).
    ForwardRejected {
        request_id: u64,
        reason: Refusal,
    },
    /// A follower asks the leader for a read index (ReadIndex on its behalf).
    ReadIndexRequest {
        request_id: u64,
    },
    /// Leadership was confirmed: reads are linearizable once `index` is applied.
    ReadIndexReply {
        request_id: u64,
        index: u64,
    },
    ReadIndexRejected {
        request_id: u64,
        reason: Refusal,
    },
    /// Never sent: the TCP transport's note that the connection from `from` closed (its
    /// process died or the link broke), so a core may act before its timeouts do.
    Disconnected,
    /// A follower asks the leader to answer a query from the leader's own state
    /// ([`crate::StateMachine::leader_query`]) after a read barrier.
    LeaderQuery {
        request_id: u64,
        #[serde(with = "serde_bytes")]
        query: Vec<u8>,
    },
    LeaderAnswer {
        request_id: u64,
        #[serde(with = "serde_bytes")]
        answer: Vec<u8>,
    },
    LeaderQueryRejected {
        request_id: u64,
        reason: Refusal,
    },
}

/// Why a leader refused a forwarded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    NotLeader {
        hint: Option<NodeId>,
    },
    /// Leadership is being handed over, or the read was dropped by a leadership change.
    Busy,
    /// Too many requests in flight at the leader.
    Overloaded,
}

impl Envelope {
    pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        postcard::to_stdvec(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, postcard::Error> {
        postcard::from_bytes(bytes)
    }

    /// Short description for traces.
    pub fn kind(&self) -> &'static str {
        match &self.payload {
            Payload::Raft(m) => m.body.name(),
            Payload::Zab(_) => "Zab",
            Payload::Forward { .. } => "Forward",
            Payload::ForwardAccepted { .. } => "ForwardAccepted",
            Payload::ForwardRejected { .. } => "ForwardRejected",
            Payload::ReadIndexRequest { .. } => "ReadIndexRequest",
            Payload::ReadIndexReply { .. } => "ReadIndexReply",
            Payload::ReadIndexRejected { .. } => "ReadIndexRejected",
            Payload::Disconnected => "Disconnected",
            Payload::LeaderQuery { .. } => "LeaderQuery",
            Payload::LeaderAnswer { .. } => "LeaderAnswer",
            Payload::LeaderQueryRejected { .. } => "LeaderQueryRejected",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_raft::MessageBody;

    #[test]
    fn round_trip_and_garbage() -> Result<(), postcard::Error> {
        let envs = [
            Envelope {
                from: 1,
                to: 2,
                payload: Payload::Raft(Message {
                    from: 1,
                    to: 2,
                    term: 3,
                    body: MessageBody::Heartbeat {
                        commit: 4,
                        read_seq: 5,
                    },
                }),
            },
            Envelope {
                from: 2,
                to: 1,
                payload: Payload::Forward {
                    request_id: 9,
                    command: b"cmd".to_vec(),
                },
            },
            Envelope {
                from: 1,
                to: 2,
                payload: Payload::ForwardRejected {
                    request_id: 9,
                    reason: Refusal::NotLeader { hint: Some(3) },
                },
            },
            Envelope {
                from: 2,
                to: 1,
                payload: Payload::LeaderQuery {
                    request_id: 10,
                    query: b"renew 7".to_vec(),
                },
            },
            Envelope {
                from: 1,
                to: 2,
                payload: Payload::LeaderAnswer {
                    request_id: 10,
                    answer: b"ttl 5".to_vec(),
                },
            },
        ];
        for e in envs {
            assert_eq!(Envelope::decode(&e.encode()?)?, e);
        }
        assert!(Envelope::decode(&[0xff, 0xff, 0xff]).is_err());
        Ok(())
    }
}
