//! [`LeaseClock`]: lease deadlines on the leader's clock, which no other member keeps
//! (etcd's primary lessor).
//!
//! Only the leader's clock counts. [`LeaseClock::lead`] (as the member starts leading) or
//! else the first query it answers in a term *promotes* it:
//! every lease's deadline becomes now + the remaining TTL last checkpointed (else the full
//! TTL) + an extension (etcd's: one election timeout), so a leader change never revokes a
//! lease early, and a checkpointed lease does not get its whole TTL again. The runtime asks
//! only once it has confirmed its leadership and applied everything committed before the
//! query (a ReadIndex), so the store it passes reflects every grant, revoke and checkpoint
//! of earlier terms. After that:
//!
//! - [`LeaseQuery::Renew`] (a keep-alive) moves the deadline to now + TTL without a log
//!   entry. Unless the lease has a checkpointed remaining TTL, or one on its way: that must
//!   be cleared through the log first (`LeaseCheckpoint` with 0), or a next leader would
//!   resume from a remaining TTL older than the renewal and revoke the lease early. Since
//!   only leases longer than the checkpoint interval are checkpointed, once an interval at
//!   most, that is at most one log entry per such lease and interval (etcd's rule).
//! - [`LeaseQuery::Due`], the leader's periodic work, lists the leases whose deadline
//!   passed (for a `LeaseExpire`) and the remaining TTLs to checkpoint (for a
//!   `LeaseCheckpoint`). A lease found expired is not renewed any more: its revoke is on
//!   its way.
//! - [`LeaseQuery::TimeToLive`] answers with the leader's remaining time.
//!
//! [`LeaseClock::observe`] keeps the deadlines in step with every applied command (a grant
//! starts one, a revoke ends it). Time is an input (`now_ms`, one monotonic clock of the
//! member), so the clock is as deterministic as the store, and tests drive it by hand.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::command::{Applied, Command, Response};
use crate::error::CodecError;
use crate::lease::ttl_ms;
use crate::store::KvStore;
use crate::types::LeaseCheckpoint;

/// How a leader times its leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// Added to every deadline on promotion (etcd: one election timeout).
    pub promote_extension_ms: u64,
    /// How often the remaining TTL of each lease whose TTL is longer than this is
    /// checkpointed through the log (etcd's `--lease-checkpoint-interval`, 5 min there);
    /// 0: never.
    pub checkpoint_interval_ms: u64,
}

impl Default for LeaseTiming {
    /// etcd's default election timeout (1 s) and a checkpoint every 5 s.
    fn default() -> Self {
        LeaseTiming {
            promote_extension_ms: 1_000,
            checkpoint_interval_ms: 5_000,
        }
    }
}

/// What a service asks the leader's lease clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaseQuery {
    /// A keep-alive.
    Renew { id: i64 },
    /// The remaining time, for LeaseTimeToLive.
    TimeToLive { id: i64 },
    /// The periodic work of the leader of `term` (a leader of another term answers with
    /// nothing: this one's answer would be proposed by a member that no longer leads).
    Due { term: u64 },
}

/// The lease clock's answer to a [`LeaseQuery`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaseAnswer {
    /// Renewed: the deadline is now + `ttl` seconds.
    Renewed {
        ttl: i64,
    },
    /// Not renewed: clear the lease's checkpoint through the log
    /// (`LeaseCheckpoint { id, remaining_ms: 0 }`), then ask again.
    ClearCheckpoint,
    /// The deadline passed; the lease is being revoked.
    Expired,
    NotFound,
    /// Whole seconds left; -1 for a lease that does not exist, as etcd answers.
    TimeToLive {
        remaining_secs: i64,
    },
    /// Leases to revoke and remaining TTLs to checkpoint, ascending by id.
    Due {
        expired: Vec<i64>,
        checkpoints: Vec<LeaseCheckpoint>,
    },
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_allocvec(value).expect("postcard serialisation of a lease query is infallible")
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, CodecError> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((value, [])) => Ok(value),
        Ok((_, rest)) => Err(CodecError::Decode(format!("{} trailing bytes", rest.len()))),
        Err(e) => Err(CodecError::Decode(e.to_string())),
    }
}

impl LeaseQuery {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        decode(bytes)
    }
}

impl LeaseAnswer {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        decode(bytes)
    }
}

/// One lease as the leader times it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Deadline {
    at_ms: u64,
    ttl_ms: u64,
    /// When its next checkpoint is due; `None`: its TTL is too short to checkpoint.
    next_checkpoint_ms: Option<u64>,
    /// When a checkpoint of it was handed out that has not been applied since.
    checkpoint_sent_ms: Option<u64>,
    /// Found expired: its revoke is on its way.
    expired: bool,
}

impl Deadline {
    /// A checkpoint handed out and not applied yet. One not applied within two intervals
    /// is taken as lost (its proposal failed), so it does not hold renewals up for good.
    fn checkpoint_in_flight(&self, now_ms: u64, interval_ms: u64) -> bool {
        let grace = interval_ms.saturating_mul(2).max(1);
        self.checkpoint_sent_ms
            .is_some_and(|sent| now_ms < sent.saturating_add(grace))
    }
}

/// A member's lease deadlines, live while it leads (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseClock {
    timing: LeaseTiming,
    /// The term in which the deadlines were set; `None`: never promoted since start-up
    /// or the last restore.
    term: Option<u64>,
    deadlines: BTreeMap<i64, Deadline>,
}

impl LeaseClock {
    pub fn new(timing: LeaseTiming) -> Self {
        LeaseClock {
            timing,
            ..Self::default()
        }
    }

    pub fn timing(&self) -> LeaseTiming {
        self.timing
    }

    /// The term this clock was promoted in, if any.
    pub fn term(&self) -> Option<u64> {
        self.term
    }

    /// Answers `query` as the leader of `term` at `now_ms`, over `store` as applied up to
    /// the query's read index; promotes first if `term` is new to this clock.
    pub fn answer(
        &mut self,
        term: u64,
        now_ms: u64,
        store: &KvStore,
        query: &LeaseQuery,
    ) -> LeaseAnswer {
        self.lead(term, now_ms, store);
        match *query {
            LeaseQuery::Renew { id } => self.renew(id, now_ms, store),
            LeaseQuery::TimeToLive { id } => LeaseAnswer::TimeToLive {
                remaining_secs: self.remaining_secs(id, now_ms, store),
            },
            LeaseQuery::Due { term: asked } if asked == term => self.due(now_ms),
            LeaseQuery::Due { .. } => LeaseAnswer::Due {
                expired: Vec::new(),
                checkpoints: Vec::new(),
            },
        }
    }

    /// Promotes the clock unless it already leads in `term`.
    pub fn lead(&mut self, term: u64, now_ms: u64, store: &KvStore) {
        if self.term != Some(term) {
            self.promote(term, now_ms, store);
        }
    }

    /// etcd's `Promote`: every lease's deadline becomes now + its remaining TTL as last
    /// checkpointed (else its TTL) + the extension.
    pub fn promote(&mut self, term: u64, now_ms: u64, store: &KvStore) {
        let extension = self.timing.promote_extension_ms;
        self.term = Some(term);
        self.deadlines = store
            .leases()
            .map(|l| {
                let resume = l.resume_ms().saturating_add(extension);
                (l.id, self.track(l.ttl_ms(), resume, now_ms))
            })
            .collect();
    }

    /// Forgets every deadline (a restored snapshot; the next query promotes again).
    pub fn demote(&mut self) {
        self.term = None;
        self.deadlines.clear();
    }

    /// Keeps the deadlines in step with a command applied at `now_ms`: a grant starts
    /// one at now + TTL, a revoke or expiry ends it, an applied checkpoint is no longer
    /// on its way.
    pub fn observe(&mut self, command: &Command, applied: &Applied, now_ms: u64) {
        match (command, &applied.result) {
            (Command::As { command, .. }, _) => self.observe(command, applied, now_ms),
            (Command::LeaseGrant { .. }, Ok(Response::LeaseGrant(g))) if self.term.is_some() => {
                let ttl = ttl_ms(g.ttl);
                let tracked = self.track(ttl, ttl, now_ms);
                self.deadlines.insert(g.id, tracked);
            }
            (Command::LeaseRevoke { id }, Ok(_)) => {
                self.deadlines.remove(id);
            }
            (Command::LeaseExpire { .. }, Ok(Response::LeaseExpire(e))) => {
                for id in &e.expired {
                    self.deadlines.remove(id);
                }
            }
            (Command::LeaseCheckpoint { checkpoints }, Ok(_)) => {
                let applied = checkpoints.iter().filter(|c| c.remaining_ms > 0);
                for c in applied {
                    if let Some(d) = self.deadlines.get_mut(&c.id) {
                        d.checkpoint_sent_ms = None;
                    }
                }
            }
            _ => {}
        }
    }

    /// A deadline `resume_ms` from now for a lease of `ttl_ms`.
    fn track(&self, ttl_ms: u64, resume_ms: u64, now_ms: u64) -> Deadline {
        let interval = self.timing.checkpoint_interval_ms;
        Deadline {
            at_ms: now_ms.saturating_add(resume_ms),
            ttl_ms,
            next_checkpoint_ms: (interval > 0 && ttl_ms > interval)
                .then(|| now_ms.saturating_add(interval)),
            checkpoint_sent_ms: None,
            expired: false,
        }
    }

    fn renew(&mut self, id: i64, now_ms: u64, store: &KvStore) -> LeaseAnswer {
        let Some(lease) = store.lease(id) else {
            self.deadlines.remove(&id);
            return LeaseAnswer::NotFound;
        };
        let interval = self.timing.checkpoint_interval_ms;
        let tracked = self.track(lease.ttl_ms(), lease.ttl_ms(), now_ms);
        let d = self.deadlines.entry(id).or_insert(tracked);
        if d.expired || d.at_ms <= now_ms {
            d.expired = true;
            return LeaseAnswer::Expired;
        }
        if lease.remaining_ms > 0 || d.checkpoint_in_flight(now_ms, interval) {
            return LeaseAnswer::ClearCheckpoint;
        }
        d.at_ms = now_ms.saturating_add(d.ttl_ms);
        LeaseAnswer::Renewed { ttl: lease.ttl }
    }

    fn remaining_secs(&self, id: i64, now_ms: u64, store: &KvStore) -> i64 {
        let Some(lease) = store.lease(id) else {
            return -1;
        };
        let left = self
            .deadlines
            .get(&id)
            .map_or(lease.ttl_ms(), |d| d.at_ms.saturating_sub(now_ms));
        i64::try_from(left / 1000).unwrap_or(i64::MAX)
    }

    /// Marks and lists the expired leases; hands out the checkpoints due.
    fn due(&mut self, now_ms: u64) -> LeaseAnswer {
        let interval = self.timing.checkpoint_interval_ms;
        let mut expired = Vec::new();
        let mut checkpoints = Vec::new();
        for (&id, d) in &mut self.deadlines {
            if d.expired || d.at_ms <= now_ms {
                d.expired = true;
                expired.push(id);
                continue;
            }
            if d.next_checkpoint_ms.is_none_or(|at| at > now_ms) {
                continue;
            }
            d.next_checkpoint_ms = Some(now_ms.saturating_add(interval));
            let remaining_ms = (d.at_ms - now_ms).min(d.ttl_ms);
            if remaining_ms < d.ttl_ms && !d.checkpoint_in_flight(now_ms, interval) {
                d.checkpoint_sent_ms = Some(now_ms);
                checkpoints.push(LeaseCheckpoint { id, remaining_ms });
            }
        }
        LeaseAnswer::Due {
            expired,
            checkpoints,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMING: LeaseTiming = LeaseTiming {
        promote_extension_ms: 1_000,
        checkpoint_interval_ms: 2_000,
    };

    /// A store and its member's clock, applying commands as the runtime does.
    struct Member {
        store: KvStore,
        clock: LeaseClock,
        index: u64,
    }

    impl Member {
        fn new() -> Self {
            Member {
                store: KvStore::new(),
                clock: LeaseClock::new(TIMING),
                index: 0,
            }
        }

        fn apply(&mut self, cmd: &Command, now_ms: u64) -> Applied {
            self.index += 1;
            let applied = self.store.apply(self.index, cmd);
            self.clock.observe(cmd, &applied, now_ms);
            applied
        }

        fn ask(&mut self, term: u64, now_ms: u64, q: LeaseQuery) -> LeaseAnswer {
            self.clock.answer(term, now_ms, &self.store, &q)
        }

        fn renew(&mut self, now_ms: u64, id: i64) -> LeaseAnswer {
            self.ask(1, now_ms, LeaseQuery::Renew { id })
        }

        fn due(&mut self, term: u64, now_ms: u64) -> (Vec<i64>, Vec<LeaseCheckpoint>) {
            match self.ask(term, now_ms, LeaseQuery::Due { term }) {
                LeaseAnswer::Due {
                    expired,
                    checkpoints,
                } => (expired, checkpoints),
                other => panic!("{other:?}"),
            }
        }

        fn ttl(&mut self, term: u64, now_ms: u64, id: i64) -> i64 {
            match self.ask(term, now_ms, LeaseQuery::TimeToLive { id }) {
                LeaseAnswer::TimeToLive { remaining_secs } => remaining_secs,
                other => panic!("{other:?}"),
            }
        }
    }

    fn grant(id: i64, ttl: i64) -> Command {
        Command::LeaseGrant { id, ttl, now_ms: 0 }
    }

    fn checkpoint(checkpoints: Vec<LeaseCheckpoint>) -> Command {
        Command::LeaseCheckpoint { checkpoints }
    }

    fn cp(id: i64, remaining_ms: u64) -> LeaseCheckpoint {
        LeaseCheckpoint { id, remaining_ms }
    }

    #[test]
    fn renewals_move_the_deadline_without_the_log() {
        let mut m = Member::new();
        assert_eq!(m.due(1, 0), (vec![], vec![]), "promoted, nothing to do");
        m.apply(&grant(1, 2), 1_000);
        assert_eq!(m.ttl(1, 1_000, 1), 2, "granted at apply: now + TTL");
        assert_eq!(m.renew(2_500, 1), LeaseAnswer::Renewed { ttl: 2 });
        assert_eq!(m.due(1, 3_000).0, Vec::<i64>::new(), "renewed to 4.5 s");
        assert_eq!(m.ttl(1, 3_000, 1), 1);
        assert_eq!(m.due(1, 4_500).0, vec![1]);
        // Expired: its revoke is on its way, a renewal no longer saves it.
        assert_eq!(m.renew(4_501, 1), LeaseAnswer::Expired);
        assert_eq!(m.due(1, 4_502).0, vec![1], "listed until revoked");
        let expire = Command::LeaseExpire {
            ids: vec![1],
            now_ms: 4_502,
        };
        m.apply(&expire, 4_600);
        assert_eq!(m.due(1, 4_700), (vec![], vec![]));
        assert_eq!(m.renew(4_700, 1), LeaseAnswer::NotFound);
        assert_eq!(m.ttl(1, 4_700, 1), -1);
        // A revoke ends the deadline too.
        m.apply(&grant(2, 1), 5_000);
        m.apply(&Command::LeaseRevoke { id: 2 }, 5_100);
        assert_eq!(m.due(1, 9_000), (vec![], vec![]));
    }

    #[test]
    fn checkpoints_are_due_each_interval_for_long_leases_only() {
        let mut m = Member::new();
        m.due(1, 0);
        m.apply(&grant(1, 10), 0);
        m.apply(&grant(2, 2), 0); // TTL not above the interval: never checkpointed
        assert_eq!(m.due(1, 1_999), (vec![], vec![]));
        assert_eq!(m.due(1, 2_000), (vec![2], vec![cp(1, 8_000)]));
        // On its way: a renewal waits for it and clears it through the log.
        assert_eq!(m.renew(2_100, 1), LeaseAnswer::ClearCheckpoint);
        m.apply(&checkpoint(vec![cp(1, 8_000)]), 2_200);
        assert_eq!(m.store.lease(1).unwrap().remaining_ms, 8_000);
        assert_eq!(m.renew(2_300, 1), LeaseAnswer::ClearCheckpoint);
        m.apply(&checkpoint(vec![cp(1, 0)]), 2_400);
        assert_eq!(m.renew(2_500, 1), LeaseAnswer::Renewed { ttl: 10 });
        // Next interval: the renewed deadline; none while the last one is on its way.
        assert_eq!(m.due(1, 4_000).1, vec![cp(1, 8_500)]);
        assert_eq!(m.due(1, 6_000).1, vec![], "the last one is on its way");
        // One not applied within two intervals is taken as lost.
        assert_eq!(m.due(1, 8_000).1, vec![cp(1, 4_500)]);
        assert_eq!(m.renew(9_000, 1), LeaseAnswer::ClearCheckpoint);
        assert_eq!(m.renew(12_001, 1), LeaseAnswer::Renewed { ttl: 10 });
        assert_eq!(
            m.renew(12_002, 2),
            LeaseAnswer::Expired,
            "granted at 0, TTL 2 s"
        );
    }

    #[test]
    fn a_new_leader_resumes_from_the_checkpoint_plus_one_election_timeout() {
        // Two members apply the same log; member a leads term 1, then b term 2.
        let (mut a, mut b) = (Member::new(), Member::new());
        let both = |a: &mut Member, b: &mut Member, cmd: Command, now| {
            a.apply(&cmd, now);
            b.apply(&cmd, now);
        };
        a.due(1, 0);
        both(&mut a, &mut b, grant(1, 10), 0);
        both(&mut a, &mut b, grant(2, 10), 0);
        both(&mut a, &mut b, grant(3, 1), 0);
        let (_, cps) = a.due(1, 2_000);
        assert_eq!(cps, vec![cp(1, 8_000), cp(2, 8_000)]);
        both(&mut a, &mut b, checkpoint(cps), 2_100);
        // Lease 2 renewed on a: its checkpoint is cleared first.
        assert_eq!(a.renew(3_000, 2), LeaseAnswer::ClearCheckpoint);
        both(&mut a, &mut b, checkpoint(vec![cp(2, 0)]), 3_100);
        assert_eq!(a.renew(3_200, 2), LeaseAnswer::Renewed { ttl: 10 });
        // b becomes leader at 3.5 s: no lease ends before a promised, none gets its full
        // TTL back if it was checkpointed: 1 from 8 s left, 2 from its full TTL (renewed
        // after its checkpoint), 3 from its TTL; each plus the extension.
        assert_eq!(b.due(2, 3_500), (vec![], vec![]));
        assert_eq!(b.ttl(2, 3_500, 1), 9, "3.5 + 8 + 1 = 12.5 s");
        assert_eq!(b.due(2, 12_499).0, vec![3], "3: 3.5 + 1 + 1 = 5.5 s");
        assert_eq!(b.due(2, 12_500).0, vec![1, 3]);
        assert_eq!(
            b.ttl(2, 12_500, 2),
            2,
            "2: 3.5 + 10 + 1 = 14.5 s >= 3.2 + 10"
        );
        // The periodic work of another term's leader is answered with nothing.
        assert_eq!(
            b.ask(2, 12_600, LeaseQuery::Due { term: 1 }),
            LeaseAnswer::Due {
                expired: vec![],
                checkpoints: vec![]
            }
        );
        // A restore demotes; the next query promotes from the restored checkpoints.
        b.clock.demote();
        assert_eq!(b.clock.term(), None);
        assert_eq!(b.ttl(3, 20_000, 1), 9, "8 s checkpointed + 1 s");
    }

    #[test]
    fn queries_and_answers_round_trip() {
        for q in [
            LeaseQuery::Renew { id: -3 },
            LeaseQuery::TimeToLive { id: i64::MAX },
            LeaseQuery::Due { term: 7 },
        ] {
            assert_eq!(LeaseQuery::decode(&q.encode()), Ok(q));
        }
        let a = LeaseAnswer::Due {
            expired: vec![1, 2],
            checkpoints: vec![cp(3, 4)],
        };
        assert_eq!(LeaseAnswer::decode(&a.encode()), Ok(a.clone()));
        let mut longer = a.encode();
        longer.push(0);
        assert!(LeaseAnswer::decode(&longer).is_err());
        assert!(LeaseQuery::decode(&[0xff, 0xff]).is_err());
    }
}
