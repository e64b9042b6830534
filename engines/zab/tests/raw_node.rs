//! Hand-driven scenarios: single nodes or a small ensemble are stepped
//! message by message and the tests assert on exactly what each `Ready`
//! contains.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use coordbench_zab::{
    Config, Error, HardState, Message, MessageBody, PersistedState, Phase, Proposal, RawNode,
    ReadState, Ready, Role, Snapshot, SyncKind, Vote, Zxid,
};

// ---- helpers -------------------------------------------------------------------

fn config(id: u64, n: u64) -> Config {
    let mut c = Config::new(id, (1..=n).collect());
    c.finalize_ticks = 1;
    c
}

fn z(epoch: u32, counter: u32) -> Zxid {
    Zxid::new(epoch, counter)
}

fn prop(epoch: u32, counter: u32) -> Proposal {
    Proposal {
        zxid: z(epoch, counter),
        data: format!("{epoch}.{counter}").into_bytes(),
    }
}

/// A durable state holding `history` with `epoch` as accepted and current
/// epoch (everything in it committed up to `commit`).
fn persisted(epoch: u32, history: &[(u32, u32)], commit: Zxid) -> PersistedState {
    PersistedState {
        hard_state: HardState {
            accepted_epoch: epoch,
            current_epoch: epoch,
            commit,
            round: 0,
        },
        snapshot: None,
        entries: history.iter().map(|&(e, c)| prop(e, c)).collect(),
    }
}

/// The public contents of one Ready, after it was "persisted" and advanced.
#[derive(Debug, Default)]
struct Done {
    hard_state: Option<HardState>,
    snapshot: Option<Snapshot>,
    truncate_after: Option<Zxid>,
    entries: Vec<Proposal>,
    messages: Vec<Message>,
    persisted_messages: Vec<Message>,
    committed: Vec<Proposal>,
    read_states: Vec<ReadState>,
    dropped_reads: Vec<u64>,
}

/// Takes a Ready, pretends to persist and apply it, advances.
fn process(n: &mut RawNode) -> Done {
    let mut rd: Ready = n.ready();
    let done = Done {
        hard_state: rd.hard_state.clone(),
        snapshot: rd.snapshot.take(),
        truncate_after: rd.truncate_after,
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

fn zxids(ps: &[Proposal]) -> Vec<Zxid> {
    ps.iter().map(|p| p.zxid).collect()
}

fn msg(from: u64, to: u64, body: MessageBody) -> Message {
    Message { from, to, body }
}

fn names(ms: &[Message]) -> Vec<(&'static str, u64)> {
    ms.iter().map(|m| (m.body.name(), m.to)).collect()
}

/// An ensemble whose nodes persist instantly and whose network delivers
/// everything in order, except to nodes in `cut`.
struct Ensemble {
    nodes: BTreeMap<u64, RawNode>,
    disks: BTreeMap<u64, PersistedState>,
    applied: BTreeMap<u64, Vec<Proposal>>,
    reads: BTreeMap<u64, Vec<ReadState>>,
    queue: VecDeque<Message>,
    cut: BTreeSet<u64>,
    /// Ignore refused messages (for garbage input) instead of failing.
    tolerate: bool,
    /// Every NEWLEADER sent: (to, kind).
    syncs: Vec<(u64, SyncKind)>,
}

impl Ensemble {
    fn new(states: Vec<PersistedState>) -> Self {
        let n = states.len() as u64;
        let mut e = Ensemble {
            nodes: BTreeMap::new(),
            disks: BTreeMap::new(),
            applied: BTreeMap::new(),
            reads: BTreeMap::new(),
            queue: VecDeque::new(),
            cut: BTreeSet::new(),
            tolerate: false,
            syncs: Vec::new(),
        };
        for (k, st) in states.into_iter().enumerate() {
            let id = k as u64 + 1;
            e.nodes
                .insert(id, RawNode::new(config(id, n), st.clone()).unwrap());
            e.disks.insert(id, st);
            e.applied.insert(id, Vec::new());
        }
        e
    }

    fn fresh(n: u64) -> Self {
        Self::new((0..n).map(|_| PersistedState::default()).collect())
    }

    fn node(&mut self, id: u64) -> &mut RawNode {
        self.nodes.get_mut(&id).unwrap()
    }

    fn write(&mut self, id: u64, d: &Done) {
        let disk = self.disks.get_mut(&id).unwrap();
        if let Some(s) = &d.snapshot {
            disk.snapshot = Some(s.clone());
            disk.entries.clear();
        }
        if let Some(t) = d.truncate_after {
            disk.entries.retain(|p| p.zxid <= t);
        }
        disk.entries.extend(d.entries.iter().cloned());
        if let Some(hs) = &d.hard_state {
            disk.hard_state = hs.clone();
        }
    }

    /// Processes every pending Ready and delivers every message until quiet.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut busy = false;
            let ids: Vec<u64> = self.nodes.keys().copied().collect();
            for id in ids {
                if self.node(id).has_ready() {
                    busy = true;
                    let d = process(self.node(id));
                    self.write(id, &d);
                    for m in d.messages.iter().chain(&d.persisted_messages) {
                        if let MessageBody::NewLeader { sync, .. } = &m.body {
                            self.syncs.push((m.to, sync.clone()));
                        }
                    }
                    self.queue.extend(d.messages);
                    self.queue.extend(d.persisted_messages);
                    self.applied.get_mut(&id).unwrap().extend(d.committed);
                    self.reads.entry(id).or_default().extend(d.read_states);
                }
            }
            while let Some(m) = self.queue.pop_front() {
                busy = true;
                if self.cut.contains(&m.to) || self.cut.contains(&m.from) {
                    continue;
                }
                let to = m.to;
                let r = self.node(to).step(m);
                assert!(self.tolerate || r.is_ok(), "refused: {r:?}");
            }
            if !busy {
                return;
            }
        }
        panic!("ensemble never settled");
    }

    fn tick(&mut self, ticks: u32) {
        for _ in 0..ticks {
            let ids: Vec<u64> = self.nodes.keys().copied().collect();
            for id in ids {
                if !self.cut.contains(&id) {
                    self.node(id).tick();
                }
            }
            self.settle();
        }
    }

    fn leader(&self) -> Option<u64> {
        let ls: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.status().is_established_leader())
            .map(|(&id, _)| id)
            .collect();
        match ls[..] {
            [l] => Some(l),
            _ => None,
        }
    }

    /// Runs until one leader is established and every node serves it.
    fn establish(&mut self) -> u64 {
        self.settle();
        for _ in 0..200 {
            if let Some(l) = self.leader() {
                let all = self.nodes.iter().all(|(id, n)| {
                    self.cut.contains(id)
                        || (n.status().leader == Some(l) && n.status().phase == Phase::Broadcast)
                });
                if all {
                    return l;
                }
            }
            self.tick(1);
        }
        panic!("no leader established");
    }
}

// ---- election ------------------------------------------------------------------

#[test]
fn election_picks_the_node_with_the_highest_zxid() {
    let mut e = Ensemble::new(vec![
        persisted(1, &[(1, 1), (1, 2)], z(1, 1)),
        persisted(1, &[(1, 1), (1, 2), (1, 3)], z(1, 1)),
        persisted(1, &[(1, 1)], z(1, 1)),
    ]);
    let l = e.establish();
    assert_eq!(l, 2);
    let st = e.node(2).status();
    assert_eq!((st.current_epoch, st.accepted_epoch), (2, 2));
    // The new leader's whole history is committed by establishment.
    assert_eq!(st.commit, z(1, 3));
    for id in 1..=3 {
        assert_eq!(e.disks[&id].entries.last().map(|p| p.zxid), Some(z(1, 3)));
        assert_eq!(zxids(&e.applied[&id]), vec![z(1, 1), z(1, 2), z(1, 3)]);
    }
}

#[test]
fn election_orders_by_epoch_before_zxid_and_trunc_discards_the_old_tail() {
    // Node 1 holds proposals of epoch 1 that were never committed; node 2
    // already adopted epoch 2's history, which lacks them.
    let mut e = Ensemble::new(vec![
        persisted(1, &[(1, 1), (1, 2), (1, 3)], z(1, 1)),
        persisted(2, &[(1, 1)], z(1, 1)),
        persisted(1, &[(1, 1)], z(1, 1)),
    ]);
    assert_eq!(e.establish(), 2);
    assert!(e.syncs.contains(&(1, SyncKind::Trunc { to: z(1, 1) })));
    assert_eq!(zxids(&e.disks[&1].entries), vec![z(1, 1)]);
    assert_eq!(e.node(1).status().current_epoch, 3);
}

#[test]
fn a_restarted_node_joins_the_established_leader() {
    let mut e = Ensemble::fresh(3);
    let l = e.establish();
    let other = if l == 1 { 2 } else { 1 };
    let zx = e.node(l).propose(b"x".to_vec()).unwrap();
    e.settle();
    // Restart a follower from its disk: it applies what it knows committed
    // at once, then finds the leader through the others' notifications.
    let disk = e.disks[&other].clone();
    assert_eq!(disk.hard_state.commit, zx);
    let mut n = RawNode::new(config(other, 3), disk).unwrap();
    let d = process(&mut n);
    assert_eq!(zxids(&d.committed), vec![zx]);
    assert_eq!(n.status().role, Role::Looking);
    e.nodes.insert(other, n);
    assert_eq!(e.establish(), l, "the leader kept its epoch");
    assert_eq!(e.node(other).status().leader, Some(l));
}

#[test]
fn a_following_node_answers_a_looking_one_with_its_decided_vote() {
    let mut n = RawNode::new(config(1, 3), persisted(1, &[(1, 1)], z(1, 1))).unwrap();
    let _ = process(&mut n);
    let lead = Vote {
        epoch: 1,
        zxid: z(1, 1),
        leader: 3,
    };
    // A quorum (node 3 leading, node 2 following it) reports leader 3.
    for (from, state) in [(3, Role::Leading), (2, Role::Following)] {
        n.step(msg(
            from,
            1,
            MessageBody::Notification {
                vote: lead,
                round: 5,
                state,
            },
        ))
        .unwrap();
    }
    let st = n.status();
    assert_eq!((st.role, st.leader), (Role::Following, Some(3)));
    let d = process(&mut n);
    // FOLLOWERINFO waits for the round to be durable.
    assert!(d.messages.is_empty());
    assert_eq!(d.hard_state.map(|h| h.round), Some(5));
    assert_eq!(names(&d.persisted_messages), vec![("FollowerInfo", 3)]);
    // A looking peer is told whom we follow.
    n.step(msg(
        2,
        1,
        MessageBody::Notification {
            vote: Vote {
                epoch: 0,
                zxid: Zxid::ZERO,
                leader: 2,
            },
            round: 9,
            state: Role::Looking,
        },
    ))
    .unwrap();
    let d = process(&mut n);
    match &d.messages[..] {
        [Message {
            to: 2,
            body: MessageBody::Notification { vote, state, .. },
            ..
        }] => assert_eq!((vote.leader, *state), (3, Role::Following)),
        other => panic!("unexpected {other:?}"),
    }
}

// ---- discovery and synchronization ------------------------------------------------

/// Node 1 of 3, decided to lead (fed a notification from node 2 backing it).
fn leading_node(st: PersistedState) -> RawNode {
    let mut n = RawNode::new(config(1, 3), st).unwrap();
    let d = process(&mut n);
    let round = d.hard_state.map_or(1, |h| h.round);
    let vote = n.status().vote;
    n.step(msg(
        2,
        1,
        MessageBody::Notification {
            vote,
            round,
            state: Role::Looking,
        },
    ))
    .unwrap();
    for _ in 0..5 {
        n.tick();
    }
    assert_eq!(n.status().role, Role::Leading);
    let _ = process(&mut n);
    n
}

fn follower_info(from: u64, accepted: u32, round: u64) -> Message {
    msg(
        from,
        1,
        MessageBody::FollowerInfo {
            accepted_epoch: accepted,
            round,
        },
    )
}

fn ack_epoch(from: u64, epoch: u32, round: u64, fresh: bool, current: u32, last: Zxid) -> Message {
    msg(
        from,
        1,
        MessageBody::AckEpoch {
            epoch,
            round,
            fresh,
            current_epoch: current,
            last_zxid: last,
        },
    )
}

#[test]
fn discovery_picks_an_epoch_above_the_quorum_and_counts_only_fresh_acks() {
    let mut l = leading_node(persisted(3, &[(3, 1)], z(3, 1)));
    l.step(follower_info(2, 7, 1)).unwrap();
    let d = process(&mut l);
    assert_eq!(d.hard_state.map(|h| h.accepted_epoch), Some(8));
    assert_eq!(
        d.messages
            .iter()
            .map(|m| m.body.clone())
            .collect::<Vec<_>>(),
        vec![MessageBody::NewEpoch { epoch: 8, round: 1 }]
    );
    l.step(follower_info(3, 5, 1)).unwrap();
    let d = process(&mut l);
    assert_eq!(names(&d.messages), vec![("NewEpoch", 3)]);
    // Node 2 had accepted epoch 8 from someone else: its ack does not count.
    l.step(ack_epoch(2, 8, 1, false, 3, z(3, 1))).unwrap();
    let d = process(&mut l);
    assert!(d.messages.is_empty(), "no quorum of fresh acks yet");
    assert_eq!(l.status().phase, Phase::Discovery);
    l.step(ack_epoch(3, 8, 1, true, 3, z(3, 1))).unwrap();
    let d = process(&mut l);
    assert_eq!(l.status().phase, Phase::Synchronization);
    assert_eq!(d.hard_state.map(|h| h.current_epoch), Some(8));
    assert_eq!(names(&d.messages), vec![("NewLeader", 2), ("NewLeader", 3)]);
    // A stale ack (an earlier attempt's round) is ignored.
    l.step(ack_epoch(3, 8, 0, true, 9, z(9, 9))).unwrap();
    assert_eq!(l.status().role, Role::Leading);
}

#[test]
fn a_leader_behind_an_acknowledging_follower_steps_down() {
    let mut l = leading_node(persisted(3, &[(3, 1)], z(3, 1)));
    l.step(follower_info(2, 3, 1)).unwrap();
    let _ = process(&mut l);
    l.step(ack_epoch(2, 4, 1, true, 3, z(3, 2))).unwrap();
    assert_eq!(l.status().role, Role::Looking);
}

#[test]
fn leader_chooses_diff_trunc_or_snap_per_follower() {
    // Leader history: 1:1 1:2 | 2:1 2:2 (epoch 2), compacted up to 1:2.
    let mut st = persisted(2, &[(2, 1), (2, 2)], z(2, 2));
    st.snapshot = Some(Snapshot {
        zxid: z(1, 2),
        data: b"sm".to_vec(),
    });
    let mut l = RawNode::new(config(1, 5), st).unwrap();
    let d = process(&mut l);
    let round = d.hard_state.map_or(1, |h| h.round);
    let vote = l.status().vote;
    for from in [2, 3] {
        l.step(msg(
            from,
            1,
            MessageBody::Notification {
                vote,
                round,
                state: Role::Looking,
            },
        ))
        .unwrap();
    }
    for _ in 0..3 {
        l.tick();
    }
    let _ = process(&mut l);
    assert_eq!(l.status().role, Role::Leading);
    for f in 2..=5 {
        l.step(msg(
            f,
            1,
            MessageBody::FollowerInfo {
                accepted_epoch: 2,
                round: 1,
            },
        ))
        .unwrap();
    }
    let _ = process(&mut l);
    // 2: a prefix (DIFF); 3: an uncommitted epoch-1 tail (TRUNC); 4: behind
    // the snapshot (SNAP); 5: ahead within epoch 2 (TRUNC to our last).
    let reports = [
        (2, 2, z(2, 1)),
        (3, 1, z(1, 3)),
        (4, 1, z(1, 1)),
        (5, 2, z(2, 3)),
    ];
    for (f, cur, last) in reports {
        l.step(ack_epoch(f, 3, 1, true, cur, last)).unwrap();
    }
    let d = process(&mut l);
    let kinds: BTreeMap<u64, (SyncKind, Vec<Zxid>)> = d
        .messages
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::NewLeader {
                sync, proposals, ..
            } => Some((m.to, (sync.clone(), zxids(proposals)))),
            _ => None,
        })
        .collect();
    assert_eq!(kinds[&2], (SyncKind::Diff { from: z(2, 1) }, vec![z(2, 2)]));
    assert_eq!(
        kinds[&3],
        (SyncKind::Trunc { to: z(1, 2) }, vec![z(2, 1), z(2, 2)])
    );
    assert_eq!(
        kinds[&4],
        (
            SyncKind::Snap(Snapshot {
                zxid: z(1, 2),
                data: b"sm".to_vec()
            }),
            vec![z(2, 1), z(2, 2)]
        )
    );
    assert_eq!(kinds[&5], (SyncKind::Trunc { to: z(2, 2) }, vec![]));
}

/// Node 1 of 3 following node 3 (joined through notifications), with the
/// given durable state; returns it with FOLLOWERINFO handled.
fn following_node(st: PersistedState) -> (RawNode, u64) {
    let mut n = RawNode::new(config(1, 3), st).unwrap();
    let _ = process(&mut n);
    let vote = Vote {
        epoch: 2,
        zxid: z(2, 0),
        leader: 3,
    };
    for (from, state) in [(3, Role::Leading), (2, Role::Following)] {
        n.step(msg(
            from,
            1,
            MessageBody::Notification {
                vote,
                round: 1,
                state,
            },
        ))
        .unwrap();
    }
    let d = process(&mut n);
    assert_eq!(names(&d.persisted_messages), vec![("FollowerInfo", 3)]);
    let round = n.status().round;
    (n, round)
}

#[test]
fn follower_acks_epoch_only_once_durable_and_truncates_an_old_epoch_tail() {
    let (mut f, round) = following_node(persisted(1, &[(1, 1), (1, 2)], z(1, 1)));
    f.step(msg(3, 1, MessageBody::NewEpoch { epoch: 2, round }))
        .unwrap();
    let d = process(&mut f);
    assert!(d.messages.is_empty());
    assert_eq!(d.hard_state.map(|h| h.accepted_epoch), Some(2));
    assert_eq!(
        d.persisted_messages[0].body,
        MessageBody::AckEpoch {
            epoch: 2,
            round,
            fresh: true,
            current_epoch: 1,
            last_zxid: z(1, 2)
        }
    );
    // The leader's history ends at 1:1 plus its own 2:1: 1:2 was never
    // committed and must go.
    f.step(msg(
        3,
        1,
        MessageBody::NewLeader {
            epoch: 2,
            round,
            sync_id: 1,
            sync: SyncKind::Trunc { to: z(1, 1) },
            proposals: vec![],
            last_zxid: z(1, 1),
            commit: z(1, 1),
        },
    ))
    .unwrap();
    let d = process(&mut f);
    assert_eq!(d.truncate_after, Some(z(1, 1)));
    assert!(
        d.persisted_messages.is_empty(),
        "history first, then the epoch"
    );
    assert!(d.hard_state.is_none_or(|h| h.current_epoch == 1));
    // Once the truncation is durable: adopt the epoch, then acknowledge.
    let d = process(&mut f);
    assert_eq!(d.hard_state.map(|h| h.current_epoch), Some(2));
    assert_eq!(
        d.persisted_messages[0].body,
        MessageBody::AckNewLeader {
            epoch: 2,
            round,
            sync_id: 1,
            last_zxid: z(1, 1)
        }
    );
    assert_eq!(f.status().phase, Phase::Synchronization);
    f.step(msg(
        3,
        1,
        MessageBody::UpToDate {
            epoch: 2,
            commit: z(1, 1),
        },
    ))
    .unwrap();
    assert_eq!(f.status().phase, Phase::Broadcast);
    // Proposals of a stale session are ignored, not errors.
    f.step(msg(
        3,
        1,
        MessageBody::Propose {
            epoch: 1,
            prev: z(1, 1),
            proposals: vec![prop(1, 2)],
            commit: z(1, 2),
        },
    ))
    .unwrap();
    assert_eq!(f.status().last_zxid, z(1, 1));
}

#[test]
fn an_epoch_accepted_from_another_leader_is_acknowledged_but_not_fresh() {
    let (mut f, round) = following_node(persisted(1, &[(1, 1)], z(1, 1)));
    f.step(msg(3, 1, MessageBody::NewEpoch { epoch: 2, round }))
        .unwrap();
    let fresh = |d: &Done| match d.persisted_messages[..] {
        [Message {
            body: MessageBody::AckEpoch { fresh, .. },
            ..
        }] => fresh,
        _ => panic!("no AckEpoch in {d:?}"),
    };
    assert!(fresh(&process(&mut f)));
    // A repeat from the same leader (our ack was lost) is still fresh.
    f.step(msg(3, 1, MessageBody::NewEpoch { epoch: 2, round }))
        .unwrap();
    assert!(fresh(&process(&mut f)));
    // After a restart the node no longer knows whom it gave epoch 2 to.
    let disk = PersistedState {
        hard_state: HardState {
            accepted_epoch: 2,
            ..persisted(1, &[], z(1, 1)).hard_state
        },
        ..persisted(1, &[(1, 1)], z(1, 1))
    };
    let (mut f, round) = following_node(disk);
    f.step(msg(3, 1, MessageBody::NewEpoch { epoch: 2, round }))
        .unwrap();
    assert!(!fresh(&process(&mut f)));
}

#[test]
fn a_lower_new_epoch_is_refused() {
    let (mut f, round) = following_node(persisted(4, &[(1, 1)], z(1, 1)));
    f.step(msg(3, 1, MessageBody::NewEpoch { epoch: 3, round }))
        .unwrap();
    assert!(!f.has_ready());
    assert_eq!(f.status().accepted_epoch, 4);
}

// ---- broadcast ---------------------------------------------------------------------

/// An established 3-node ensemble with node 3 leading (fresh nodes elect
/// the highest id).
fn established() -> Ensemble {
    let mut e = Ensemble::fresh(3);
    assert_eq!(e.establish(), 3);
    e
}

#[test]
fn a_follower_whose_leader_disconnects_looks_for_a_leader_at_once() {
    let mut e = established();
    // Another follower's connection closing changes nothing.
    e.node(1).peer_disconnected(2);
    assert_eq!(e.node(1).status().role, Role::Following);
    // The leader's does, without waiting out syncLimit; a new election settles it.
    e.node(1).peer_disconnected(3);
    assert_eq!(e.node(1).status().role, Role::Looking);
    // A leader ignores the hint about a follower (its quorum checks decide).
    e.node(3).peer_disconnected(1);
    assert_eq!(e.node(3).status().role, Role::Leading);
}

#[test]
fn ack_is_a_persisted_message_and_commit_waits_for_a_quorum() {
    let mut e = established();
    let zx = e.node(3).propose(b"a".to_vec()).unwrap();
    assert_eq!(zx, z(1, 1));
    let d = process(e.node(3));
    assert_eq!(zxids(&d.entries), vec![zx]);
    assert_eq!(names(&d.messages), vec![("Propose", 1), ("Propose", 2)]);
    // The leader's own durable copy is not a quorum.
    assert!(d.committed.is_empty());
    assert!(!e.node(3).has_ready());

    let to2 = d.messages.into_iter().find(|m| m.to == 2).unwrap();
    e.node(2).step(to2).unwrap();
    let d2 = process(e.node(2));
    assert_eq!(zxids(&d2.entries), vec![zx]);
    assert!(d2.messages.is_empty(), "the ACK must wait for the write");
    assert_eq!(
        d2.persisted_messages,
        vec![msg(2, 3, MessageBody::Ack { epoch: 1, zxid: zx })]
    );
    assert!(d2.committed.is_empty());

    e.node(3).step(d2.persisted_messages[0].clone()).unwrap();
    let d = process(e.node(3));
    assert_eq!(zxids(&d.committed), vec![zx]);
    assert_eq!(names(&d.messages), vec![("Commit", 1), ("Commit", 2)]);
    assert_eq!(e.node(3).status().commit, zx);
}

#[test]
fn commits_follow_zxid_order_with_many_proposals_in_flight() {
    let mut e = Ensemble::fresh(5);
    let l = e.establish();
    let zs: Vec<Zxid> = (0..5)
        .map(|k| e.node(l).propose(vec![k]).unwrap())
        .collect();
    // Two followers only get the first three proposals.
    let d = process(e.node(l));
    let mut acks = Vec::new();
    for m in d.messages {
        let to = m.to;
        e.node(to).step(m).unwrap();
        let df = process(e.node(to));
        acks.extend(df.persisted_messages);
    }
    assert_eq!(acks.len(), 4);
    // Acks arrive newest first: nothing commits until a quorum holds a zxid,
    // then everything up to it commits, in order.
    let mut committed = Vec::new();
    for a in acks.into_iter().rev() {
        e.node(l).step(a).unwrap();
        committed.extend(process(e.node(l)).committed);
    }
    assert_eq!(zxids(&committed), zs);
}

#[test]
fn followers_apply_only_durable_commits() {
    let mut e = established();
    let zx = e.node(3).propose(b"a".to_vec()).unwrap();
    e.settle();
    assert_eq!(e.node(3).status().commit, zx);
    // Follower 1 hears the proposal and its commit before writing it.
    let zx2 = e.node(3).propose(b"b".to_vec()).unwrap();
    let d = process(e.node(3));
    let to1 = d.messages.iter().find(|m| m.to == 1).unwrap().clone();
    e.node(1).step(to1).unwrap();
    e.node(1)
        .step(msg(
            3,
            1,
            MessageBody::Commit {
                epoch: 1,
                zxid: zx2,
            },
        ))
        .unwrap();
    let mut rd = e.node(1).ready();
    assert_eq!(zxids(&rd.entries), vec![zx2]);
    assert!(rd.committed_entries.is_empty(), "not durable yet");
    rd.entries.clear();
    e.node(1).advance(rd);
    let d = process(e.node(1));
    assert_eq!(zxids(&d.committed), vec![zx2]);
}

#[test]
fn sync_read_on_a_follower_waits_for_confirmation_and_apply() {
    let mut e = established();
    assert_eq!(
        e.node(1).sync_read(1),
        Ok(()),
        "a serving follower may sync"
    );
    e.settle();
    assert_eq!(
        e.reads[&1],
        vec![ReadState {
            ctx: 1,
            zxid: Zxid::ZERO
        }]
    );

    // A proposal committed without node 1.
    e.cut.insert(1);
    let zx = e.node(3).propose(b"a".to_vec()).unwrap();
    e.settle();
    assert_eq!(e.node(3).status().commit, zx);
    e.cut.clear();

    e.node(1).sync_read(2).unwrap();
    let d = process(e.node(1));
    assert_eq!(
        d.messages,
        vec![msg(3, 3, MessageBody::SyncRequest { epoch: 1, ctx: 2 })]
            .into_iter()
            .map(|mut m| {
                m.from = 1;
                m
            })
            .collect::<Vec<_>>()
    );
    e.node(3).step(d.messages[0].clone()).unwrap();
    let d = process(e.node(3));
    // The leader first confirms it still leads.
    let pings: Vec<&Message> = d
        .messages
        .iter()
        .filter(|m| matches!(m.body, MessageBody::Ping { read_seq, .. } if read_seq > 0))
        .collect();
    assert_eq!(pings.len(), 2);
    assert!(!d
        .messages
        .iter()
        .any(|m| matches!(m.body, MessageBody::SyncResponse { .. })));
    let MessageBody::Ping { read_seq, .. } = pings[0].body else {
        unreachable!()
    };
    e.node(3)
        .step(msg(2, 3, MessageBody::PingAck { epoch: 1, read_seq }))
        .unwrap();
    let d = process(e.node(3));
    assert_eq!(
        d.messages,
        vec![msg(
            3,
            1,
            MessageBody::SyncResponse {
                epoch: 1,
                ctx: 2,
                zxid: zx
            }
        )]
    );
    // Node 1 has not applied the proposal yet: the read waits.
    e.node(1).step(d.messages[0].clone()).unwrap();
    let d1 = process(e.node(1));
    assert!(d1.read_states.is_empty());
    e.settle();
    e.tick(10);
    assert_eq!(e.reads[&1].last(), Some(&ReadState { ctx: 2, zxid: zx }));
    assert_eq!(zxids(&e.applied[&1]), vec![zx]);
}

#[test]
fn sync_read_is_refused_while_not_serving_and_dropped_on_session_loss() {
    let mut n = RawNode::new(config(1, 3), PersistedState::default()).unwrap();
    assert_eq!(n.sync_read(1), Err(Error::NotServing { leader_hint: None }));
    assert_eq!(
        n.propose(vec![1]),
        Err(Error::NotLeader { leader_hint: None })
    );
    let mut e = established();
    assert_eq!(
        e.node(1).propose(vec![1]),
        Err(Error::NotLeader {
            leader_hint: Some(3)
        })
    );
    e.cut.insert(3);
    e.node(1).sync_read(9).unwrap();
    let mut dropped = Vec::new();
    for _ in 0..30 {
        e.node(1).tick();
        dropped.extend(process(e.node(1)).dropped_reads);
    }
    assert_eq!(dropped, vec![9]);
}

#[test]
fn leader_sync_read_needs_a_quorum_round() {
    let mut e = established();
    let zx = e.node(3).propose(b"a".to_vec()).unwrap();
    e.settle();
    e.cut.insert(1);
    e.cut.insert(2);
    e.node(3).sync_read(5).unwrap();
    e.settle();
    assert!(e.reads.get(&3).is_none_or(|r| r.is_empty()));
    e.cut.remove(&2);
    e.tick(2);
    assert_eq!(e.reads[&3], vec![ReadState { ctx: 5, zxid: zx }]);
}

// ---- liveness and restarts ------------------------------------------------------------

#[test]
fn a_leader_without_a_quorum_steps_down_and_followers_time_out() {
    let mut e = established();
    e.cut.insert(1);
    e.cut.insert(2);
    for _ in 0..25 {
        e.node(3).tick();
        e.node(1).tick();
    }
    assert_eq!(e.node(3).status().role, Role::Looking);
    assert_eq!(e.node(1).status().role, Role::Looking);
    e.cut.clear();
    let l = e.establish();
    assert_eq!(e.node(l).status().current_epoch, 2);
}

#[test]
fn a_single_node_establishes_and_commits_alone() {
    let mut n = RawNode::new(config(1, 1), PersistedState::default()).unwrap();
    for _ in 0..10 {
        n.tick();
        let _ = process(&mut n);
    }
    assert!(n.status().is_established_leader());
    let zx = n.propose(b"solo".to_vec()).unwrap();
    let d = process(&mut n);
    assert_eq!(zxids(&d.entries), vec![zx]);
    let d = process(&mut n);
    assert_eq!(zxids(&d.committed), vec![zx]);
    n.sync_read(3).unwrap();
    assert_eq!(
        process(&mut n).read_states,
        vec![ReadState { ctx: 3, zxid: zx }]
    );
}

#[test]
fn restart_rejects_inconsistent_state() {
    let mut st = persisted(1, &[(1, 2), (1, 1)], Zxid::ZERO);
    assert!(matches!(
        RawNode::new(config(1, 3), st.clone()),
        Err(Error::InvalidPersistedState(_))
    ));
    st.entries.clear();
    st.hard_state.current_epoch = 2;
    assert!(matches!(
        RawNode::new(config(1, 3), st),
        Err(Error::InvalidPersistedState(_))
    ));
    assert!(matches!(
        RawNode::new(config(9, 3), PersistedState::default()),
        Err(Error::Config(_))
    ));
}

// ---- robustness -------------------------------------------------------------------------

#[test]
fn rejects_impossible_messages_without_effect() {
    let mut e = established();
    let n = e.node(1);
    let ping = MessageBody::PingAck {
        epoch: 1,
        read_seq: 0,
    };
    assert_eq!(
        n.step(msg(3, 2, ping.clone())),
        Err(Error::WrongRecipient { to: 2, me: 1 })
    );
    assert_eq!(n.step(msg(7, 1, ping.clone())), Err(Error::UnknownPeer(7)));
    assert_eq!(n.step(msg(1, 1, ping)), Err(Error::UnknownPeer(1)));
    let bad_vote = MessageBody::Notification {
        vote: Vote {
            epoch: 1,
            zxid: Zxid::ZERO,
            leader: 9,
        },
        round: 1,
        state: Role::Looking,
    };
    assert!(matches!(
        n.step(msg(2, 1, bad_vote)),
        Err(Error::Malformed(_))
    ));
    let disorder = MessageBody::Propose {
        epoch: 1,
        prev: Zxid::ZERO,
        proposals: vec![prop(1, 2), prop(1, 1)],
        commit: Zxid::ZERO,
    };
    assert!(matches!(
        n.step(msg(3, 1, disorder)),
        Err(Error::Malformed(_))
    ));
    assert_eq!(n.status().last_zxid, Zxid::ZERO);
}

/// Random garbage from every peer to nodes in every role: errors are fine,
/// panics are not.
#[test]
fn random_messages_never_panic() {
    let mut seed = 0x1234_5678_9abc_def0_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    };
    let mut e = established();
    e.tolerate = true;
    for _ in 0..4000 {
        let zx = Zxid::new(next(4) as u32, next(4) as u32);
        let ps = (0..next(3))
            .map(|k| prop(next(4) as u32, k as u32 + next(3) as u32))
            .collect();
        let epoch = next(4) as u32;
        let round = next(4);
        let body = match next(15) {
            0 => MessageBody::Notification {
                vote: Vote {
                    epoch,
                    zxid: zx,
                    leader: 1 + next(3),
                },
                round,
                state: [Role::Looking, Role::Following, Role::Leading][next(3) as usize],
            },
            1 => MessageBody::FollowerInfo {
                accepted_epoch: epoch,
                round,
            },
            2 => MessageBody::NewEpoch { epoch, round },
            3 => MessageBody::AckEpoch {
                epoch,
                round,
                fresh: next(2) == 0,
                current_epoch: epoch,
                last_zxid: zx,
            },
            4 => MessageBody::NewLeader {
                epoch,
                round,
                sync_id: next(4),
                sync: match next(3) {
                    0 => SyncKind::Diff { from: zx },
                    1 => SyncKind::Trunc { to: zx },
                    _ => SyncKind::Snap(Snapshot {
                        zxid: zx,
                        data: vec![],
                    }),
                },
                proposals: ps,
                last_zxid: zx,
                commit: zx,
            },
            5 => MessageBody::AckNewLeader {
                epoch,
                round,
                sync_id: next(4),
                last_zxid: zx,
            },
            6 => MessageBody::UpToDate { epoch, commit: zx },
            7 => MessageBody::Propose {
                epoch,
                prev: zx,
                proposals: ps,
                commit: zx,
            },
            8 => MessageBody::Ack { epoch, zxid: zx },
            9 => MessageBody::Nack {
                epoch,
                last_zxid: zx,
            },
            10 => MessageBody::Commit { epoch, zxid: zx },
            11 => MessageBody::Ping {
                epoch,
                commit: zx,
                read_seq: next(3),
            },
            12 => MessageBody::PingAck {
                epoch,
                read_seq: next(3),
            },
            13 => MessageBody::SyncRequest {
                epoch,
                ctx: next(5),
            },
            _ => MessageBody::SyncResponse {
                epoch,
                ctx: next(5),
                zxid: zx,
            },
        };
        let to = 1 + next(3);
        let from = 1 + (to + next(2)) % 3;
        let _ = e.node(to).step(msg(from, to, body));
        if next(10) == 0 {
            e.tick(1);
        }
        if next(50) == 0 {
            let _ = e.node(to).sync_read(next(100));
            let _ = e.node(to).propose(vec![1]);
        }
        e.settle();
    }
}
