//! The in-memory view of the history: a compaction point (the latest
//! snapshot) followed by proposals in zxid order, plus the bookkeeping that
//! tells which proposals are durable, which still have to be handed to the
//! runtime for persistence (with any truncation or snapshot install), and
//! which are committed / applied.
//!
//! Zxid invariants (`s` = snapshot zxid): `s <= applied <= applying <=
//! committed <= last`, `applying <= persisted <= last`; every proposal at or
//! below `stable` was handed to the runtime.

use crate::error::Error;
use crate::message::{Proposal, Snapshot};
use crate::zxid::Zxid;

#[derive(Debug)]
pub(crate) struct ZabLog {
    /// Latest snapshot (taken locally or received); `None` only while the
    /// history has never been compacted, i.e. `snap_zxid == ZERO`.
    snapshot: Option<Snapshot>,
    snap_zxid: Zxid,
    /// Strictly increasing zxids, all above `snap_zxid`.
    entries: Vec<Proposal>,
    /// Every proposal at or below this bound is committed.
    pub(crate) committed: Zxid,
    /// Highest zxid the runtime confirmed applied (via `advance`).
    pub(crate) applied: Zxid,
    /// Highest zxid handed out in `committed_entries`, maybe not yet applied.
    applying: Zxid,
    /// Every proposal at or below this bound is durable with the content it
    /// has in memory.
    pub(crate) persisted: Zxid,
    /// Every proposal at or below this bound was handed to the runtime.
    stable: Zxid,
    /// Lowest truncation point not yet handed to the runtime.
    pending_truncate: Option<Zxid>,
    /// A received snapshot that still has to be handed to the runtime.
    snapshot_unstable: bool,
    /// Zxid of a snapshot handed to the runtime but not yet confirmed.
    snapshot_in_flight: Option<Zxid>,
    /// Bumped whenever proposals are discarded (truncation, snapshot
    /// install): a persistence report taken before that says nothing about
    /// the current history.
    generation: u64,
    /// The generation of the last persistence report: equal to
    /// `generation` once the latest discarding is durable.
    durable_generation: u64,
}

impl ZabLog {
    /// Rebuilds the log from what the runtime persisted. Everything given is
    /// durable; the state machine is assumed restored from `snapshot`.
    pub(crate) fn restore_from(
        snapshot: Option<Snapshot>,
        entries: Vec<Proposal>,
        commit: Zxid,
    ) -> Result<Self, Error> {
        let snap_zxid = snapshot.as_ref().map_or(Zxid::ZERO, |s| s.zxid);
        if snapshot.is_some() && snap_zxid == Zxid::ZERO {
            return Err(Error::InvalidPersistedState(
                "snapshot at zxid 0".to_string(),
            ));
        }
        let mut prev = snap_zxid;
        for p in &entries {
            if p.zxid <= prev {
                return Err(Error::InvalidPersistedState(format!(
                    "proposal {} does not follow {prev}",
                    p.zxid
                )));
            }
            prev = p.zxid;
        }
        // The hard state may be written lazily; never trust it beyond the log.
        let committed = commit.min(prev).max(snap_zxid);
        Ok(Self {
            snapshot,
            snap_zxid,
            entries,
            committed,
            applied: snap_zxid,
            applying: snap_zxid,
            persisted: prev,
            stable: prev,
            pending_truncate: None,
            snapshot_unstable: false,
            snapshot_in_flight: None,
            generation: 0,
            durable_generation: 0,
        })
    }

    pub(crate) fn snapshot_zxid(&self) -> Zxid {
        self.snap_zxid
    }

    pub(crate) fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    pub(crate) fn last_zxid(&self) -> Zxid {
        self.entries.last().map_or(self.snap_zxid, |p| p.zxid)
    }

    pub(crate) fn entries(&self) -> &[Proposal] {
        &self.entries
    }

    /// Position of the first proposal above `z`.
    fn after(&self, z: Zxid) -> usize {
        self.entries.partition_point(|p| p.zxid <= z)
    }

    pub(crate) fn entry(&self, z: Zxid) -> Option<&Proposal> {
        self.entries
            .binary_search_by_key(&z, |p| p.zxid)
            .ok()
            .map(|k| &self.entries[k])
    }

    /// Is `z` a point of this history (a held proposal, the snapshot, or
    /// the empty history's ZERO)?
    pub(crate) fn contains(&self, z: Zxid) -> bool {
        z == self.snap_zxid || self.entry(z).is_some()
    }

    /// Largest point of this history `<= z`; `None` if compacted away.
    pub(crate) fn floor(&self, z: Zxid) -> Option<Zxid> {
        if z < self.snap_zxid {
            return None;
        }
        match self.after(z) {
            0 => Some(self.snap_zxid),
            k => Some(self.entries[k - 1].zxid),
        }
    }

    /// Up to `max` proposals following the point `z`; `None` if `z` is not
    /// a point of this history (compacted or never held).
    pub(crate) fn entries_after(&self, z: Zxid, max: usize) -> Option<Vec<Proposal>> {
        if !self.contains(z) {
            return None;
        }
        let start = self.after(z);
        let end = start.saturating_add(max).min(self.entries.len());
        Some(self.entries[start..end].to_vec())
    }

    /// Appends a proposal created by this node as leader.
    pub(crate) fn append(&mut self, p: Proposal) {
        debug_assert!(p.zxid > self.last_zxid());
        self.entries.push(p);
    }

    /// Appends the proposals above the current last zxid (callers checked
    /// that the ones at or below it are already held).
    pub(crate) fn append_new(&mut self, ps: Vec<Proposal>) {
        let last = self.last_zxid();
        self.entries
            .extend(ps.into_iter().filter(|p| p.zxid > last));
    }

    /// Discards every proposal after the point `t` (callers checked that
    /// none of them is committed).
    pub(crate) fn truncate_after(&mut self, t: Zxid) {
        let keep = self.after(t);
        if keep == self.entries.len() {
            return;
        }
        self.entries.truncate(keep);
        self.generation += 1;
        self.persisted = self.persisted.min(t);
        self.stable = self.stable.min(t);
        self.pending_truncate = Some(self.pending_truncate.map_or(t, |p| p.min(t)));
    }

    /// Replaces the whole history with a snapshot received from the leader
    /// (callers checked it is ahead of what was applied).
    pub(crate) fn install(&mut self, snapshot: Snapshot) {
        self.snap_zxid = snapshot.zxid;
        self.entries.clear();
        self.committed = snapshot.zxid;
        self.persisted = self.persisted.min(snapshot.zxid);
        self.stable = snapshot.zxid;
        self.pending_truncate = None;
        self.snapshot = Some(snapshot);
        self.snapshot_unstable = true;
        self.generation += 1;
    }

    pub(crate) fn commit_to(&mut self, z: Zxid) -> bool {
        let z = z.min(self.last_zxid());
        if z > self.committed {
            self.committed = z;
            true
        } else {
            false
        }
    }

    /// Discards proposals up to `z`, which the state machine captured in
    /// `data`. The runtime stores the snapshot itself.
    pub(crate) fn compact(&mut self, z: Zxid, data: Vec<u8>) -> Result<(), Error> {
        if self.installing_snapshot() {
            return Err(Error::SnapshotInstallPending);
        }
        if z <= self.snap_zxid {
            return Err(Error::AlreadyCompacted {
                zxid: z,
                snapshot: self.snap_zxid,
            });
        }
        if z > self.applied {
            return Err(Error::CompactBeyondApplied {
                zxid: z,
                applied: self.applied,
            });
        }
        if self.entry(z).is_none() {
            return Err(Error::CompactNotInLog { zxid: z });
        }
        let drop = self.after(z);
        self.entries.drain(..drop);
        self.snap_zxid = z;
        self.snapshot = Some(Snapshot { zxid: z, data });
        Ok(())
    }

    pub(crate) fn has_unstable(&self) -> bool {
        self.snapshot_unstable || self.pending_truncate.is_some() || self.last_zxid() > self.stable
    }

    /// Hands out what must be made durable next (snapshot to install,
    /// truncation point, proposals to append) and marks it as in flight.
    pub(crate) fn take_unstable(&mut self) -> (Option<Snapshot>, Option<Zxid>, Vec<Proposal>) {
        let snap = if self.snapshot_unstable {
            self.snapshot_unstable = false;
            self.snapshot_in_flight = Some(self.snap_zxid);
            self.snapshot.clone()
        } else {
            None
        };
        let trunc = self.pending_truncate.take();
        let start = self.after(self.stable);
        let ents = self.entries[start..].to_vec();
        self.stable = self.last_zxid();
        (snap, trunc, ents)
    }

    /// What a Ready handing out the current history makes durable.
    pub(crate) fn mark(&self) -> (u64, Zxid) {
        (self.generation, self.last_zxid())
    }

    /// The runtime made the snapshot at `snapshot` and the history as of
    /// `mark` durable.
    pub(crate) fn on_persisted(&mut self, snapshot: Option<Zxid>, mark: Option<(u64, Zxid)>) {
        if let Some(s) = snapshot {
            if self.snapshot_in_flight == Some(s) {
                self.snapshot_in_flight = None;
            }
            // The runtime installed it: its disk and state machine are at `s`.
            if s == self.snap_zxid {
                self.persisted = self.persisted.max(s);
                self.applied = self.applied.max(s);
                self.applying = self.applying.max(s);
            }
        }
        if let Some((generation, z)) = mark {
            // Proposals discarded since then may still be on disk, but what is
            // there is no longer a prefix of this history: wait for the
            // report of the Ready that carried the discarding.
            if generation == self.generation {
                self.persisted = self.persisted.max(z.min(self.last_zxid()));
                self.durable_generation = generation;
            }
        }
    }

    /// Is the whole history durable exactly as held (appends, truncations
    /// and snapshot install included)?
    pub(crate) fn history_durable(&self) -> bool {
        self.persisted >= self.last_zxid()
            && self.durable_generation == self.generation
            && !self.installing_snapshot()
    }

    pub(crate) fn installing_snapshot(&self) -> bool {
        self.snapshot_unstable || self.snapshot_in_flight.is_some()
    }

    /// Bound of what may be applied: committed and durable locally.
    fn apply_bound(&self) -> Zxid {
        self.committed.min(self.persisted)
    }

    /// Committed proposals are applied only once durable locally, and not
    /// while a snapshot is replacing the state machine.
    pub(crate) fn has_next_committed(&self) -> bool {
        if self.installing_snapshot() {
            return false;
        }
        let start = self.after(self.applying.max(self.snap_zxid));
        self.entries
            .get(start)
            .is_some_and(|p| p.zxid <= self.apply_bound())
    }

    pub(crate) fn take_next_committed(&mut self) -> Vec<Proposal> {
        if self.installing_snapshot() {
            return Vec::new();
        }
        let start = self.after(self.applying.max(self.snap_zxid));
        let end = self.after(self.apply_bound()).max(start);
        let ents = self.entries[start..end].to_vec();
        if let Some(p) = ents.last() {
            self.applying = p.zxid;
        }
        ents
    }

    pub(crate) fn applied_to(&mut self, z: Zxid) {
        self.applied = self.applied.max(z.min(self.applying));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(epoch: u32, counter: u32) -> Proposal {
        Proposal {
            zxid: Zxid::new(epoch, counter),
            data: vec![epoch as u8, counter as u8],
        }
    }

    fn log_with(ps: &[(u32, u32)]) -> ZabLog {
        let ents = ps.iter().map(|&(e, c)| p(e, c)).collect();
        ZabLog::restore_from(None, ents, Zxid::ZERO).unwrap()
    }

    #[test]
    fn restore_rejects_disorder_and_clamps_commit() {
        let bad = ZabLog::restore_from(None, vec![p(1, 2), p(1, 1)], Zxid::ZERO);
        assert!(matches!(bad, Err(Error::InvalidPersistedState(_))));
        let l = ZabLog::restore_from(None, vec![p(1, 1)], Zxid::new(9, 9)).unwrap();
        assert_eq!(l.committed, Zxid::new(1, 1));
        assert_eq!(l.persisted, Zxid::new(1, 1));
        assert!(!l.has_unstable());
    }

    #[test]
    fn floor_and_entries_after_follow_history_points() {
        let l = log_with(&[(1, 1), (1, 2), (3, 1)]);
        assert_eq!(l.floor(Zxid::new(2, 9)), Some(Zxid::new(1, 2)));
        assert_eq!(l.floor(Zxid::new(1, 0)), Some(Zxid::ZERO));
        assert!(l.contains(Zxid::ZERO));
        assert_eq!(l.entries_after(Zxid::new(1, 1), 10).unwrap().len(), 2);
        assert_eq!(l.entries_after(Zxid::new(1, 3), 10), None);
    }

    #[test]
    fn truncation_is_handed_out_and_stale_persist_reports_ignored() {
        let mut l = log_with(&[(1, 1)]);
        l.append(p(1, 2));
        l.append(p(1, 3));
        let (_, t, ents) = l.take_unstable();
        assert_eq!((t, ents.len()), (None, 2));
        let old_mark = l.mark();
        // A new leader discards 1:2 and 1:3 before that write completes.
        l.truncate_after(Zxid::new(1, 1));
        l.append_new(vec![p(2, 1)]);
        l.on_persisted(None, Some(old_mark));
        assert_eq!(
            l.persisted,
            Zxid::new(1, 1),
            "discarded proposals must not count"
        );
        assert!(!l.history_durable(), "the truncation is not durable yet");
        let (_, t, ents) = l.take_unstable();
        assert_eq!(t, Some(Zxid::new(1, 1)));
        assert_eq!(ents, vec![p(2, 1)]);
        l.on_persisted(None, Some(l.mark()));
        assert_eq!(l.persisted, Zxid::new(2, 1));
        assert!(l.history_durable());
    }

    #[test]
    fn committed_proposals_wait_for_durability() {
        let mut l = log_with(&[(1, 1)]);
        l.append(p(1, 2));
        l.commit_to(Zxid::new(1, 2));
        assert_eq!(l.take_next_committed(), vec![p(1, 1)]);
        assert!(!l.has_next_committed());
        let _ = l.take_unstable();
        l.on_persisted(None, Some(l.mark()));
        assert!(l.has_next_committed());
        assert_eq!(l.take_next_committed(), vec![p(1, 2)]);
        l.applied_to(Zxid::new(1, 2));
        assert_eq!(l.applied, Zxid::new(1, 2));
    }

    #[test]
    fn snapshot_install_blocks_apply_until_persisted() {
        let mut l = log_with(&[(1, 1)]);
        l.install(Snapshot {
            zxid: Zxid::new(2, 5),
            data: b"sm".to_vec(),
        });
        l.append_new(vec![p(2, 6)]);
        l.commit_to(Zxid::new(2, 6));
        assert!(!l.has_next_committed());
        let (snap, t, ents) = l.take_unstable();
        assert_eq!(snap.map(|s| s.zxid), Some(Zxid::new(2, 5)));
        assert_eq!((t, ents), (None, vec![p(2, 6)]));
        assert!(matches!(
            l.compact(Zxid::new(2, 5), vec![]),
            Err(Error::SnapshotInstallPending)
        ));
        l.on_persisted(Some(Zxid::new(2, 5)), Some(l.mark()));
        assert_eq!(l.applied, Zxid::new(2, 5));
        assert_eq!(l.take_next_committed(), vec![p(2, 6)]);
    }

    #[test]
    fn compaction_checks_its_point() {
        let mut l = log_with(&[(1, 1), (1, 2), (2, 1)]);
        l.commit_to(Zxid::new(2, 1));
        let _ = l.take_next_committed();
        l.applied_to(Zxid::new(1, 2));
        assert!(matches!(
            l.compact(Zxid::new(2, 1), vec![]),
            Err(Error::CompactBeyondApplied { .. })
        ));
        assert!(matches!(
            l.compact(Zxid::new(1, 9), vec![]),
            Err(Error::CompactBeyondApplied { .. })
        ));
        assert!(matches!(
            l.compact(Zxid::new(1, 0), vec![]),
            Err(Error::CompactNotInLog { .. })
        ));
        l.compact(Zxid::new(1, 2), b"sm".to_vec()).unwrap();
        assert_eq!(l.snapshot_zxid(), Zxid::new(1, 2));
        assert!(l.contains(Zxid::new(1, 2)));
        assert!(!l.contains(Zxid::new(1, 1)));
        assert_eq!(l.floor(Zxid::new(1, 1)), None);
        assert!(matches!(
            l.compact(Zxid::new(1, 2), vec![]),
            Err(Error::AlreadyCompacted { .. })
        ));
    }
}
