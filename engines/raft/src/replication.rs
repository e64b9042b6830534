//! Log replication. Leader side: pipelined, batched AppendEntries driven by
//! each follower's `Progress`, snapshots for followers behind the compaction
//! point, heartbeats, commitment. Follower side: accepting or rejecting
//! appends (with a backtracking hint), heartbeats and snapshots.

use crate::error::Error;
use crate::message::{Entry, MessageBody, NodeId, RejectHint, Snapshot};
use crate::progress::ProgressState;
use crate::quorum;
use crate::raft::Raft;

impl Raft {
    // ---- leader: sending --------------------------------------------------------

    pub(crate) fn bcast_append(&mut self, allow_empty: bool) {
        let peers: Vec<NodeId> = self.peers().collect();
        for p in peers {
            self.send_appends(p, allow_empty);
        }
    }

    /// Sends as much as flow control allows: one message in Probe, up to the
    /// inflight window in Replicate. `allow_empty` permits a first message
    /// without entries (to carry the commit index or re-probe a follower).
    pub(crate) fn send_appends(&mut self, to: NodeId, allow_empty: bool) {
        let mut allow_empty = allow_empty;
        // Bounded by the window; the guard only protects against a bug
        // turning this into an endless loop.
        for _ in 0..=self.cfg.max_inflight_msgs {
            if !self.send_append(to, allow_empty) {
                break;
            }
            allow_empty = false;
        }
    }

    /// Sends one AppendEntries (or an InstallSnapshot). Returns true if it
    /// carried entries and the follower is pipelined, i.e. more may follow.
    fn send_append(&mut self, to: NodeId, allow_empty: bool) -> bool {
        let snap_index = self.log.snapshot_index();
        let commit = self.log.committed;
        let max = self.cfg.max_entries_per_msg;
        let Some(pr) = self.progress.get(&to) else {
            return false;
        };
        if pr.is_paused() {
            return false;
        }
        let prev_index = pr.next - 1;
        if prev_index < snap_index {
            self.send_snapshot(to);
            return false;
        }
        let Some(prev_term) = self.log.term(prev_index) else {
            // next is never past last + 1 for a leader; resynchronise anyway.
            if let Some(pr) = self.progress.get_mut(&to) {
                pr.become_probe();
            }
            return false;
        };
        let entries = self.log.entries_from(prev_index + 1, max);
        if entries.is_empty() && !allow_empty {
            return false;
        }
        let last = entries.last().map(|e| e.index);
        let Some(pr) = self.progress.get_mut(&to) else {
            return false;
        };
        let more = match pr.state {
            ProgressState::Replicate => match last {
                Some(last) => {
                    // Optimistic: assume it will be accepted.
                    pr.next = last + 1;
                    pr.inflights.add(last);
                    true
                }
                None => false,
            },
            ProgressState::Probe => {
                pr.probe_sent = true;
                false
            }
            ProgressState::Snapshot { .. } => false,
        };
        self.send(
            to,
            MessageBody::AppendEntries {
                prev_index,
                prev_term,
                entries,
                commit,
            },
        );
        more
    }

    fn send_snapshot(&mut self, to: NodeId) {
        let Some(snapshot) = self.log.snapshot().cloned() else {
            return;
        };
        if let Some(pr) = self.progress.get_mut(&to) {
            pr.become_snapshot(snapshot.index);
        }
        self.send(to, MessageBody::InstallSnapshot { snapshot });
    }

    pub(crate) fn bcast_heartbeat(&mut self) {
        let read_seq = self.read_only.pending_seq();
        let commit = self.log.committed;
        let targets: Vec<(NodeId, u64)> = self
            .progress
            .iter()
            .map(|(&id, pr)| (id, pr.matched.min(commit)))
            .collect();
        for (to, commit) in targets {
            self.send(to, MessageBody::Heartbeat { commit, read_seq });
        }
    }

    /// Advances the commit index to the highest index durable on a majority
    /// (counting our own copy only once durable) if that entry is from the
    /// current term, then tells the followers.
    pub(crate) fn maybe_commit(&mut self) -> bool {
        let mut matched: Vec<u64> = self.progress.values().map(|p| p.matched).collect();
        matched.push(self.log.persisted);
        let index = quorum::committed_index(matched);
        if index <= self.log.committed || self.log.term(index) != Some(self.term) {
            return false;
        }
        self.log.commit_to(index);
        self.bcast_append(true);
        true
    }

    // ---- leader: answers ---------------------------------------------------------

    pub(crate) fn handle_append_response(
        &mut self,
        from: NodeId,
        index: u64,
        reject: Option<RejectHint>,
    ) {
        let last_index = self.log.last_index();
        let Some(pr) = self.progress.get_mut(&from) else {
            return;
        };
        pr.recent_active = true;
        match reject {
            None => {
                if index > last_index {
                    // Claims entries we never sent: ignore.
                    return;
                }
                let was_probe = pr.state == ProgressState::Probe;
                if !(pr.maybe_update(index) || (was_probe && pr.matched == index)) {
                    return;
                }
                match pr.state {
                    ProgressState::Probe => pr.become_replicate(),
                    ProgressState::Snapshot { pending } => {
                        if pr.matched >= pending {
                            pr.become_probe();
                        }
                    }
                    ProgressState::Replicate => pr.inflights.free_to(index),
                }
                let matched = pr.matched;
                if !self.maybe_commit() {
                    self.send_appends(from, false);
                }
                if self.transferee == Some(from) && matched == self.log.last_index() {
                    self.send(from, MessageBody::TimeoutNow);
                }
            }
            Some(hint) => {
                // Jump over the whole conflicting term instead of one entry.
                let probe_at = match self.log.find_conflict_by_term(hint.index, hint.term) {
                    (i, _) if hint.term > 0 => i,
                    _ => hint.index,
                };
                let Some(pr) = self.progress.get_mut(&from) else {
                    return;
                };
                if pr.maybe_decr_to(index, probe_at) {
                    if pr.state == ProgressState::Replicate {
                        pr.become_probe();
                    }
                    self.send_appends(from, true);
                }
            }
        }
    }

    pub(crate) fn handle_heartbeat_response(&mut self, from: NodeId, read_seq: u64) {
        let last_index = self.log.last_index();
        let quorum = self.quorum();
        let Some(pr) = self.progress.get_mut(&from) else {
            return;
        };
        pr.recent_active = true;
        // The follower is reachable: an unanswered probe or a full window
        // probably means lost appends, so let one more through.
        pr.probe_sent = false;
        if pr.state == ProgressState::Replicate && pr.inflights.full() {
            pr.inflights.free_first();
        }
        if pr.matched < last_index {
            self.send_appends(from, true);
        }
        self.read_only.ack(from, read_seq, quorum);
    }

    pub(crate) fn handle_snapshot_response(&mut self, from: NodeId, index: u64) {
        let last_index = self.log.last_index();
        let Some(pr) = self.progress.get_mut(&from) else {
            return;
        };
        pr.recent_active = true;
        if index > last_index {
            return;
        }
        pr.maybe_update(index);
        if let ProgressState::Snapshot { .. } = pr.state {
            pr.become_probe();
        }
        if !self.maybe_commit() {
            self.send_appends(from, false);
        }
    }

    // ---- follower ------------------------------------------------------------------

    pub(crate) fn handle_append(
        &mut self,
        from: NodeId,
        term: u64,
        prev_index: u64,
        prev_term: u64,
        entries: Vec<Entry>,
        leader_commit: u64,
    ) -> Result<(), Error> {
        validate_entries(term, prev_index, prev_term, &entries)?;
        let committed = self.log.committed;
        let (mut prev_i, mut prev_t, mut entries) = (prev_index, prev_term, entries);
        if prev_i < committed {
            // Our committed prefix equals the leader's (leader completeness),
            // so skip it; this also covers a prev_index we compacted away.
            entries.retain(|e| e.index > committed);
            prev_i = committed;
            prev_t = self.log.term(committed).unwrap_or_default();
        }
        if !self.log.match_term(prev_i, prev_t) {
            let (hint_index, hint_term) = self
                .log
                .find_conflict_by_term(prev_i.min(self.log.last_index()), prev_t);
            let hint = RejectHint {
                index: hint_index,
                term: hint_term.unwrap_or(0),
            };
            self.send_after_persist(
                from,
                MessageBody::AppendResponse {
                    index: prev_i,
                    reject: Some(hint),
                },
            );
            return Ok(());
        }
        let last_new = prev_i + entries.len() as u64;
        // Only write from the first entry we do not already have: a
        // duplicated or reordered old append must not truncate newer entries.
        let conflict = entries
            .iter()
            .position(|e| !self.log.match_term(e.index, e.term));
        if let Some(k) = conflict {
            if !self.log.truncate_and_append(&entries[k..]) {
                // Would overwrite a committed entry: impossible for a valid
                // leader, so refuse the message.
                return Err(Error::Malformed("append conflicts with committed entries"));
            }
        }
        self.log.commit_to(leader_commit.min(last_new));
        self.send_after_persist(
            from,
            MessageBody::AppendResponse {
                index: last_new,
                reject: None,
            },
        );
        Ok(())
    }

    pub(crate) fn handle_heartbeat(&mut self, from: NodeId, commit: u64, read_seq: u64) {
        // The leader capped `commit` at what it knows we hold.
        self.log.commit_to(commit);
        self.send(from, MessageBody::HeartbeatResponse { read_seq });
    }

    pub(crate) fn handle_snapshot(
        &mut self,
        from: NodeId,
        term: u64,
        snapshot: Snapshot,
    ) -> Result<(), Error> {
        if snapshot.index == 0 || snapshot.index > MAX_INDEX || snapshot.term > term {
            return Err(Error::Malformed("snapshot index 0 or from a future term"));
        }
        if snapshot.index <= self.log.committed {
            // Already have all of it.
        } else if self.log.match_term(snapshot.index, snapshot.term) {
            // Our log already contains the snapshot's last entry: keep the
            // log and just learn that it is committed.
            self.log.commit_to(snapshot.index);
        } else {
            self.log.restore(snapshot);
        }
        let index = self.log.committed;
        self.send_after_persist(from, MessageBody::SnapshotResponse { index });
        Ok(())
    }
}

/// Log indexes above this are refused, so index arithmetic cannot overflow.
const MAX_INDEX: u64 = u64::MAX / 2;

/// Rejects appends that no correct leader could have sent.
fn validate_entries(
    term: u64,
    prev_index: u64,
    prev_term: u64,
    entries: &[Entry],
) -> Result<(), Error> {
    if prev_term > term {
        return Err(Error::Malformed("prev_term from a future term"));
    }
    if prev_index.saturating_add(entries.len() as u64) > MAX_INDEX {
        return Err(Error::Malformed("log index out of range"));
    }
    let mut expect = prev_index;
    let mut last_term = prev_term;
    for e in entries {
        expect = expect
            .checked_add(1)
            .ok_or(Error::Malformed("entry index overflow"))?;
        if e.index != expect {
            return Err(Error::Malformed("entries are not contiguous"));
        }
        if e.term < last_term || e.term > term {
            return Err(Error::Malformed("entry terms out of order"));
        }
        last_term = e.term;
    }
    Ok(())
}
