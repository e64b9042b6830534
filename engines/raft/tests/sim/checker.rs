//! Global safety invariants, checked as the simulation runs:
//!
//! * election safety: at most one leader per term;
//! * log matching: an (index, term) pair always names the same command and
//!   the same preceding term, in every log that ever holds it (by induction
//!   this makes the prefixes identical);
//! * leader completeness: an entry committed in term `c` is in the log of
//!   every leader of a term `> c` (checked when a leader appears and when a
//!   commit is observed);
//! * state machine safety: no two nodes apply different entries at an index;
//! * durability of acknowledged writes and linearizable reads.

use std::collections::{BTreeMap, HashMap};

use coordbench_raft::{Entry, EntryKind, RawNode};

use super::state_machine::AppliedLog;

#[derive(Default)]
pub struct Checker {
    leaders: HashMap<u64, u64>,
    /// index -> (entry term, term of the leader that committed it)
    committed: BTreeMap<u64, (u64, u64)>,
    /// Highest index known committed anywhere.
    pub committed_max: u64,
    /// (index, term) -> (command, term of index - 1)
    entries: HashMap<(u64, u64), (EntryKind, u64)>,
    /// What the first node to apply each index applied.
    applied: Vec<(u64, Option<Vec<u8>>)>,
    /// Writes acknowledged to a client: (index, command).
    pub acked: Vec<(u64, Vec<u8>)>,
}

pub struct LeaderView<'a> {
    pub id: u64,
    pub term: u64,
    pub node: &'a RawNode,
}

fn contains(node: &RawNode, index: u64, term: u64) -> bool {
    let st = node.status();
    // Compacted entries were applied, so state machine safety covers them.
    index <= st.snapshot_index || node.term_at(index) == Some(term)
}

impl Checker {
    pub fn elections(&self) -> usize {
        self.leaders.len()
    }

    /// A node reports itself leader of `term`.
    pub fn on_leader(&mut self, id: u64, term: u64, node: &RawNode) -> Result<(), String> {
        match self.leaders.get(&term) {
            Some(&other) if other != id => {
                return Err(format!(
                    "election safety: nodes {other} and {id} both lead term {term}"
                ))
            }
            Some(_) => return Ok(()),
            None => {
                self.leaders.insert(term, id);
            }
        }
        for (&index, &(entry_term, commit_term)) in &self.committed {
            if commit_term < term && !contains(node, index, entry_term) {
                return Err(format!(
                    "leader completeness: new leader {id} of term {term} lacks entry {index} \
                     (term {entry_term}) committed in term {commit_term}; it has term {:?}",
                    node.term_at(index)
                ));
            }
        }
        Ok(())
    }

    /// Leader `id` of `term` has commit index `commit`.
    pub fn on_leader_commit(
        &mut self,
        id: u64,
        term: u64,
        commit: u64,
        node: &RawNode,
        leaders: &[LeaderView<'_>],
    ) -> Result<(), String> {
        if commit <= self.committed_max {
            return Ok(());
        }
        for index in self.committed_max + 1..=commit {
            let Some(entry_term) = node.term_at(index) else {
                continue;
            };
            if let Some(&(t, _)) = self.committed.get(&index) {
                if t != entry_term {
                    return Err(format!(
                        "leader {id} commits ({index}, {entry_term}) but ({index}, {t}) was committed"
                    ));
                }
                continue;
            }
            if let Some((t, _)) = self.applied.get(index as usize - 1) {
                if *t != entry_term {
                    return Err(format!(
                        "leader {id} commits ({index}, {entry_term}) but ({index}, {t}) was applied"
                    ));
                }
            }
            for l in leaders {
                if l.term > term && !contains(l.node, index, entry_term) {
                    return Err(format!(
                        "leader completeness: leader {} of term {} lacks ({index}, {entry_term}) \
                         committed by {id} in term {term}",
                        l.id, l.term
                    ));
                }
            }
            self.committed.insert(index, (entry_term, term));
        }
        self.committed_max = commit;
        Ok(())
    }

    /// `entries` (from one Ready) entered a log whose entry before the first
    /// has term `prev_term`.
    pub fn on_entries(
        &mut self,
        node: u64,
        prev_term: Option<u64>,
        entries: &[Entry],
    ) -> Result<(), String> {
        let mut prev = prev_term;
        for e in entries {
            match (self.entries.get(&(e.index, e.term)), prev) {
                (Some((kind, p)), prev) => {
                    if *kind != e.kind {
                        return Err(format!(
                            "log matching: node {node} holds ({}, {}) = {:?}, elsewhere {:?}",
                            e.index, e.term, e.kind, kind
                        ));
                    }
                    if let Some(prev) = prev {
                        if prev != *p {
                            return Err(format!(
                                "log matching: node {node} has term {prev} before ({}, {}), elsewhere {p}",
                                e.index, e.term
                            ));
                        }
                    }
                }
                (None, Some(prev)) => {
                    self.entries
                        .insert((e.index, e.term), (e.kind.clone(), prev));
                }
                (None, None) => {}
            }
            prev = Some(e.term);
        }
        Ok(())
    }

    fn check_applied_at(
        &mut self,
        node: u64,
        index: u64,
        item: &(u64, Option<Vec<u8>>),
    ) -> Result<(), String> {
        let pos = index as usize - 1;
        match self.applied.get(pos) {
            Some(seen) if seen != item => Err(format!(
                "state machine safety: node {node} applied {item:?} at {index}, another node {seen:?}"
            )),
            Some(_) => Ok(()),
            None if pos == self.applied.len() => {
                if let Some(&(t, _)) = self.committed.get(&index) {
                    if t != item.0 {
                        return Err(format!(
                            "node {node} applied term {} at {index}, committed term is {t}",
                            item.0
                        ));
                    }
                }
                self.applied.push(item.clone());
                Ok(())
            }
            None => Err(format!(
                "node {node} applied index {index} before anyone applied {}",
                self.applied.len() + 1
            )),
        }
    }

    pub fn on_apply(&mut self, node: u64, sm: &AppliedLog) -> Result<(), String> {
        let index = sm.len();
        if let Some(item) = sm.items.last() {
            self.check_applied_at(node, index, item)?;
        }
        Ok(())
    }

    /// A node installed (or restarted from) a snapshot state machine.
    pub fn on_restore(&mut self, node: u64, sm: &AppliedLog) -> Result<(), String> {
        for (k, item) in sm.items.iter().enumerate() {
            self.check_applied_at(node, k as u64 + 1, item)?;
        }
        Ok(())
    }

    pub fn ack(&mut self, index: u64, data: Vec<u8>) {
        self.acked.push((index, data));
    }

    /// Every acknowledged write is in `sm` at its index.
    pub fn check_acked(&self, node: u64, sm: &AppliedLog) -> Result<(), String> {
        for (index, data) in &self.acked {
            match sm.items.get(*index as usize - 1) {
                Some((_, Some(d))) if d == data => {}
                other => {
                    return Err(format!(
                    "acknowledged write lost: node {node} has {other:?} at {index}, acked {data:?}"
                ))
                }
            }
        }
        Ok(())
    }
}
