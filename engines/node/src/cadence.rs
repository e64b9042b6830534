//! When a member snapshots its state machine and compacts its log.
//!
//! Rule: once at least `snapshot_every` entries have been applied since the last snapshot,
//! AND the commands applied since then add up to at least a quarter of that snapshot's
//! size. The first bound keeps snapshots from being taken for every few entries; the second
//! keeps their cost amortized as the state grows (a snapshot serializes the whole state, so
//! it waits for a log proportional to it: serialization per applied byte stays bounded),
//! while the log kept in memory stays small next to the state.
//!
//! A leader postpones a due snapshot while a live follower still needs entries it would
//! drop (`Core::followers_need_log_through`): that follower would otherwise be sent the
//! whole state, far larger than the log it lacks (at a million revisions, hundreds of MB
//! on both members at once). The wait is bounded: once the log since the last snapshot is
//! [`POSTPONE_LIMIT`] times what made it due, the snapshot is taken regardless, so a
//! follower that stays behind cannot make the log grow without end.

/// The log since the last snapshot must reach 1/`SNAPSHOT_LOG_FRACTION` of that
/// snapshot's size.
pub const SNAPSHOT_LOG_FRACTION: u64 = 4;

/// How far past due a snapshot may be postponed for a lagging follower, as a multiple
/// of both bounds (entries and log bytes).
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
    /// `every` = 0 disables snapshots.
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
            && self.bytes.saturating_mul(SNAPSHOT_LOG_FRACTION) >= self.last_len
    }

    /// Due, and past the point where waiting for a lagging follower may delay it.
    pub(crate) fn overdue(&self) -> bool {
        self.due()
            && self.entries >= self.every.saturating_mul(POSTPONE_LIMIT)
            && self.bytes.saturating_mul(SNAPSHOT_LOG_FRACTION)
                >= self.last_len.saturating_mul(POSTPONE_LIMIT)
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
    fn overdue_once_the_log_is_four_times_what_made_it_due() {
        let mut c = SnapshotCadence::new(10);
        c.taken(8_000);
        c.applied(10, 2_000);
        assert!(c.due() && !c.overdue());
        c.applied(29, 6_000);
        assert!(!c.overdue(), "39 entries: under 4 x 10");
        c.applied(1, 0);
        assert!(c.overdue(), "40 entries, 8,000 bytes: 4 x each bound");
    }

    #[test]
    fn zero_disables_snapshots() {
        let mut c = SnapshotCadence::new(0);
        c.applied(1_000_000, 1_000_000);
        assert!(!c.due());
    }
}
