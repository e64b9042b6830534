//! The search's memory: the set of linearized ops in a compact form, and the cache of
//! (linearized set, register value, spares used) configurations already explored.
//!
//! Ops are numbered in invoke order, and the search linearizes each op soon after its
//! invoke, so a linearized set is almost always "every op below a frontier" plus a few ops
//! beyond it (at most about the number of ops open at once). [`LinSet`] stores exactly that,
//! and a 64-bit hash kept up to date by XOR of per-op keys, independent of the form. The
//! cache compares entries exactly (frontier, ops beyond, value) wherever hashes agree, so a
//! hash collision costs a comparison, never a wrong verdict. Entries live in flat arenas:
//! no allocation per entry.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use coordbench_splitmix::SplitMix64;

use super::model::Value;

/// A set of op indices: every index below `frontier`, plus `beyond` (sorted descending,
/// all above the frontier).
#[derive(Debug, Clone)]
pub struct LinSet {
    frontier: u32,
    beyond: Vec<u32>,
    hash: u64,
    keys: Vec<u64>,
}

impl LinSet {
    /// An empty set over ops `0..n`.
    pub fn new(n: usize) -> LinSet {
        let keys = (0..n as u64)
            .map(|i| SplitMix64::new(i).next_u64())
            .collect();
        LinSet {
            frontier: 0,
            beyond: Vec::new(),
            hash: 0,
            keys,
        }
    }

    pub fn insert(&mut self, op: u32) {
        self.hash ^= self.keys[op as usize];
        if op != self.frontier {
            let at = self.beyond.partition_point(|&b| b > op);
            self.beyond.insert(at, op);
            return;
        }
        self.frontier += 1;
        while self.beyond.last() == Some(&self.frontier) {
            self.beyond.pop();
            self.frontier += 1;
        }
    }

    /// Removes `op`, which must be the op inserted last (the search undoes in LIFO order):
    /// if it moved the frontier, the ops it moved past go back beyond it.
    pub fn remove_last(&mut self, op: u32) {
        self.hash ^= self.keys[op as usize];
        if op > self.frontier {
            let at = self.beyond.partition_point(|&b| b > op);
            debug_assert_eq!(self.beyond.get(at), Some(&op));
            self.beyond.remove(at);
            return;
        }
        debug_assert!(op < self.frontier);
        self.beyond.extend((op + 1..self.frontier).rev());
        self.frontier = op;
    }

    /// Ops beyond the frontier (how far the set is from a plain prefix).
    #[cfg(test)]
    pub fn beyond_len(&self) -> usize {
        self.beyond.len()
    }
}

/// The cache was about to outgrow its memory bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoFull;

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Entry {
    value: Value,
    spent: u32,
    frontier: u32,
    beyond_at: usize,
    beyond_len: u32,
    /// The next entry with the same hash.
    next: u32,
}

/// Configurations seen: (linearized set, register value).
#[derive(Debug, Default)]
pub struct Memo {
    first: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    entries: Vec<Entry>,
    beyond: Vec<u32>,
}

/// 4-byte words the cache may hold, 1 GiB (an entry with its table slot counts 10).
const WORD_LIMIT: usize = 1 << 28;

impl Memo {
    /// Records (set, value, spare Writes used); `Ok(false)` if it was already there with
    /// as many spares used or fewer (with fewer used, every continuation open here was open
    /// there too, and failed).
    pub fn insert(&mut self, set: &LinSet, value: Value, spent: u32) -> Result<bool, MemoFull> {
        let hash = set.hash ^ SplitMix64::new(u64::from(value) ^ 0xA5A5_5A5A).next_u64();
        let head = self.first.get(&hash).copied().unwrap_or(NONE);
        let mut at = head;
        while at != NONE {
            let e = &mut self.entries[at as usize];
            let beyond = &self.beyond[e.beyond_at..e.beyond_at + e.beyond_len as usize];
            if e.value == value && e.frontier == set.frontier && beyond == set.beyond.as_slice() {
                let fewer = spent < e.spent;
                e.spent = e.spent.min(spent);
                return Ok(fewer);
            }
            at = e.next;
        }
        if self.entries.len() * 10 + self.beyond.len() + set.beyond.len() > WORD_LIMIT {
            return Err(MemoFull);
        }
        self.entries.push(Entry {
            value,
            spent,
            frontier: set.frontier,
            beyond_at: self.beyond.len(),
            beyond_len: set.beyond.len() as u32,
            next: head,
        });
        self.beyond.extend_from_slice(&set.beyond);
        self.first.insert(hash, (self.entries.len() - 1) as u32);
        Ok(true)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The cache's keys are already uniform 64-bit hashes.
#[derive(Debug, Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
