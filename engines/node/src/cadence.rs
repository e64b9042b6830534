//! When a member snapshots its state machine and compacts its log.
//!
//! Rule: once at least `snapshot_every` entries have been applied since the last snapshot,
//! AND the commands applied since then add up to at least a quarter of that snapshot's
//! size. The first bound keeps snapshots from being taken for every few entries; the second
//! keeps their cost amortized as the state grows (a snapshot serializes the whole state, so
//! it waits for a log proportional to it: serialization per applied byte stays bounded),
//! while the log kept in memory stays small next to the state.
//!
//! The second bound gives way at [`POSTPONE_LIMIT`] times `snapshot_every` entries: past
//! that a snapshot is due whatever the state's size. The log since the last snapshot is
//! what a restart replays, so this caps recovery by the cadence alone (like etcd's entry
//! count), where a state that keeps growing (an MVCC history) would otherwise let the log,
//! and every restart's replay, grow with it.
//!
//! A leader postpones a due snapshot while a live follower still needs entries it would
//! drop (`Core::followers_need_log_through`): that follower would otherwise be sent the
//! whole state, far larger than the log it lacks (at a million revisions, hundreds of MB
//! on both members at once). The wait ends at the same limit ([`SnapshotCadence::overdue`]),
//! so a follower that stays behind cannot make the log grow without end.
//!
//! The count survives restarts: a member starts counting at its recovered snapshot, and
//! the entries it replays past it count as they are applied again, so entries since the
//! snapshot on disk are what is counted. A restarted member's first snapshot is due on the
//! entry count alone (as after an installed snapshot), so one whose replayed log already
//! reached `snapshot_every` snapshots as soon as it has applied it again.

/// The log since the last snapshot must reach 1/`SNAPSHOT_LOG_FRACTION` of that
/// snapshot's size.
pub const SNAPSHOT_LOG_FRACTION: u64 = 4;

/// The most entries since the last snapshot, as a multiple of `snapshot_every`: a snapshot
/// is due there whatever the log's size next to the state, and may no longer be postponed
/// for a lagging follower.
pub const POSTPONE_LIMIT: u64 = 4;

/// Counts what was applied since the last snapshot and says when the next one is due.
#[derive(Debug, Clone)]
pub(crate) struct SnapshotCadence {
    every: u64,
    entries: u64,
    bytes: u64,
    last_len: u64,
}

impl SnapshotCadence {
    /// Counting from the snapshot a member starts (or restarts) from; `every` = 0 disables
    /// snapshots.
    pub(crate) fn new(every: u64) -> Self {
        Self {
            every,
            entries: 0,
            bytes: 0,
            last_len: 0,
        }
    }

    /// `entries` were applied, with commands of `bytes` in total.
    pub(crate) fn applied(&mut self, entries: u64, bytes: u64) {
        self.entries += entries;
        self.bytes += bytes;
    }

    pub(crate) fn due(&self) -> bool {
        self.every != 0
            && self.entries >= self.every
            && (self.bytes.saturating_mul(SNAPSHOT_LOG_FRACTION) >= self.last_len || self.overdue())
    }

    /// At the limit of entries since the last snapshot: due whatever the log's size next
    /// to the snapshot, and whether or not a follower lags.
    pub(crate) fn overdue(&self) -> bool {
        self.every != 0 && self.entries >= self.every.saturating_mul(POSTPONE_LIMIT)
    }

    /// A snapshot of `len` bytes was taken: count afresh.
    pub(crate) fn taken(&mut self, len: u64) {
        self.entries = 0;
        self.bytes = 0;
        self.last_len = len;
    }

    /// A snapshot was refused or installed from the leader: count afresh, and let the next
    /// one be due on the entry count alone (an installed snapshot is self-contained, far
    /// larger than the index this member will take).
    pub(crate) fn restart(&mut self) {
        self.taken(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_after_enough_entries_and_enough_log_relative_to_the_last_snapshot() {
        let mut c = SnapshotCadence::new(10);
        c.applied(9, 1_000);
        assert!(!c.due(), "too few entries");
        c.applied(1, 0);
        assert!(c.due(), "first snapshot: the entry count alone");
        c.taken(8_000);
        c.applied(10, 1_999);
        assert!(!c.due(), "log under a quarter of the last snapshot");
        c.applied(0, 1);
        assert!(c.due());
        c.restart();
        c.applied(10, 1);
        assert!(c.due());
    }

    #[test]
    fn overdue_once_the_log_holds_four_times_the_entries_that_make_it_due() {
        let mut c = SnapshotCadence::new(10);
        c.taken(8_000);
        c.applied(10, 2_000);
        assert!(c.due() && !c.overdue());
        c.applied(29, 6_000);
        assert!(!c.overdue(), "39 entries: under 4 x 10");
        c.applied(1, 0);
        assert!(c.overdue(), "40 entries: 4 x the entry bound");
    }

    #[test]
    fn due_at_the_entry_limit_however_large_the_last_snapshot() {
        let mut c = SnapshotCadence::new(10);
        c.taken(1_000_000_000);
        c.applied(39, 39);
        assert!(
            !c.due(),
            "under 4 x 10 entries, a tiny log next to the state"
        );
        c.applied(1, 1);
        assert!(
            c.due() && c.overdue(),
            "40 entries: due, postponed no longer"
        );
    }

    #[test]
    fn zero_disables_snapshots() {
        let mut c = SnapshotCadence::new(0);
        c.applied(1_000_000, 1_000_000);
        assert!(!c.due() && !c.overdue());
    }
}
