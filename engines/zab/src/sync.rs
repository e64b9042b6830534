//! Synchronization: how a leader brings a follower's history to its own
//! (choosing DIFF, TRUNC or SNAP from the follower's last zxid), and how the
//! follower checks and applies that instruction. Both sides rely on Zab's
//! prefix property: two histories that hold the same zxid agree on every
//! proposal up to it.

use crate::error::Error;
use crate::log::ZabLog;
use crate::message::{Proposal, SyncKind};
use crate::zxid::Zxid;

/// The instruction and proposals that turn a history ending at
/// `follower_last` into the leader's (`log`).
pub(crate) fn plan(log: &ZabLog, follower_last: Zxid) -> (SyncKind, Vec<Proposal>) {
    let last = log.last_zxid();
    let after = |z: Zxid| log.entries_after(z, usize::MAX).unwrap_or_default();
    if follower_last == last {
        return (SyncKind::Diff { from: last }, Vec::new());
    }
    if follower_last > last {
        // Everything past our last zxid was never committed.
        return (SyncKind::Trunc { to: last }, Vec::new());
    }
    match (log.snapshot(), log.floor(follower_last)) {
        (_, Some(p)) if p == follower_last => (SyncKind::Diff { from: p }, after(p)),
        // The follower holds proposals we do not (uncommitted ones of an
        // older epoch): it keeps what precedes them.
        (_, Some(p)) => (SyncKind::Trunc { to: p }, after(p)),
        (Some(s), None) => (SyncKind::Snap(s.clone()), after(s.zxid)),
        // Unreachable: `floor` is only `None` below a snapshot.
        (None, None) => (SyncKind::Diff { from: Zxid::ZERO }, after(Zxid::ZERO)),
    }
}

fn check_chain(base: Zxid, ps: &[Proposal]) -> Result<(), Error> {
    let mut prev = base;
    for p in ps {
        if p.zxid <= prev {
            return Err(Error::Malformed("synchronization proposals out of order"));
        }
        prev = p.zxid;
    }
    Ok(())
}

/// Applies a leader's synchronization to the follower's history, which then
/// ends at `last`. Checks everything before changing anything: an
/// instruction that contradicts the prefix property, or would discard a
/// committed proposal, is refused.
pub(crate) fn apply(
    log: &mut ZabLog,
    sync: SyncKind,
    proposals: Vec<Proposal>,
    last: Zxid,
) -> Result<(), Error> {
    let base = match &sync {
        SyncKind::Diff { from } => *from,
        SyncKind::Trunc { to } => *to,
        SyncKind::Snap(s) => s.zxid,
    };
    check_chain(base, &proposals)?;
    if proposals.last().map_or(base, |p| p.zxid) != last {
        return Err(Error::Malformed(
            "NEWLEADER's proposals do not end at its last zxid",
        ));
    }
    match sync {
        SyncKind::Diff { from } => diff(log, from, proposals, last),
        // A snapshot we already hold a point of is just a DIFF from there
        // (the leader re-syncs from the last zxid it knows we acknowledged,
        // which may be behind what we hold).
        SyncKind::Snap(s) if log.contains(s.zxid) || s.zxid < log.snapshot_zxid() => {
            diff(log, s.zxid, proposals, last)
        }
        SyncKind::Snap(s) => {
            if s.zxid == Zxid::ZERO {
                return Err(Error::Malformed("SNAP at zxid 0"));
            }
            if s.zxid < log.committed {
                return Err(Error::Malformed("SNAP would discard committed proposals"));
            }
            log.install(s);
            log.append_new(proposals);
            Ok(())
        }
        SyncKind::Trunc { to } => {
            if !log.contains(to) {
                return Err(Error::Malformed("TRUNC point is not in the history"));
            }
            if to < log.committed {
                return Err(Error::Malformed("TRUNC would discard committed proposals"));
            }
            log.truncate_after(to);
            log.append_new(proposals);
            Ok(())
        }
    }
}

fn diff(log: &mut ZabLog, from: Zxid, proposals: Vec<Proposal>, last: Zxid) -> Result<(), Error> {
    let snap = log.snapshot_zxid();
    if !log.contains(from) && from >= snap {
        return Err(Error::Malformed("DIFF base is not in the history"));
    }
    let mine_last = log.last_zxid();
    if mine_last > last {
        return Err(Error::Malformed(
            "DIFF leaves proposals the leader does not have",
        ));
    }
    // What we hold past the base must be exactly what the leader sends
    // there (proposals at or below our snapshot are compacted here).
    let lo = from.max(snap);
    let mine = log
        .entries()
        .iter()
        .map(|p| p.zxid)
        .filter(|&z| z > lo && z <= mine_last);
    let theirs = proposals
        .iter()
        .map(|p| p.zxid)
        .filter(|&z| z > lo && z <= mine_last);
    if !mine.eq(theirs) {
        return Err(Error::Malformed("DIFF does not extend the history"));
    }
    log.append_new(proposals);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Snapshot;

    fn p(epoch: u32, counter: u32) -> Proposal {
        Proposal {
            zxid: Zxid::new(epoch, counter),
            data: vec![epoch as u8, counter as u8],
        }
    }

    fn z(epoch: u32, counter: u32) -> Zxid {
        Zxid::new(epoch, counter)
    }

    fn log_with(ps: &[(u32, u32)]) -> ZabLog {
        let ents = ps.iter().map(|&(e, c)| p(e, c)).collect();
        ZabLog::restore_from(None, ents, Zxid::ZERO).unwrap()
    }

    fn zxids(ps: &[Proposal]) -> Vec<Zxid> {
        ps.iter().map(|p| p.zxid).collect()
    }

    #[test]
    fn plan_picks_diff_trunc_or_snap() {
        let leader = log_with(&[(1, 1), (1, 2), (3, 1), (3, 2)]);
        // Up to date, or a prefix: DIFF.
        assert_eq!(
            plan(&leader, z(3, 2)),
            (SyncKind::Diff { from: z(3, 2) }, vec![])
        );
        let (k, ps) = plan(&leader, z(1, 2));
        assert_eq!(k, SyncKind::Diff { from: z(1, 2) });
        assert_eq!(zxids(&ps), vec![z(3, 1), z(3, 2)]);
        let (k, ps) = plan(&leader, Zxid::ZERO);
        assert_eq!((k, ps.len()), (SyncKind::Diff { from: Zxid::ZERO }, 4));
        // An old epoch's uncommitted tail: TRUNC to what both hold, then DIFF.
        let (k, ps) = plan(&leader, z(2, 7));
        assert_eq!(k, SyncKind::Trunc { to: z(1, 2) });
        assert_eq!(zxids(&ps), vec![z(3, 1), z(3, 2)]);
        // Ahead of the leader: TRUNC to its last zxid.
        assert_eq!(
            plan(&leader, z(3, 9)),
            (SyncKind::Trunc { to: z(3, 2) }, vec![])
        );

        // Behind the leader's snapshot: SNAP, then what follows it.
        let mut leader = leader;
        leader.commit_to(z(3, 2));
        let _ = leader.take_next_committed();
        leader.applied_to(z(3, 2));
        leader.compact(z(3, 1), b"sm".to_vec()).unwrap();
        let (k, ps) = plan(&leader, z(1, 2));
        assert_eq!(
            k,
            SyncKind::Snap(Snapshot {
                zxid: z(3, 1),
                data: b"sm".to_vec()
            })
        );
        assert_eq!(zxids(&ps), vec![z(3, 2)]);
        assert_eq!(plan(&leader, z(3, 1)).0, SyncKind::Diff { from: z(3, 1) });
    }

    #[test]
    fn trunc_discards_an_old_epoch_tail() {
        let mut f = log_with(&[(1, 1), (1, 2), (1, 3)]);
        f.commit_to(z(1, 1));
        apply(
            &mut f,
            SyncKind::Trunc { to: z(1, 1) },
            vec![p(2, 1)],
            z(2, 1),
        )
        .unwrap();
        assert_eq!(zxids(f.entries()), vec![z(1, 1), z(2, 1)]);
        let (_, t, ents) = f.take_unstable();
        assert_eq!(t, Some(z(1, 1)));
        assert_eq!(zxids(&ents), vec![z(2, 1)]);
    }

    #[test]
    fn refuses_instructions_that_break_the_history() {
        let mut f = log_with(&[(1, 1), (1, 2)]);
        f.commit_to(z(1, 2));
        let before = zxids(f.entries());
        let bad = [
            (SyncKind::Trunc { to: z(1, 1) }, vec![], z(1, 1)),
            (SyncKind::Trunc { to: z(1, 5) }, vec![], z(1, 5)),
            (SyncKind::Diff { from: z(1, 1) }, vec![p(2, 1)], z(2, 1)),
            (SyncKind::Diff { from: z(1, 2) }, vec![p(2, 1)], z(2, 2)),
            (
                SyncKind::Diff { from: z(1, 2) },
                vec![p(2, 2), p(2, 1)],
                z(2, 1),
            ),
        ];
        for (k, ps, last) in bad {
            assert!(matches!(
                apply(&mut f, k, ps, last),
                Err(Error::Malformed(_))
            ));
            assert_eq!(zxids(f.entries()), before);
        }
        // A DIFF that re-sends proposals we hold is fine.
        apply(
            &mut f,
            SyncKind::Diff { from: z(1, 1) },
            vec![p(1, 2), p(2, 1)],
            z(2, 1),
        )
        .unwrap();
        assert_eq!(zxids(f.entries()), vec![z(1, 1), z(1, 2), z(2, 1)]);
    }

    #[test]
    fn snap_of_a_held_point_is_a_diff() {
        let mut f = log_with(&[(1, 1), (1, 2)]);
        let s = Snapshot {
            zxid: z(1, 1),
            data: vec![],
        };
        apply(&mut f, SyncKind::Snap(s), vec![p(1, 2), p(1, 3)], z(1, 3)).unwrap();
        assert!(!f.installing_snapshot());
        assert_eq!(zxids(f.entries()), vec![z(1, 1), z(1, 2), z(1, 3)]);
        let s = Snapshot {
            zxid: z(2, 4),
            data: vec![],
        };
        apply(&mut f, SyncKind::Snap(s), vec![p(2, 5)], z(2, 5)).unwrap();
        assert!(f.installing_snapshot());
        assert_eq!(zxids(f.entries()), vec![z(2, 5)]);
    }
}
