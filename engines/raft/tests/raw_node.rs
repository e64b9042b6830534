//! Hand-driven scenarios: one node or a small cluster is stepped message by
//! message and the test asserts on exactly what each `Ready` contains.

use std::collections::{BTreeMap, VecDeque};

use coordbench_raft::{
    Config, Entry, EntryKind, Error, HardState, Message, MessageBody, PersistedState, RawNode,
    ReadState, RejectHint, Role, Snapshot, SoftState,
};

// ---- helpers -------------------------------------------------------------------

fn config(id: u64, voters: u64) -> Config {
    let mut c = Config::new(id, (1..=voters).collect());
    c.heartbeat_ticks = 1;
    c.election_ticks_min = 5;
    c.election_ticks_max = 10;
    c
}

fn node(cfg: Config) -> RawNode {
    RawNode::new(cfg, PersistedState::default()).expect("valid config")
}

fn normal(index: u64, term: u64, data: &[u8]) -> Entry {
    Entry {
        term,
        index,
        kind: EntryKind::Normal(data.to_vec()),
    }
}

/// The public contents of one Ready, after it was "persisted" and advanced.
#[derive(Debug, Default)]
struct Done {
    soft_state: Option<SoftState>,
    hard_state: Option<HardState>,
    snapshot: Option<Snapshot>,
    entries: Vec<Entry>,
    messages: Vec<Message>,
    persisted_messages: Vec<Message>,
    committed: Vec<Entry>,
    read_states: Vec<ReadState>,
    dropped_reads: Vec<u64>,
}

/// Takes a Ready, pretends to persist and apply it, advances.
fn process(n: &mut RawNode) -> Done {
    let mut rd = n.ready();
    let done = Done {
        soft_state: rd.soft_state.take(),
        hard_state: rd.hard_state.take(),
        snapshot: rd.snapshot.take(),
        entries: std::mem::take(&mut rd.entries),
        messages: std::mem::take(&mut rd.messages),
        persisted_messages: std::mem::take(&mut rd.persisted_messages),
        committed: std::mem::take(&mut rd.committed_entries),
        read_states: std::mem::take(&mut rd.read_states),
        dropped_reads: std::mem::take(&mut rd.dropped_reads),
    };
    n.advance(rd);
    done
}

fn msg(from: u64, to: u64, term: u64, body: MessageBody) -> Message {
    Message {
        from,
        to,
        term,
        body,
    }
}

fn tick_until_ready(n: &mut RawNode, max: u32) {
    for _ in 0..max {
        n.tick();
        if n.has_ready() {
            return;
        }
    }
    panic!("no Ready after {max} ticks");
}

/// Makes node `n` (of a cluster of `voters`) leader with votes granted by
/// node 2, and returns the term. Handles both PreVote and plain elections.
fn elect(n: &mut RawNode) -> u64 {
    let me = n.status().id;
    let voter = if me == 2 { 3 } else { 2 };
    for _ in 0..100 {
        n.tick();
        if n.status().role != Role::Follower {
            break;
        }
    }
    for _ in 0..3 {
        let done = process(n);
        let all = done.messages.into_iter().chain(done.persisted_messages);
        for m in all.filter(|m| m.to == voter) {
            let reply = match m.body {
                MessageBody::PreVote { .. } => MessageBody::PreVoteResponse { granted: true },
                MessageBody::RequestVote { .. } => MessageBody::VoteResponse { granted: true },
                _ => continue,
            };
            n.step(msg(voter, me, m.term, reply)).unwrap();
        }
        if n.status().role == Role::Leader {
            return n.status().term;
        }
    }
    panic!("node {me} did not become leader: {:?}", n.status());
}

fn appends_to(ms: &[Message], to: u64) -> Vec<(u64, u64, Vec<u64>, u64)> {
    ms.iter()
        .filter(|m| m.to == to)
        .filter_map(|m| match &m.body {
            MessageBody::AppendEntries {
                prev_index,
                prev_term,
                entries,
                commit,
            } => Some((
                *prev_index,
                *prev_term,
                entries.iter().map(|e| e.index).collect(),
                *commit,
            )),
            _ => None,
        })
        .collect()
}

/// A tiny in-memory cluster: every Ready is persisted at once, messages are
/// delivered in order, nothing is lost unless a node is isolated.
struct Cluster {
    nodes: BTreeMap<u64, RawNode>,
    queue: VecDeque<Message>,
    isolated: Vec<u64>,
    applied: BTreeMap<u64, Vec<Entry>>,
    reads: BTreeMap<u64, Vec<ReadState>>,
}

impl Cluster {
    fn new(voters: u64, tweak: impl Fn(&mut Config)) -> Self {
        let nodes = (1..=voters)
            .map(|id| {
                let mut c = config(id, voters);
                tweak(&mut c);
                (id, node(c))
            })
            .collect();
        Self {
            nodes,
            queue: VecDeque::new(),
            isolated: Vec::new(),
            applied: BTreeMap::new(),
            reads: BTreeMap::new(),
        }
    }

    fn n(&mut self, id: u64) -> &mut RawNode {
        self.nodes.get_mut(&id).unwrap()
    }

    fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut progressed = false;
            for (&id, n) in self.nodes.iter_mut() {
                if n.has_ready() {
                    progressed = true;
                    let d = process(n);
                    self.queue.extend(d.messages);
                    self.queue.extend(d.persisted_messages);
                    self.applied.entry(id).or_default().extend(d.committed);
                    self.reads.entry(id).or_default().extend(d.read_states);
                }
            }
            while let Some(m) = self.queue.pop_front() {
                progressed = true;
                if self.isolated.contains(&m.from) || self.isolated.contains(&m.to) {
                    continue;
                }
                let to = m.to;
                self.n(to).step(m).unwrap();
            }
            if !progressed {
                return;
            }
        }
        panic!("cluster did not settle");
    }

    fn tick_all(&mut self, ticks: u32) {
        for _ in 0..ticks {
            for n in self.nodes.values_mut() {
                n.tick();
            }
            self.settle();
        }
    }

    fn leader(&self) -> Option<u64> {
        let leaders: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.status().role == Role::Leader)
            .map(|(&id, _)| id)
            .collect();
        match leaders[..] {
            [l] => Some(l),
            _ => None,
        }
    }
}

// ---- elections -------------------------------------------------------------------

#[test]
fn election_timeout_sends_prevotes_without_changing_term() {
    let mut n = node(config(1, 3));
    tick_until_ready(&mut n, 20);
    let d = process(&mut n);
    assert_eq!(d.soft_state.map(|s| s.role), Some(Role::PreCandidate));
    assert_eq!(d.hard_state, None, "PreVote must not bump the term");
    let mut to: Vec<u64> = d.messages.iter().map(|m| m.to).collect();
    to.sort();
    assert_eq!(to, vec![2, 3]);
    for m in &d.messages {
        assert_eq!(m.term, 1, "PreVote carries the prospective term");
        assert_eq!(
            m.body,
            MessageBody::PreVote {
                last_index: 0,
                last_term: 0
            }
        );
    }
    assert!(d.persisted_messages.is_empty());
}

#[test]
fn request_vote_waits_for_durable_term_and_self_vote() {
    let mut c = config(1, 3);
    c.pre_vote = false;
    let mut n = node(c);
    tick_until_ready(&mut n, 20);
    let d = process(&mut n);
    assert_eq!(
        d.hard_state,
        Some(HardState {
            term: 1,
            vote: Some(1),
            commit: 0
        })
    );
    assert!(
        d.messages.is_empty(),
        "nothing may leave before the vote is durable"
    );
    assert_eq!(d.persisted_messages.len(), 2);
    assert!(d.persisted_messages.iter().all(|m| matches!(
        m.body,
        MessageBody::RequestVote {
            transfer: false,
            ..
        }
    )));
}

#[test]
fn vote_response_is_a_persisted_message() {
    let mut n = node(config(2, 3));
    let req = MessageBody::RequestVote {
        last_index: 0,
        last_term: 0,
        transfer: false,
    };
    n.step(msg(1, 2, 1, req)).unwrap();
    let d = process(&mut n);
    assert_eq!(
        d.hard_state,
        Some(HardState {
            term: 1,
            vote: Some(1),
            commit: 0
        })
    );
    assert!(d.messages.is_empty());
    assert_eq!(
        d.persisted_messages,
        vec![msg(2, 1, 1, MessageBody::VoteResponse { granted: true })]
    );
    // A second candidate in the same term is refused.
    let req = MessageBody::RequestVote {
        last_index: 5,
        last_term: 1,
        transfer: false,
    };
    n.step(msg(3, 2, 1, req)).unwrap();
    let d = process(&mut n);
    assert_eq!(
        d.persisted_messages,
        vec![msg(2, 3, 1, MessageBody::VoteResponse { granted: false })]
    );
}

#[test]
fn vote_refused_to_a_less_up_to_date_log() {
    let state = PersistedState {
        hard_state: HardState {
            term: 2,
            vote: None,
            commit: 0,
        },
        snapshot: None,
        entries: vec![normal(1, 1, b"a"), normal(2, 2, b"b")],
    };
    let mut n = RawNode::new(config(2, 3), state).unwrap();
    let stale = MessageBody::RequestVote {
        last_index: 5,
        last_term: 1,
        transfer: false,
    };
    n.step(msg(1, 2, 3, stale)).unwrap();
    let d = process(&mut n);
    assert_eq!(
        d.persisted_messages[0].body,
        MessageBody::VoteResponse { granted: false }
    );
}

#[test]
fn leader_lease_ignores_prevotes_but_not_transfer_elections() {
    let mut n = node(config(2, 3));
    let hb = MessageBody::Heartbeat {
        commit: 0,
        read_seq: 0,
    };
    n.step(msg(1, 2, 1, hb)).unwrap();
    process(&mut n);
    let pre = MessageBody::PreVote {
        last_index: 10,
        last_term: 1,
    };
    n.step(msg(3, 2, 2, pre)).unwrap();
    assert!(
        !n.has_ready(),
        "a follower with a live leader ignores PreVote"
    );
    let forced = MessageBody::RequestVote {
        last_index: 10,
        last_term: 1,
        transfer: true,
    };
    n.step(msg(3, 2, 2, forced)).unwrap();
    let d = process(&mut n);
    assert_eq!(
        d.persisted_messages,
        vec![msg(2, 3, 2, MessageBody::VoteResponse { granted: true })]
    );
}

#[test]
fn stale_leader_learns_newer_term_from_append_reply() {
    let state = PersistedState {
        hard_state: HardState {
            term: 5,
            vote: None,
            commit: 0,
        },
        ..Default::default()
    };
    let mut n = RawNode::new(config(2, 3), state).unwrap();
    let old = MessageBody::AppendEntries {
        prev_index: 0,
        prev_term: 0,
        entries: vec![],
        commit: 0,
    };
    n.step(msg(1, 2, 3, old)).unwrap();
    let d = process(&mut n);
    assert_eq!(d.messages.len(), 1);
    assert_eq!(d.messages[0].term, 5);
    assert_eq!(n.status().term, 5);
}

#[test]
fn single_node_elects_itself_and_commits_after_its_own_write() {
    let mut n = node(config(1, 1));
    tick_until_ready(&mut n, 20);
    assert_eq!(n.status().role, Role::Leader);
    let d = process(&mut n);
    assert_eq!(d.entries.len(), 1);
    assert!(
        d.committed.is_empty(),
        "not committed before the write is durable"
    );
    let idx = n.propose(b"x".to_vec()).unwrap();
    assert_eq!(idx, 2);
    let d = process(&mut n);
    assert_eq!(d.committed.len(), 1, "noop committed once durable");
    let d = process(&mut n);
    assert_eq!(d.committed, vec![normal(2, 1, b"x")]);
}

// ---- replication -----------------------------------------------------------------

#[test]
fn new_leader_appends_noop_and_sends_it_before_persisting() {
    let mut n = node(config(1, 3));
    let term = elect(&mut n);
    let d = process(&mut n);
    assert_eq!(
        d.entries,
        vec![Entry {
            term,
            index: 1,
            kind: EntryKind::Noop
        }]
    );
    assert_eq!(
        d.soft_state.map(|s| (s.role, s.leader)),
        Some((Role::Leader, Some(1)))
    );
    for to in [2, 3] {
        assert_eq!(appends_to(&d.messages, to), vec![(0, 0, vec![1], 0)]);
    }
}

#[test]
fn commit_needs_a_majority_of_a_current_term_entry() {
    // Node 1 restarts holding two term-1 entries nobody committed.
    let state = PersistedState {
        hard_state: HardState {
            term: 1,
            vote: None,
            commit: 0,
        },
        snapshot: None,
        entries: vec![normal(1, 1, b"a"), normal(2, 1, b"b")],
    };
    let mut n = RawNode::new(config(1, 3), state).unwrap();
    let term = elect(&mut n);
    process(&mut n); // noop at 3 durable locally
                     // Follower 2 acknowledges the old entries only: a majority holds them,
                     // but they are from an older term, so nothing commits yet.
    let ack = |i| MessageBody::AppendResponse {
        index: i,
        reject: None,
    };
    n.step(msg(2, 1, term, ack(2))).unwrap();
    assert_eq!(n.status().commit, 0);
    n.step(msg(2, 1, term, ack(3))).unwrap();
    assert_eq!(
        n.status().commit,
        3,
        "current-term entry commits the prefix too"
    );
    let d = process(&mut n);
    assert_eq!(
        d.committed.iter().map(|e| e.index).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[test]
fn rejected_append_backtracks_by_hint() {
    let entries: Vec<Entry> = (1..=6)
        .map(|i| normal(i, if i <= 3 { 1 } else { 2 }, b"x"))
        .collect();
    let state = PersistedState {
        hard_state: HardState {
            term: 2,
            vote: None,
            commit: 0,
        },
        snapshot: None,
        entries,
    };
    let mut n = RawNode::new(config(1, 3), state).unwrap();
    let term = elect(&mut n);
    let d = process(&mut n);
    assert_eq!(appends_to(&d.messages, 3), vec![(6, 2, vec![7], 0)]);
    // Follower 3 only has entries up to 3 in term 1 and rejects prev 6.
    let reject = MessageBody::AppendResponse {
        index: 6,
        reject: Some(RejectHint { index: 3, term: 1 }),
    };
    n.step(msg(3, 1, term, reject.clone())).unwrap();
    let d = process(&mut n);
    let sent = appends_to(&d.messages, 3);
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].0, sent[0].1), (3, 1), "retry right after the hint");
    // A duplicate of the same rejection is stale and changes nothing.
    n.step(msg(3, 1, term, reject)).unwrap();
    assert!(appends_to(&process(&mut n).messages, 3).is_empty());
}

#[test]
fn follower_rejects_with_a_hint_that_skips_the_conflicting_term() {
    let entries: Vec<Entry> = (1..=5)
        .map(|i| normal(i, if i <= 2 { 1 } else { 3 }, b"x"))
        .collect();
    let state = PersistedState {
        hard_state: HardState {
            term: 3,
            vote: None,
            commit: 0,
        },
        snapshot: None,
        entries,
    };
    let mut n = RawNode::new(config(2, 3), state).unwrap();
    let app = MessageBody::AppendEntries {
        prev_index: 5,
        prev_term: 2,
        entries: vec![],
        commit: 0,
    };
    n.step(msg(1, 2, 4, app)).unwrap();
    let d = process(&mut n);
    assert_eq!(
        d.persisted_messages[0].body,
        MessageBody::AppendResponse {
            index: 5,
            reject: Some(RejectHint { index: 2, term: 1 })
        }
    );
}

#[test]
fn pipelining_and_batching_respect_limits() {
    let mut c = config(1, 3);
    c.max_inflight_msgs = 2;
    c.max_entries_per_msg = 2;
    let mut n = node(c);
    let term = elect(&mut n);
    process(&mut n);
    // Follower 2 accepts the noop: it moves to the pipelined state.
    n.step(msg(
        2,
        1,
        term,
        MessageBody::AppendResponse {
            index: 1,
            reject: None,
        },
    ))
    .unwrap();
    process(&mut n);
    for i in 0..7u8 {
        n.propose(vec![i]).unwrap();
    }
    let sent = appends_to(&process(&mut n).messages, 2);
    assert_eq!(
        sent.iter().map(|s| s.2.clone()).collect::<Vec<_>>(),
        vec![vec![2, 3], vec![4, 5]],
        "two messages of two entries, then the window is full"
    );
    // Follower 3 never answered the probe: it gets nothing new meanwhile.
    n.step(msg(
        2,
        1,
        term,
        MessageBody::AppendResponse {
            index: 3,
            reject: None,
        },
    ))
    .unwrap();
    let sent = appends_to(&process(&mut n).messages, 2);
    assert_eq!(
        sent.iter().map(|s| s.2.clone()).collect::<Vec<_>>(),
        vec![vec![6, 7]]
    );
}

#[test]
fn follower_applies_only_durable_entries_and_caps_commit_at_what_it_got() {
    let mut n = node(config(2, 3));
    let app = MessageBody::AppendEntries {
        prev_index: 0,
        prev_term: 0,
        entries: vec![normal(1, 1, b"a"), normal(2, 1, b"b")],
        commit: 5,
    };
    n.step(msg(1, 2, 1, app)).unwrap();
    let d = process(&mut n);
    assert_eq!(d.entries.len(), 2);
    assert_eq!(
        d.hard_state.map(|h| h.commit),
        Some(2),
        "commit capped at the last new entry"
    );
    assert!(
        d.committed.is_empty(),
        "entries are applied only once durable"
    );
    assert_eq!(
        d.persisted_messages[0].body,
        MessageBody::AppendResponse {
            index: 2,
            reject: None
        }
    );
    let d = process(&mut n);
    assert_eq!(d.committed.len(), 2);
}

#[test]
fn commit_covers_only_entries_checked_by_the_current_append() {
    // Node 2 holds a stale uncommitted entry at 2 from term 1. A term-2
    // leader re-sends entry 1 with commit 2: entry 2 was not checked by
    // this message, so it must not become committed.
    let state = PersistedState {
        hard_state: HardState {
            term: 1,
            vote: None,
            commit: 0,
        },
        snapshot: None,
        entries: vec![normal(1, 1, b"a"), normal(2, 1, b"stale")],
    };
    let mut n = RawNode::new(config(2, 3), state).unwrap();
    let app = MessageBody::AppendEntries {
        prev_index: 0,
        prev_term: 0,
        entries: vec![normal(1, 1, b"a")],
        commit: 2,
    };
    n.step(msg(1, 2, 2, app)).unwrap();
    assert_eq!(n.status().commit, 1);
}

#[test]
fn reordered_old_append_does_not_truncate_newer_entries() {
    let mut n = node(config(2, 3));
    let newer = MessageBody::AppendEntries {
        prev_index: 0,
        prev_term: 0,
        entries: vec![normal(1, 1, b"a"), normal(2, 1, b"b")],
        commit: 0,
    };
    let older = MessageBody::AppendEntries {
        prev_index: 0,
        prev_term: 0,
        entries: vec![normal(1, 1, b"a")],
        commit: 0,
    };
    n.step(msg(1, 2, 1, newer)).unwrap();
    n.step(msg(1, 2, 1, older)).unwrap();
    assert_eq!(n.status().last_index, 2);
}

#[test]
fn overwriting_a_suffix_reports_the_first_index() {
    let state = PersistedState {
        hard_state: HardState {
            term: 1,
            vote: None,
            commit: 1,
        },
        snapshot: None,
        entries: vec![normal(1, 1, b"a"), normal(2, 1, b"b"), normal(3, 1, b"c")],
    };
    let mut n = RawNode::new(config(2, 3), state).unwrap();
    process(&mut n);
    let app = MessageBody::AppendEntries {
        prev_index: 1,
        prev_term: 1,
        entries: vec![normal(2, 2, b"B")],
        commit: 1,
    };
    n.step(msg(1, 2, 2, app)).unwrap();
    let d = process(&mut n);
    assert_eq!(d.entries, vec![normal(2, 2, b"B")]);
    assert_eq!(n.status().last_index, 2);
}

// ---- snapshots and restart ----------------------------------------------------------

#[test]
fn compacted_log_sends_install_snapshot_then_resumes_appends() {
    let mut n = node(config(1, 3));
    let term = elect(&mut n);
    process(&mut n);
    n.step(msg(
        2,
        1,
        term,
        MessageBody::AppendResponse {
            index: 1,
            reject: None,
        },
    ))
    .unwrap();
    for i in 0..3u8 {
        n.propose(vec![i]).unwrap();
    }
    process(&mut n);
    n.step(msg(
        2,
        1,
        term,
        MessageBody::AppendResponse {
            index: 4,
            reject: None,
        },
    ))
    .unwrap();
    for _ in 0..3 {
        process(&mut n);
    }
    assert_eq!(n.status().applied, 4);
    let state = coordbench_raft::Bytes::from(b"state@3".to_vec());
    n.compact(3, state.clone()).unwrap();
    assert_eq!(n.status().snapshot_index, 3);
    // Follower 3 answers the initial probe: it has nothing.
    let reject = MessageBody::AppendResponse {
        index: 0,
        reject: Some(RejectHint { index: 0, term: 0 }),
    };
    n.step(msg(3, 1, term, reject)).unwrap();
    let d = process(&mut n);
    let snaps: Vec<&Message> = d
        .messages
        .iter()
        .filter(|m| matches!(m.body, MessageBody::InstallSnapshot { .. }))
        .collect();
    assert_eq!(snaps.len(), 1);
    assert_eq!(
        snaps[0].body,
        MessageBody::InstallSnapshot {
            snapshot: Snapshot {
                index: 3,
                term,
                data: b"state@3".to_vec().into()
            }
        }
    );
    let MessageBody::InstallSnapshot { snapshot } = &snaps[0].body else {
        unreachable!("filtered above");
    };
    assert_eq!(
        snapshot.data.as_ptr(),
        state.as_ptr(),
        "the snapshot sent shares the compacted state's buffer, not a copy"
    );
    // Nothing else goes to 3 while the snapshot is outstanding.
    n.propose(b"more".to_vec()).unwrap();
    assert!(appends_to(&process(&mut n).messages, 3).is_empty());
    n.step(msg(3, 1, term, MessageBody::SnapshotResponse { index: 3 }))
        .unwrap();
    let sent = appends_to(&process(&mut n).messages, 3);
    assert_eq!(sent[0].0, 3, "appends resume right after the snapshot");
}

#[test]
fn leader_tells_when_compaction_would_cut_off_a_live_follower() {
    let mut n = node(config(1, 3));
    let term = elect(&mut n);
    process(&mut n);
    let ack = |index| MessageBody::AppendResponse {
        index,
        reject: None,
    };
    n.step(msg(2, 1, term, ack(1))).unwrap();
    for i in 0..3u8 {
        n.propose(vec![i]).unwrap();
    }
    process(&mut n);
    n.step(msg(2, 1, term, ack(4))).unwrap();
    process(&mut n);
    assert!(
        !n.followers_need_log_through(4),
        "2 has everything; 3 was never heard from"
    );
    // 3 answers the probe: it has nothing, and is live.
    let reject = MessageBody::AppendResponse {
        index: 0,
        reject: Some(RejectHint { index: 0, term: 0 }),
    };
    n.step(msg(3, 1, term, reject)).unwrap();
    assert!(n.followers_need_log_through(4));
    assert!(
        !node(config(2, 3)).followers_need_log_through(1),
        "not a leader"
    );
}

#[test]
fn follower_installs_snapshot_before_applying_anything_after_it() {
    let mut n = node(config(2, 3));
    let snap = Snapshot {
        index: 10,
        term: 2,
        data: b"sm".to_vec().into(),
    };
    n.step(msg(
        1,
        2,
        3,
        MessageBody::InstallSnapshot {
            snapshot: snap.clone(),
        },
    ))
    .unwrap();
    let app = MessageBody::AppendEntries {
        prev_index: 10,
        prev_term: 2,
        entries: vec![normal(11, 3, b"x")],
        commit: 11,
    };
    n.step(msg(1, 2, 3, app)).unwrap();
    let d = process(&mut n);
    assert_eq!(d.snapshot, Some(snap));
    assert_eq!(d.entries, vec![normal(11, 3, b"x")]);
    assert!(d.committed.is_empty());
    assert_eq!(
        d.persisted_messages[0].body,
        MessageBody::SnapshotResponse { index: 10 }
    );
    let d = process(&mut n);
    assert_eq!(d.committed, vec![normal(11, 3, b"x")]);
    assert_eq!(n.status().applied, 11);
}

#[test]
fn restart_replays_committed_entries_after_the_snapshot() {
    let state = PersistedState {
        hard_state: HardState {
            term: 3,
            vote: Some(1),
            commit: 7,
        },
        snapshot: Some(Snapshot {
            index: 5,
            term: 2,
            data: Default::default(),
        }),
        entries: vec![normal(6, 3, b"f"), normal(7, 3, b"g"), normal(8, 3, b"h")],
    };
    let mut n = RawNode::new(config(1, 3), state).unwrap();
    let st = n.status();
    assert_eq!(
        (st.term, st.vote, st.commit, st.applied),
        (3, Some(1), 7, 5)
    );
    let d = process(&mut n);
    assert_eq!(
        d.committed.iter().map(|e| e.index).collect::<Vec<_>>(),
        vec![6, 7]
    );
    assert!(
        d.entries.is_empty() && d.hard_state.is_none(),
        "nothing new to persist"
    );
}

#[test]
fn invalid_persisted_state_is_an_error() {
    let gap = PersistedState {
        hard_state: HardState {
            term: 1,
            vote: None,
            commit: 0,
        },
        snapshot: None,
        entries: vec![normal(2, 1, b"x")],
    };
    assert!(matches!(
        RawNode::new(config(1, 3), gap),
        Err(Error::InvalidPersistedState(_))
    ));
    let mut bad = config(1, 3);
    bad.election_ticks_max = bad.election_ticks_min;
    assert!(matches!(
        RawNode::new(bad, PersistedState::default()),
        Err(Error::Config(_))
    ));
}

// ---- reads, proposals, transfer ---------------------------------------------------------

#[test]
fn read_index_needs_a_heartbeat_quorum_and_the_applied_index() {
    let mut n = node(config(1, 3));
    let term = elect(&mut n);
    process(&mut n);
    n.read_index(42).unwrap();
    let d = process(&mut n);
    let seqs: Vec<u64> = d
        .messages
        .iter()
        .filter_map(|m| match m.body {
            MessageBody::Heartbeat { read_seq, .. } => Some(read_seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs.len(), 2, "leadership confirmed by a heartbeat round");
    let seq = seqs[0];
    assert!(d.read_states.is_empty());
    // Quorum confirms, but the noop (the read's index) is not applied yet.
    n.step(msg(
        2,
        1,
        term,
        MessageBody::HeartbeatResponse { read_seq: seq },
    ))
    .unwrap();
    assert!(process(&mut n).read_states.is_empty());
    n.step(msg(
        2,
        1,
        term,
        MessageBody::AppendResponse {
            index: 1,
            reject: None,
        },
    ))
    .unwrap();
    let d = process(&mut n);
    assert_eq!(d.committed.len(), 1);
    assert!(
        d.read_states.is_empty(),
        "released only after the apply is acknowledged"
    );
    let d = process(&mut n);
    assert_eq!(d.read_states, vec![ReadState { ctx: 42, index: 1 }]);
}

#[test]
fn followers_refuse_reads_and_proposals_with_a_leader_hint() {
    let mut n = node(config(2, 3));
    n.step(msg(
        1,
        2,
        1,
        MessageBody::Heartbeat {
            commit: 0,
            read_seq: 0,
        },
    ))
    .unwrap();
    assert_eq!(
        n.read_index(1),
        Err(Error::NotLeader {
            leader_hint: Some(1)
        })
    );
    assert_eq!(
        n.propose(b"x".to_vec()),
        Err(Error::NotLeader {
            leader_hint: Some(1)
        })
    );
}

#[test]
fn leadership_transfer_catches_up_target_then_sends_timeout_now() {
    let mut c = Cluster::new(3, |_| {});
    c.tick_all(30);
    let old = c.leader().expect("a leader");
    let target = if old == 3 { 2 } else { 3 };
    c.isolated.push(target);
    for i in 0..3u8 {
        c.n(old).propose(vec![i]).unwrap();
    }
    c.settle();
    c.isolated.clear();
    c.n(old).transfer_leader(target).unwrap();
    assert_eq!(
        c.n(old).propose(b"no".to_vec()),
        Err(Error::TransferInProgress)
    );
    c.settle();
    assert_eq!(c.leader(), Some(target));
    let idx = c.n(target).propose(b"after".to_vec()).unwrap();
    c.settle();
    for id in 1..=3 {
        let applied = &c.applied[&id];
        assert_eq!(applied.last().map(|e| e.index), Some(idx), "node {id}");
    }
}

#[test]
fn check_quorum_leader_steps_down_when_isolated_and_drops_reads() {
    let mut c = Cluster::new(3, |_| {});
    c.tick_all(30);
    let l = c.leader().expect("a leader");
    c.n(l).read_index(9).unwrap();
    c.isolated.push(l);
    let mut dropped = Vec::new();
    for _ in 0..12 {
        c.n(l).tick();
        let d = process(c.n(l));
        dropped.extend(d.dropped_reads);
    }
    assert_ne!(c.n(l).status().role, Role::Leader);
    assert_eq!(dropped, vec![9]);
}

#[test]
fn cluster_reads_are_served_after_commit() {
    let mut c = Cluster::new(3, |_| {});
    c.tick_all(30);
    let l = c.leader().expect("a leader");
    let idx = c.n(l).propose(b"w".to_vec()).unwrap();
    c.n(l).read_index(7).unwrap();
    c.settle();
    assert_eq!(
        c.reads[&l],
        vec![ReadState {
            ctx: 7,
            index: idx - 1
        }]
    );
}

// ---- robustness -----------------------------------------------------------------------

#[test]
fn malformed_messages_are_rejected_without_effect() {
    let mut n = node(config(2, 3));
    let hb = MessageBody::Heartbeat {
        commit: 0,
        read_seq: 0,
    };
    assert!(matches!(
        n.step(msg(1, 3, 1, hb.clone())),
        Err(Error::WrongRecipient { .. })
    ));
    assert_eq!(n.step(msg(9, 2, 1, hb.clone())), Err(Error::UnknownPeer(9)));
    assert_eq!(n.step(msg(2, 2, 1, hb)), Err(Error::UnknownPeer(2)));
    let gap = MessageBody::AppendEntries {
        prev_index: 0,
        prev_term: 0,
        entries: vec![normal(2, 1, b"x")],
        commit: 0,
    };
    assert!(matches!(
        n.step(msg(1, 2, 1, gap)),
        Err(Error::Malformed(_))
    ));
    let future = MessageBody::AppendEntries {
        prev_index: 0,
        prev_term: 0,
        entries: vec![normal(1, 7, b"x")],
        commit: 0,
    };
    assert!(matches!(
        n.step(msg(1, 2, 1, future)),
        Err(Error::Malformed(_))
    ));
    let snap = MessageBody::InstallSnapshot {
        snapshot: Snapshot::default(),
    };
    assert!(matches!(
        n.step(msg(1, 2, 1, snap)),
        Err(Error::Malformed(_))
    ));
    assert_eq!(n.status().last_index, 0);
    // A leader ignores acks for entries it never had.
    let mut l = node(config(1, 3));
    let term = elect(&mut l);
    process(&mut l);
    l.step(msg(
        2,
        1,
        term,
        MessageBody::AppendResponse {
            index: 99,
            reject: None,
        },
    ))
    .unwrap();
    assert_eq!(l.status().commit, 0);
}

#[test]
fn messages_round_trip_through_serde() {
    let m = msg(
        1,
        2,
        3,
        MessageBody::AppendEntries {
            prev_index: 4,
            prev_term: 2,
            entries: vec![
                normal(5, 3, b"cmd"),
                Entry {
                    term: 3,
                    index: 6,
                    kind: EntryKind::Noop,
                },
            ],
            commit: 4,
        },
    );
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(serde_json::from_str::<Message>(&json).unwrap(), m);
    let r = msg(
        2,
        1,
        3,
        MessageBody::AppendResponse {
            index: 4,
            reject: Some(RejectHint { index: 2, term: 1 }),
        },
    );
    assert_eq!(
        serde_json::from_str::<Message>(&serde_json::to_string(&r).unwrap()).unwrap(),
        r
    );
}

/// Random and hostile field values: whatever arrives, the core must answer
/// with `Ok` or an error, never a panic, and keep its indexes consistent.
#[test]
fn garbage_messages_never_panic() {
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        /// Mostly within `spread` of `base`, sometimes extreme.
        fn near(&mut self, base: u64, spread: u64) -> u64 {
            let r = self.next();
            match r % 64 {
                0 => u64::MAX - (r >> 62),
                1 => u64::MAX / 2 + (r >> 62),
                _ => base
                    .saturating_sub(spread)
                    .saturating_add((r >> 8) % (2 * spread + 1)),
            }
        }
    }
    let mut g = Gen(0x1234_5678);
    let mut leader = node(config(1, 3));
    elect(&mut leader);
    process(&mut leader);
    let mut nodes = [leader, node(config(2, 3)), node(config(3, 3))];
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..30_000u64 {
        // Mostly plausible values near the target's state, sometimes extreme.
        let target = (g.next() % 3) as usize;
        let st = nodes[target].status();
        let term = g.near(st.term, 1);
        let start = g.near(st.last_index, 3);
        let mut entries = Vec::new();
        for k in 0..g.next() % 4 {
            entries.push(Entry {
                term: g.near(term, 1),
                index: if g.next() % 8 == 0 {
                    g.near(start, 3)
                } else {
                    start.wrapping_add(k + 1)
                },
                kind: if k % 2 == 0 {
                    EntryKind::Noop
                } else {
                    EntryKind::Normal(vec![k as u8])
                },
            });
        }
        let body = match g.next() % 11 {
            0 => MessageBody::AppendEntries {
                prev_index: start,
                prev_term: g.near(term, 1),
                entries,
                commit: g.near(st.commit, 3),
            },
            1 => MessageBody::AppendResponse {
                index: g.near(st.last_index, 3),
                reject: if g.next() % 2 == 0 {
                    None
                } else {
                    Some(RejectHint {
                        index: g.near(st.last_index, 5),
                        term: g.near(term, 1),
                    })
                },
            },
            2 => MessageBody::RequestVote {
                last_index: g.near(st.last_index, 3),
                last_term: g.near(term, 1),
                transfer: g.next() % 2 == 0,
            },
            3 => MessageBody::VoteResponse {
                granted: g.next() % 2 == 0,
            },
            4 => MessageBody::PreVote {
                last_index: g.near(st.last_index, 3),
                last_term: g.near(term, 1),
            },
            5 => MessageBody::PreVoteResponse {
                granted: g.next() % 2 == 0,
            },
            6 => MessageBody::Heartbeat {
                commit: g.near(st.commit, 3),
                read_seq: g.next() % 5,
            },
            7 => MessageBody::HeartbeatResponse {
                read_seq: g.next() % 5,
            },
            8 => MessageBody::InstallSnapshot {
                snapshot: Snapshot {
                    index: g.near(st.last_index, 5),
                    term: g.near(term, 1),
                    data: Default::default(),
                },
            },
            9 => MessageBody::SnapshotResponse {
                index: g.near(st.last_index, 3),
            },
            _ => MessageBody::TimeoutNow,
        };
        let from = if g.next() % 16 == 0 {
            g.next() % 6
        } else {
            1 + g.next() % 3
        };
        let to = if g.next() % 16 == 0 {
            g.next() % 6
        } else {
            st.id
        };
        let n = &mut nodes[target];
        match n.step(msg(from, to, term, body)) {
            Ok(()) => accepted += 1,
            Err(_) => refused += 1,
        }
        match g.next() % 6 {
            0 => n.tick(),
            1 => {
                let _ = n.propose(b"p".to_vec());
            }
            2 => {
                let _ = n.read_index(round);
            }
            3 => {
                let _ = n.compact(st.applied, Default::default());
            }
            _ => {}
        }
        if n.has_ready() {
            let d = process(n);
            for w in d.entries.windows(2) {
                assert_eq!(
                    w[0].index + 1,
                    w[1].index,
                    "Ready entries must be contiguous"
                );
            }
        }
        let st = n.status();
        assert!(
            st.applied <= st.commit && st.commit <= st.last_index,
            "{st:?}"
        );
    }
    assert!(
        accepted > 10_000 && refused > 1_000,
        "accepted {accepted}, refused {refused}"
    );
}
