//! Leases as every replica keeps them: id, granted TTL, the remaining TTL a leader last
//! checkpointed, and the attached keys.
//!
//! No deadline is replicated. The leader keeps each lease's deadline on its own clock
//! ([`crate::lease_clock::LeaseClock`], etcd's primary lessor): keep-alives renew it there
//! without a log entry, and the leader proposes `LeaseExpire` for the leases whose deadline
//! passed. What the log carries about time is the checkpoint: `LeaseCheckpoint` sets a
//! lease's remaining TTL ([`Lease::remaining_ms`]), so that a new leader resumes from it
//! instead of granting the full TTL again. Attached keys are bookkeeping derived from the
//! key space (see `store.rs`); they are rebuilt on snapshot restore.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::KvError;

/// etcd's `MaxLeaseTTL`: 9,000,000,000 seconds.
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;
/// Grants below this TTL are raised to it. etcd derives its minimum from the
/// election timeout; the runtime may raise TTLs further before proposing.
pub const MIN_LEASE_TTL: i64 = 1;

/// A lease's replicated state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub id: i64,
    /// Granted TTL in seconds.
    pub ttl: i64,
    /// The remaining TTL in milliseconds as a leader last checkpointed it; 0: none (a
    /// new leader gives the lease its full TTL), as etcd's `remainingTTL`. Never above the
    /// TTL. (Snapshots keep this field where older builds kept a deadline on the leader's
    /// wall clock; such a value exceeds the TTL and restores as 0.)
    pub remaining_ms: u64,
}

impl Lease {
    /// The granted TTL in milliseconds.
    pub fn ttl_ms(&self) -> u64 {
        ttl_ms(self.ttl)
    }

    /// What a new leader counts down from: the checkpointed remaining TTL, else the TTL.
    pub fn resume_ms(&self) -> u64 {
        if self.remaining_ms > 0 {
            self.remaining_ms
        } else {
            self.ttl_ms()
        }
    }
}

/// `ttl` seconds in milliseconds (saturating; a negative TTL counts as 0).
pub(crate) fn ttl_ms(ttl: i64) -> u64 {
    u64::try_from(ttl).unwrap_or(0).saturating_mul(1000)
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lessor {
    leases: BTreeMap<i64, (Lease, BTreeSet<Vec<u8>>)>,
}

impl Lessor {
    pub fn grant(&mut self, id: i64, ttl: i64) -> Result<Lease, KvError> {
        if ttl > MAX_LEASE_TTL {
            return Err(KvError::LeaseTtlTooLarge { ttl });
        }
        if self.leases.contains_key(&id) {
            return Err(KvError::LeaseExists { id });
        }
        let lease = Lease {
            id,
            ttl: ttl.max(MIN_LEASE_TTL),
            remaining_ms: 0,
        };
        self.leases.insert(id, (lease.clone(), BTreeSet::new()));
        Ok(lease)
    }

    /// A free id for a grant that left the choice to the state machine:
    /// the first unused id at or after `hint`, skipping 0 and negatives.
    pub fn free_id(&self, hint: i64) -> i64 {
        let mut id = hint.max(1);
        while self.leases.contains_key(&id) {
            id = id.checked_add(1).unwrap_or(1);
        }
        id
    }

    /// Records a leader's checkpoint of the remaining TTL (0 clears it), capped at the
    /// TTL. Returns the lease.
    pub fn checkpoint(&mut self, id: i64, remaining_ms: u64) -> Result<Lease, KvError> {
        let (lease, _) = self
            .leases
            .get_mut(&id)
            .ok_or(KvError::LeaseNotFound { id })?;
        lease.remaining_ms = remaining_ms.min(lease.ttl_ms());
        Ok(lease.clone())
    }

    pub fn get(&self, id: i64) -> Option<&Lease> {
        self.leases.get(&id).map(|(l, _)| l)
    }

    pub fn contains(&self, id: i64) -> bool {
        self.leases.contains_key(&id)
    }

    /// Removes a lease; returns its attached keys in key order.
    pub fn remove(&mut self, id: i64) -> Option<BTreeSet<Vec<u8>>> {
        self.leases.remove(&id).map(|(_, keys)| keys)
    }

    pub fn keys(&self, id: i64) -> Option<&BTreeSet<Vec<u8>>> {
        self.leases.get(&id).map(|(_, keys)| keys)
    }

    /// Attaches `key` to lease `id` if that lease exists (0 = no lease).
    pub fn attach(&mut self, id: i64, key: &[u8]) {
        if let Some((_, keys)) = self.leases.get_mut(&id) {
            keys.insert(key.to_vec());
        }
    }

    pub fn detach(&mut self, id: i64, key: &[u8]) {
        if let Some((_, keys)) = self.leases.get_mut(&id) {
            keys.remove(key);
        }
    }

    /// All leases, ascending by id.
    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.leases.values().map(|(l, _)| l)
    }

    /// Restores leases with no keys attached (the store re-attaches them). A remaining
    /// TTL above the TTL (an older build's deadline) restores as none.
    pub fn from_leases(leases: impl IntoIterator<Item = Lease>) -> Self {
        Lessor {
            leases: leases
                .into_iter()
                .map(|mut l| {
                    if l.remaining_ms > l.ttl_ms() {
                        l.remaining_ms = 0;
                    }
                    (l.id, (l, BTreeSet::new()))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_and_checkpoint() {
        let mut l = Lessor::default();
        assert_eq!(l.grant(7, 10).unwrap().ttl, 10);
        assert_eq!(l.grant(7, 10), Err(KvError::LeaseExists { id: 7 }));
        assert_eq!(
            l.grant(8, MAX_LEASE_TTL + 1),
            Err(KvError::LeaseTtlTooLarge {
                ttl: MAX_LEASE_TTL + 1
            })
        );
        assert_eq!(l.grant(9, 0).unwrap().ttl, MIN_LEASE_TTL);
        assert_eq!(
            l.get(7).unwrap().resume_ms(),
            10_000,
            "no checkpoint: the TTL"
        );
        assert_eq!(l.checkpoint(7, 4_000).unwrap().resume_ms(), 4_000);
        assert_eq!(
            l.checkpoint(7, 99_000).unwrap().remaining_ms,
            10_000,
            "capped at the TTL"
        );
        assert_eq!(l.checkpoint(7, 0).unwrap().resume_ms(), 10_000, "cleared");
        assert_eq!(l.checkpoint(1, 5), Err(KvError::LeaseNotFound { id: 1 }));
        // An older build's deadline (wall-clock ms) in the remaining field restores as none.
        let old = Lease {
            id: 3,
            ttl: 5,
            remaining_ms: 1_700_000_000_000,
        };
        let kept = Lease {
            id: 4,
            ttl: 5,
            remaining_ms: 2_500,
        };
        let r = Lessor::from_leases([old, kept]);
        assert_eq!(r.get(3).unwrap().remaining_ms, 0);
        assert_eq!(r.get(4).unwrap().remaining_ms, 2_500);
    }

    #[test]
    fn keys_and_ids() {
        let mut l = Lessor::default();
        l.grant(1, 5).unwrap();
        l.grant(2, 5).unwrap();
        assert_eq!(l.free_id(1), 3);
        assert_eq!(l.free_id(-4), 3);
        assert_eq!(l.free_id(10), 10);
        l.attach(1, b"b");
        l.attach(1, b"a");
        l.attach(42, b"x"); // unknown lease: ignored
        l.detach(1, b"b");
        assert_eq!(
            l.remove(1).unwrap().into_iter().collect::<Vec<_>>(),
            vec![b"a".to_vec()]
        );
        assert!(l.remove(1).is_none());
        assert_eq!(l.leases().map(|x| x.id).collect::<Vec<_>>(), vec![2]);
        // TTLs in milliseconds saturate instead of overflowing.
        l.grant(3, MAX_LEASE_TTL).unwrap();
        assert_eq!(l.get(3).unwrap().ttl_ms(), MAX_LEASE_TTL as u64 * 1000);
        assert_eq!(ttl_ms(i64::MAX), u64::MAX);
    }
}
