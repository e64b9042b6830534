//! Leader queries ([`crate::StateMachine::leader_query`]): questions only the leader's own
//! state answers, outside the log (etcd-api's lease keep-alives). A query joins the reads
//! of the leader's next ReadIndex round; once that round confirmed the leadership and the
//! leader applied the read index, the state machine answers it in the term that round
//! confirmed. A follower forwards its queries to the leader (`Payload::LeaderQuery`) and
//! hands the answer back; a query whose leader went away fails with `NoLeader`, which the
//! handle retries. As a member starts leading, the runtime asks an empty query of its own,
//! answered as soon as the new leader may answer any, so that the state machine can take
//! up its leader duties at once (etcd-api: promote its lease clock).

use std::collections::HashMap;

use coordbench_raft::NodeId;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{refusal_error, remove_where, ReadWaiter, Runtime};
use crate::core::Core;
use crate::envelope::{Payload, Refusal};
use crate::seam::{NodeError, NodeRole, StateMachine};

pub(crate) type QueryReply = oneshot::Sender<Result<Vec<u8>, NodeError>>;

/// Who waits for a query's answer.
pub(super) enum Origin {
    Local(QueryReply),
    Remote {
        from: NodeId,
        request_id: u64,
    },
    /// The runtime's own query of a new term: nobody waits.
    Leading,
}

/// A query on the leader, waiting for its read round.
pub(super) struct Query {
    pub query: Vec<u8>,
    pub origin: Origin,
}

/// A query sent to the leader, waiting for its answer.
pub(super) struct RemoteQuery {
    reply: QueryReply,
    leader: NodeId,
    deadline: Instant,
}

/// Queries on the leader whose read round is confirmed but whose index is not applied yet,
/// with the index and the term the round confirmed.
pub(super) type Parked = Vec<(u64, u64, Query)>;

pub(super) type RemoteQueries = HashMap<u64, RemoteQuery>;

impl<C: Core, S: StateMachine> Runtime<C, S> {
    /// Asks the empty query once per term, as this member starts leading.
    pub(super) fn on_leading(&mut self, role: NodeRole, term: u64) {
        if role != NodeRole::Leader || self.led_term == Some(term) {
            return;
        }
        self.led_term = Some(term);
        let query = Query {
            query: Vec::new(),
            origin: Origin::Leading,
        };
        self.read_batch.push(ReadWaiter::Query(query));
    }

    /// A local service's query: into the next read round on the leader, else to the leader.
    pub(super) fn on_query_request(&mut self, query: Vec<u8>, reply: QueryReply) {
        let st = self.core.status();
        if st.role == NodeRole::Leader {
            let origin = Origin::Local(reply);
            self.read_batch
                .push(ReadWaiter::Query(Query { query, origin }));
            return;
        }
        let Some(leader) = st.leader.filter(|&l| l != self.id) else {
            let _ = reply.send(Err(NodeError::NoLeader));
            return;
        };
        let request_id = self.next_id();
        if self.send(leader, Payload::LeaderQuery { request_id, query }) {
            let deadline = Instant::now() + self.cfg.request_timeout;
            let waiting = RemoteQuery {
                reply,
                leader,
                deadline,
            };
            self.remote_queries.insert(request_id, waiting);
        } else {
            let _ = reply.send(Err(NodeError::NoLeader));
        }
    }

    /// A follower's query (on the leader), or the leader's answer or refusal (on the
    /// follower).
    pub(super) fn on_query_payload(&mut self, from: NodeId, payload: Payload) {
        match payload {
            Payload::LeaderQuery { request_id, query } => {
                let origin = Origin::Remote { from, request_id };
                let st = self.core.status();
                if st.role == NodeRole::Leader {
                    self.read_batch
                        .push(ReadWaiter::Query(Query { query, origin }));
                } else {
                    let reason = Refusal::NotLeader { hint: st.leader };
                    self.refuse_query(Query { query, origin }, reason);
                }
            }
            Payload::LeaderAnswer { request_id, answer } => {
                if let Some(q) = self.remote_queries.remove(&request_id) {
                    let _ = q.reply.send(Ok(answer));
                }
            }
            Payload::LeaderQueryRejected { request_id, reason } => {
                if let Some(q) = self.remote_queries.remove(&request_id) {
                    let _ = q.reply.send(Err(refusal_error(reason)));
                }
            }
            // on_envelope hands over only the three above.
            _ => {}
        }
    }

    /// The read round of `query` confirmed the leadership at `index`.
    pub(super) fn on_query_confirmed(&mut self, index: u64, query: Query) {
        let st = self.core.status();
        if st.role != NodeRole::Leader {
            self.refuse_query(query, Refusal::Busy);
        } else if self.applied < index {
            self.parked_queries.push((index, st.term, query));
        } else {
            self.answer_query(st.term, query);
        }
    }

    /// Answers the parked queries whose index is applied now, if still leading in the term
    /// their round confirmed.
    pub(super) fn serve_parked_queries(&mut self) {
        if self.parked_queries.is_empty() {
            return;
        }
        let applied = self.applied;
        let (ready, waiting): (Parked, Parked) = std::mem::take(&mut self.parked_queries)
            .into_iter()
            .partition(|(index, _, _)| *index <= applied);
        self.parked_queries = waiting;
        let st = self.core.status();
        for (_, term, query) in ready {
            if st.role == NodeRole::Leader && st.term == term {
                self.answer_query(term, query);
            } else {
                self.refuse_query(query, Refusal::Busy);
            }
        }
    }

    fn answer_query(&self, term: u64, query: Query) {
        let answer = self
            .sm
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .leader_query(term, &query.query);
        match query.origin {
            Origin::Local(reply) => {
                let _ = reply.send(Ok(answer));
            }
            Origin::Remote { from, request_id } => {
                self.send(from, Payload::LeaderAnswer { request_id, answer });
            }
            Origin::Leading => {}
        }
    }

    pub(super) fn refuse_query(&self, query: Query, reason: Refusal) {
        match query.origin {
            Origin::Local(reply) => {
                let _ = reply.send(Err(refusal_error(reason)));
            }
            Origin::Remote { from, request_id } => {
                self.send(from, Payload::LeaderQueryRejected { request_id, reason });
            }
            Origin::Leading => {}
        }
    }

    /// Fails the queries whose callers gave up or whose answer never came by `now`.
    pub(super) fn sweep_remote_queries(&mut self, now: Instant) {
        let expired = remove_where(&mut self.remote_queries, |q| {
            q.deadline <= now || q.reply.is_closed()
        });
        for q in expired {
            let _ = q.reply.send(Err(NodeError::Timeout));
        }
    }

    /// Fails the queries sent to a member that is no longer the leader (retried).
    pub(super) fn drop_queries_to_old_leader(&mut self, leader: Option<NodeId>) {
        for q in remove_where(&mut self.remote_queries, |q| Some(q.leader) != leader) {
            let _ = q.reply.send(Err(NodeError::NoLeader));
        }
    }
}
