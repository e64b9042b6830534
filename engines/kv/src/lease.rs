//! Leases: granted TTL, a leader-supplied deadline, and attached keys.
//!
//! Time never comes from a clock here. Commands that need it carry the
//! leader's `now_ms`; the lease stores `deadline_ms = now_ms + ttl * 1000`.
//! The leader runtime reads [`Lessor::expired`] with its own clock and
//! proposes `LeaseExpire`, which revokes only leases whose stored deadline
//! has passed at the command's `now_ms`: if a keep-alive committed first,
//! the expiry is a no-op for that lease, identically on every replica.
//! Attached keys are bookkeeping derived from the key space (see
//! `store.rs`); they are rebuilt on snapshot restore.

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
    /// When the lease runs out, on the leader's clock (milliseconds).
    pub deadline_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lessor {
    leases: BTreeMap<i64, (Lease, BTreeSet<Vec<u8>>)>,
}

fn deadline(now_ms: u64, ttl: i64) -> u64 {
    now_ms.saturating_add(u64::try_from(ttl).unwrap_or(0).saturating_mul(1000))
}

impl Lessor {
    pub fn grant(&mut self, id: i64, ttl: i64, now_ms: u64) -> Result<Lease, KvError> {
        if ttl > MAX_LEASE_TTL {
            return Err(KvError::LeaseTtlTooLarge { ttl });
        }
        if self.leases.contains_key(&id) {
            return Err(KvError::LeaseExists { id });
        }
        let ttl = ttl.max(MIN_LEASE_TTL);
        let lease = Lease {
            id,
            ttl,
            deadline_ms: deadline(now_ms, ttl),
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

    /// Keep-alive: the deadline becomes `now_ms + ttl`. Returns the lease.
    pub fn renew(&mut self, id: i64, now_ms: u64) -> Result<Lease, KvError> {
        let (lease, _) = self
            .leases
            .get_mut(&id)
            .ok_or(KvError::LeaseNotFound { id })?;
        lease.deadline_ms = deadline(now_ms, lease.ttl);
        Ok(lease.clone())
    }

    /// Renews every lease, as a new leader does (etcd's `Promote`).
    pub fn renew_all(&mut self, now_ms: u64) {
        for (lease, _) in self.leases.values_mut() {
            lease.deadline_ms = deadline(now_ms, lease.ttl);
        }
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

    /// Ids of leases whose deadline is at or before `now_ms`, ascending.
    pub fn expired(&self, now_ms: u64) -> Vec<i64> {
        self.leases
            .values()
            .filter(|(l, _)| l.deadline_ms <= now_ms)
            .map(|(l, _)| l.id)
            .collect()
    }

    /// All leases, ascending by id.
    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.leases.values().map(|(l, _)| l)
    }

    /// Whole seconds left at `now_ms`, never negative.
    pub fn remaining_secs(lease: &Lease, now_ms: u64) -> i64 {
        i64::try_from(lease.deadline_ms.saturating_sub(now_ms) / 1000).unwrap_or(i64::MAX)
    }

    /// Restores leases with no keys attached (the store re-attaches them).
    pub fn from_leases(leases: impl IntoIterator<Item = Lease>) -> Self {
        Lessor {
            leases: leases
                .into_iter()
                .map(|l| (l.id, (l, BTreeSet::new())))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_renew_expire() {
        let mut l = Lessor::default();
        assert_eq!(l.grant(7, 10, 1_000).unwrap().deadline_ms, 11_000);
        assert_eq!(l.grant(7, 10, 1_000), Err(KvError::LeaseExists { id: 7 }));
        assert_eq!(
            l.grant(8, MAX_LEASE_TTL + 1, 0),
            Err(KvError::LeaseTtlTooLarge {
                ttl: MAX_LEASE_TTL + 1
            })
        );
        assert_eq!(l.grant(9, 0, 0).unwrap().ttl, MIN_LEASE_TTL);
        assert_eq!(l.expired(10_999), vec![9]);
        assert_eq!(l.expired(11_000), vec![7, 9]);
        l.renew(7, 5_000).unwrap();
        assert_eq!(l.expired(11_000), vec![9]);
        assert_eq!(Lessor::remaining_secs(l.get(7).unwrap(), 5_500), 9);
        assert_eq!(Lessor::remaining_secs(l.get(7).unwrap(), 99_000), 0);
        assert_eq!(l.renew(1, 0), Err(KvError::LeaseNotFound { id: 1 }));
        l.renew_all(100_000);
        assert!(l.expired(100_999).is_empty());
    }

    #[test]
    fn keys_and_ids() {
        let mut l = Lessor::default();
        l.grant(1, 5, 0).unwrap();
        l.grant(2, 5, 0).unwrap();
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
        // Deadlines saturate instead of overflowing.
        l.grant(3, MAX_LEASE_TTL, u64::MAX - 1).unwrap();
        assert_eq!(l.get(3).unwrap().deadline_ms, u64::MAX);
    }
}
