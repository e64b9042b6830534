//! [`Zxid`]: ZooKeeper's transaction id, `epoch << 32 | counter`. Every
//! proposal has one; ordering zxids orders proposals across epochs (primary
//! order) and within an epoch (the order its leader proposed them).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A transaction id: the high 32 bits are the epoch of the leader that
/// proposed it, the low 32 bits count that leader's proposals from 1.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Zxid(pub u64);

impl Zxid {
    /// Precedes every proposal: the zxid of an empty history.
    pub const ZERO: Zxid = Zxid(0);

    pub const fn new(epoch: u32, counter: u32) -> Self {
        Zxid(((epoch as u64) << 32) | counter as u64)
    }

    pub const fn epoch(self) -> u32 {
        (self.0 >> 32) as u32
    }

    pub const fn counter(self) -> u32 {
        self.0 as u32
    }
}

impl fmt::Debug for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.epoch(), self.counter())
    }
}

impl fmt::Display for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_epoch_and_counter_and_orders_by_epoch_first() {
        let z = Zxid::new(3, 7);
        assert_eq!((z.epoch(), z.counter()), (3, 7));
        assert_eq!(z.0, (3 << 32) | 7);
        assert!(Zxid::new(2, u32::MAX) < Zxid::new(3, 1));
        assert_eq!(format!("{z}"), "3:7");
    }
}
