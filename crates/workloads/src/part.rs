//! Which share of a run one shard does: shard `index` of `count` owns every item (client,
//! open-loop start slot, operation of the budget) whose number is `index` modulo `count`,
//! so the shards together own each item exactly once, as one process would. Workloads
//! with sessions of their own beside the clients (election's observers) keep the ones
//! their shard owns.

use std::fmt;
use std::str::FromStr;

/// Shard `index` of `count` (`--shard I/N`, I from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub index: usize,
    pub count: usize,
}

impl Part {
    /// The whole run: one process does everything.
    pub const WHOLE: Part = Part { index: 0, count: 1 };

    pub fn is_whole(self) -> bool {
        self.count == 1
    }

    /// Whether item `item` (a client id, a slot) is this shard's.
    pub fn owns(self, item: usize) -> bool {
        item % self.count == self.index
    }

    /// How many of the items `0..n` are this shard's.
    pub fn share_of(self, n: u64) -> u64 {
        let (index, count) = (self.index as u64, self.count as u64);
        if n > index {
            (n - index - 1) / count + 1
        } else {
            0
        }
    }

    /// The number, in the whole run, of this shard's `local`-th item.
    pub fn global(self, local: u64) -> u64 {
        local * self.count as u64 + self.index as u64
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Part {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || format!("`{s}` is not a shard: write I/N with 0 <= I < N, e.g. 0/3");
        let (index, count) = s.split_once('/').ok_or_else(usage)?;
        let index: usize = index.trim().parse().map_err(|_| usage())?;
        let count: usize = count.trim().parse().map_err(|_| usage())?;
        if count == 0 || index >= count || count > 10_000 {
            return Err(usage());
        }
        Ok(Part { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_of_all_shards_add_up_to_the_whole() {
        for count in 1..6 {
            for n in 0..40u64 {
                let parts = (0..count).map(|index| Part { index, count });
                let shares: u64 = parts.clone().map(|p| p.share_of(n)).sum();
                assert_eq!(shares, n, "{count} shards of {n}");
                for p in parts {
                    let owned = (0..n as usize).filter(|&i| p.owns(i)).count() as u64;
                    assert_eq!(owned, p.share_of(n));
                    assert!((0..p.share_of(n)).all(|k| p.owns(p.global(k) as usize)));
                }
            }
        }
    }

    #[test]
    fn shards_parse_as_index_over_count() {
        assert_eq!("2/3".parse::<Part>(), Ok(Part { index: 2, count: 3 }));
        for bad in ["3/3", "1", "a/3", "0/0", "-1/2"] {
            assert!(bad.parse::<Part>().is_err(), "{bad}");
        }
    }
}
