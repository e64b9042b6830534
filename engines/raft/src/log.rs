//! The in-memory view of the replicated log: a compaction offset (the latest
//! snapshot) followed by entries, plus the bookkeeping that tells which
//! entries are durable, which still have to be handed to the runtime for
//! persistence, and which are committed / applied.
//!
//! Index invariants (`s` = snapshot index):
//! `s <= applied <= applying`, `applied <= committed <= last_index`,
//! `persisted < unstable_from <= last_index + 1`.

use bytes::Bytes;

use crate::error::Error;
use crate::message::{Entry, Snapshot};

#[derive(Debug)]
pub(crate) struct RaftLog {
    /// Latest snapshot (taken locally or received); `None` only while the log
    /// has never been compacted, i.e. `snap_index == 0`.
    snapshot: Option<Snapshot>,
    snap_index: u64,
    snap_term: u64,
    /// `entries[k].index == snap_index + 1 + k`.
    entries: Vec<Entry>,
    pub(crate) committed: u64,
    /// Highest index the runtime confirmed applied (via `advance`).
    pub(crate) applied: u64,
    /// Highest index handed out in `committed_entries`, maybe not yet applied.
    applying: u64,
    /// Highest index known durable with the same content as in memory.
    pub(crate) persisted: u64,
    /// First index not yet handed to the runtime for persistence.
    unstable_from: u64,
    /// A received snapshot that still has to be handed to the runtime.
    snapshot_unstable: bool,
    /// Index of a snapshot handed to the runtime but not yet confirmed.
    snapshot_in_flight: Option<u64>,
}

impl RaftLog {
    /// Rebuilds the log from what the runtime persisted. Everything given is
    /// durable; the state machine is assumed restored from `snapshot`.
    pub(crate) fn restore_from(
        snapshot: Option<Snapshot>,
        entries: Vec<Entry>,
        commit: u64,
    ) -> Result<Self, Error> {
        let (snap_index, snap_term) = snapshot.as_ref().map_or((0, 0), |s| (s.index, s.term));
        if snapshot.is_some() && snap_index == 0 {
            return Err(Error::InvalidPersistedState(
                "snapshot at index 0".to_string(),
            ));
        }
        let mut prev_term = snap_term;
        for (k, e) in entries.iter().enumerate() {
            if e.index != snap_index + 1 + k as u64 {
                return Err(Error::InvalidPersistedState(format!(
                    "entry at position {k} has index {}, expected {}",
                    e.index,
                    snap_index + 1 + k as u64
                )));
            }
            if e.term < prev_term {
                return Err(Error::InvalidPersistedState(format!(
                    "term decreases at index {}",
                    e.index
                )));
            }
            prev_term = e.term;
        }
        let last = snap_index + entries.len() as u64;
        // The hard state may be written lazily; never trust it beyond the log.
        let committed = commit.clamp(snap_index, last);
        Ok(Self {
            snapshot,
            snap_index,
            snap_term,
            entries,
            committed,
            applied: snap_index,
            applying: snap_index,
            persisted: last,
            unstable_from: last + 1,
            snapshot_unstable: false,
            snapshot_in_flight: None,
        })
    }

    pub(crate) fn snapshot_index(&self) -> u64 {
        self.snap_index
    }

    pub(crate) fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    #[cfg(test)]
    pub(crate) fn first_index(&self) -> u64 {
        self.snap_index + 1
    }

    pub(crate) fn last_index(&self) -> u64 {
        self.snap_index + self.entries.len() as u64
    }

    pub(crate) fn last_term(&self) -> u64 {
        self.entries.last().map_or(self.snap_term, |e| e.term)
    }

    /// Term of the entry at `index`, if this log still knows it.
    pub(crate) fn term(&self, index: u64) -> Option<u64> {
        if index == self.snap_index {
            return Some(self.snap_term);
        }
        self.entry(index).map(|e| e.term)
    }

    pub(crate) fn entry(&self, index: u64) -> Option<&Entry> {
        if index <= self.snap_index {
            return None;
        }
        let pos = usize::try_from(index - self.snap_index - 1).ok()?;
        self.entries.get(pos)
    }

    pub(crate) fn match_term(&self, index: u64, term: u64) -> bool {
        self.term(index) == Some(term)
    }

    /// Raft's voting restriction: is a log ending at (`last_index`,
    /// `last_term`) at least as up to date as ours?
    pub(crate) fn is_up_to_date(&self, last_index: u64, last_term: u64) -> bool {
        let my_term = self.last_term();
        last_term > my_term || (last_term == my_term && last_index >= self.last_index())
    }

    /// Up to `max` entries starting at `lo` (empty if `lo` is compacted or
    /// past the end).
    pub(crate) fn entries_from(&self, lo: u64, max: usize) -> Vec<Entry> {
        if lo <= self.snap_index || lo > self.last_index() {
            return Vec::new();
        }
        let start = (lo - self.snap_index - 1) as usize;
        let end = start.saturating_add(max).min(self.entries.len());
        self.entries[start..end].to_vec()
    }

    /// Largest index `<= index` whose term is `<= term`, with that term if
    /// known. Used on both sides of fast log backtracking.
    pub(crate) fn find_conflict_by_term(&self, index: u64, term: u64) -> (u64, Option<u64>) {
        let mut i = index.min(self.last_index());
        if i < self.snap_index {
            return (i, None);
        }
        loop {
            match self.term(i) {
                Some(t) if t > term && i > self.snap_index => i -= 1,
                t => return (i, t),
            }
        }
    }

    /// Appends an entry created by the leader at `last_index + 1`.
    pub(crate) fn append(&mut self, entry: Entry) {
        debug_assert_eq!(entry.index, self.last_index() + 1);
        self.entries.push(entry);
    }

    /// Writes `ents` (contiguous, first index in `first_index..=last+1`),
    /// discarding any existing suffix from the first index on. Returns false
    /// (and changes nothing) if that would drop a committed entry.
    pub(crate) fn truncate_and_append(&mut self, ents: &[Entry]) -> bool {
        let Some(first) = ents.first().map(|e| e.index) else {
            return true;
        };
        if first <= self.committed || first <= self.snap_index || first > self.last_index() + 1 {
            return false;
        }
        let keep = (first - self.snap_index - 1) as usize;
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            // The overwritten suffix is no longer what is (or will be) on disk.
            self.persisted = self.persisted.min(first - 1);
        }
        self.unstable_from = self.unstable_from.min(first);
        self.entries.extend_from_slice(ents);
        true
    }

    pub(crate) fn commit_to(&mut self, index: u64) -> bool {
        let index = index.min(self.last_index());
        if index > self.committed {
            self.committed = index;
            true
        } else {
            false
        }
    }

    /// Replaces the whole log with a snapshot received from the leader.
    pub(crate) fn restore(&mut self, snapshot: Snapshot) {
        self.snap_index = snapshot.index;
        self.snap_term = snapshot.term;
        self.entries.clear();
        self.committed = snapshot.index;
        self.persisted = self.persisted.min(snapshot.index);
        self.unstable_from = snapshot.index + 1;
        self.snapshot = Some(snapshot);
        self.snapshot_unstable = true;
    }

    /// Discards entries up to `index`, which the state machine captured in
    /// `data`. The runtime stores the snapshot itself.
    pub(crate) fn compact(&mut self, index: u64, data: Bytes) -> Result<(), Error> {
        if self.snapshot_unstable || self.snapshot_in_flight.is_some() {
            return Err(Error::SnapshotInstallPending);
        }
        if index <= self.snap_index {
            return Err(Error::AlreadyCompacted {
                index,
                snapshot_index: self.snap_index,
            });
        }
        if index > self.applied {
            return Err(Error::CompactBeyondApplied {
                index,
                applied: self.applied,
            });
        }
        let Some(term) = self.term(index) else {
            return Err(Error::CompactBeyondApplied {
                index,
                applied: self.applied,
            });
        };
        let drop = (index - self.snap_index) as usize;
        self.entries.drain(..drop);
        self.snap_index = index;
        self.snap_term = term;
        self.snapshot = Some(Snapshot { index, term, data });
        Ok(())
    }

    /// See `RawNode::replace_snapshot_data`. A snapshot received from a leader and not
    /// yet installed is never replaced.
    pub(crate) fn replace_snapshot_data(&mut self, index: u64, term: u64, data: Bytes) -> bool {
        if self.installing_snapshot() {
            return false;
        }
        match &mut self.snapshot {
            Some(s) if s.index == index && s.term == term && s.data.len() == data.len() => {
                s.data = data;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn has_unstable(&self) -> bool {
        self.snapshot_unstable || self.unstable_from <= self.last_index()
    }

    /// Hands out what must be made durable next and marks it as in flight.
    pub(crate) fn take_unstable(&mut self) -> (Option<Snapshot>, Vec<Entry>) {
        let snap = if self.snapshot_unstable {
            self.snapshot_unstable = false;
            self.snapshot_in_flight = Some(self.snap_index);
            self.snapshot.clone()
        } else {
            None
        };
        let ents = self.entries_from(self.unstable_from, usize::MAX);
        self.unstable_from = self.last_index() + 1;
        (snap, ents)
    }

    /// The runtime made the snapshot at `snapshot_index` and entries up to
    /// (`last_index`, `last_term`) durable.
    pub(crate) fn on_persisted(&mut self, snapshot_index: Option<u64>, last: Option<(u64, u64)>) {
        if let Some(s) = snapshot_index {
            if self.snapshot_in_flight == Some(s) {
                self.snapshot_in_flight = None;
            }
            // The runtime installed it: its disk and state machine are at `s`.
            self.persisted = self.persisted.max(s);
            self.applied = self.applied.max(s);
            self.applying = self.applying.max(s);
        }
        if let Some((index, term)) = last {
            // If the suffix was overwritten since it was handed out, what is
            // durable is no longer what we have; wait for the next round.
            if index < self.unstable_from && self.term(index) == Some(term) {
                self.persisted = self.persisted.max(index);
            }
        }
    }

    fn installing_snapshot(&self) -> bool {
        self.snapshot_unstable || self.snapshot_in_flight.is_some()
    }

    /// Committed entries are applied only once durable locally, and not
    /// while a snapshot is replacing the state machine.
    pub(crate) fn has_next_committed(&self) -> bool {
        !self.installing_snapshot() && self.committed.min(self.persisted) > self.applying
    }

    pub(crate) fn take_next_committed(&mut self) -> Vec<Entry> {
        if self.installing_snapshot() {
            return Vec::new();
        }
        let lo = self.applying.max(self.snap_index) + 1;
        let hi = self.committed.min(self.persisted);
        if hi < lo {
            return Vec::new();
        }
        let ents = self.entries_from(lo, (hi - lo + 1) as usize);
        if let Some(e) = ents.last() {
            self.applying = e.index;
        }
        ents
    }

    pub(crate) fn applied_to(&mut self, index: u64) {
        self.applied = self.applied.max(index.min(self.applying));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::EntryKind;

    fn ent(index: u64, term: u64) -> Entry {
        Entry {
            term,
            index,
            kind: EntryKind::Normal(vec![index as u8]),
        }
    }

    fn log_with(terms: &[u64]) -> RaftLog {
        let ents = terms
            .iter()
            .enumerate()
            .map(|(k, t)| ent(k as u64 + 1, *t))
            .collect();
        RaftLog::restore_from(None, ents, 0).unwrap()
    }

    #[test]
    fn restore_rejects_gaps_and_clamps_commit() {
        let bad = RaftLog::restore_from(None, vec![ent(1, 1), ent(3, 1)], 0);
        assert!(matches!(bad, Err(Error::InvalidPersistedState(_))));
        let l = RaftLog::restore_from(None, vec![ent(1, 1)], 99).unwrap();
        assert_eq!(l.committed, 1);
        assert_eq!(l.persisted, 1);
    }

    #[test]
    fn find_conflict_by_term_skips_whole_terms() {
        let l = log_with(&[1, 1, 2, 2, 2, 4, 4]);
        assert_eq!(l.find_conflict_by_term(7, 3), (5, Some(2)));
        assert_eq!(l.find_conflict_by_term(7, 1), (2, Some(1)));
        assert_eq!(l.find_conflict_by_term(100, 4), (7, Some(4)));
        assert_eq!(l.find_conflict_by_term(7, 0), (0, Some(0)));
    }

    #[test]
    fn truncation_resets_persisted_and_unstable() {
        let mut l = log_with(&[1, 1, 1]);
        assert!(!l.has_unstable());
        assert!(l.truncate_and_append(&[ent(2, 2), ent(3, 2)]));
        assert_eq!(l.persisted, 1);
        let (_, ents) = l.take_unstable();
        assert_eq!(ents.iter().map(|e| e.index).collect::<Vec<_>>(), vec![2, 3]);
        l.on_persisted(None, Some((3, 2)));
        assert_eq!(l.persisted, 3);
    }

    #[test]
    fn stale_persist_ack_is_ignored_after_overwrite() {
        let mut l = log_with(&[1]);
        l.append(ent(2, 1));
        l.append(ent(3, 1));
        let (_, ents) = l.take_unstable();
        assert_eq!(ents.len(), 2);
        // A new leader overwrites index 3 before the write completes.
        assert!(l.truncate_and_append(&[ent(3, 2)]));
        l.on_persisted(None, Some((3, 1)));
        assert_eq!(
            l.persisted, 1,
            "overwritten entry must not count as durable"
        );
        let (_, ents) = l.take_unstable();
        assert_eq!(ents, vec![ent(3, 2)]);
        l.on_persisted(None, Some((3, 2)));
        assert_eq!(l.persisted, 3);
    }

    #[test]
    fn never_truncates_committed_entries() {
        let mut l = log_with(&[1, 1, 1]);
        l.commit_to(2);
        assert!(!l.truncate_and_append(&[ent(2, 2)]));
        assert_eq!(l.last_index(), 3);
    }

    #[test]
    fn committed_entries_wait_for_durability() {
        let mut l = log_with(&[1]);
        l.append(ent(2, 1));
        l.commit_to(2);
        assert_eq!(l.take_next_committed(), vec![ent(1, 1)]);
        assert!(!l.has_next_committed());
        let _ = l.take_unstable();
        l.on_persisted(None, Some((2, 1)));
        assert!(l.has_next_committed());
        assert_eq!(l.take_next_committed(), vec![ent(2, 1)]);
        l.applied_to(2);
        assert_eq!(l.applied, 2);
    }

    #[test]
    fn compaction_keeps_terms_and_rejects_bad_indexes() {
        let mut l = log_with(&[1, 1, 2, 2]);
        l.commit_to(4);
        let _ = l.take_next_committed();
        l.applied_to(3);
        assert!(matches!(
            l.compact(4, Bytes::new()),
            Err(Error::CompactBeyondApplied { .. })
        ));
        l.compact(3, Bytes::from_static(b"sm")).unwrap();
        assert_eq!(l.first_index(), 4);
        assert_eq!(l.term(3), Some(2));
        assert_eq!(l.term(2), None);
        assert_eq!(l.entries_from(3, 10), vec![]);
        assert_eq!(l.entries_from(4, 10), vec![ent(4, 2)]);
        assert!(matches!(
            l.compact(2, Bytes::new()),
            Err(Error::AlreadyCompacted { .. })
        ));
    }

    #[test]
    fn kept_snapshot_data_is_replaced_only_by_the_same_snapshot() {
        let mut l = log_with(&[1, 1, 2]);
        l.commit_to(3);
        let _ = l.take_next_committed();
        l.applied_to(3);
        l.compact(3, Bytes::from(b"sm@3".to_vec())).unwrap();
        let stored = Bytes::from(b"sm@3".to_vec());
        assert!(
            !l.replace_snapshot_data(2, 1, stored.clone()),
            "other index"
        );
        assert!(!l.replace_snapshot_data(3, 1, stored.clone()), "other term");
        assert!(
            !l.replace_snapshot_data(3, 2, Bytes::from_static(b"sm")),
            "other length"
        );
        assert!(l.replace_snapshot_data(3, 2, stored.clone()));
        let kept = l.snapshot().map(|s| s.data.clone()).unwrap();
        assert_eq!(kept.as_ptr(), stored.as_ptr(), "the stored copy is kept");
        l.restore(Snapshot {
            index: 9,
            term: 3,
            data: Bytes::from_static(b"sm@9"),
        });
        assert!(
            !l.replace_snapshot_data(9, 3, Bytes::from_static(b"xx@9")),
            "a received snapshot not yet installed stays"
        );
    }

    #[test]
    fn restore_from_snapshot_blocks_apply_until_installed() {
        let mut l = log_with(&[1, 1]);
        l.restore(Snapshot {
            index: 10,
            term: 3,
            data: Bytes::new(),
        });
        assert_eq!((l.first_index(), l.last_index(), l.committed), (11, 10, 10));
        assert!(!l.has_next_committed());
        let (snap, ents) = l.take_unstable();
        assert_eq!(snap.map(|s| s.index), Some(10));
        assert!(ents.is_empty());
        l.on_persisted(Some(10), None);
        assert_eq!((l.applied, l.persisted), (10, 10));
        assert!(!l.has_next_committed());
    }
}
