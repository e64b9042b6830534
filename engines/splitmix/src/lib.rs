//! Deterministic pseudo-random numbers (SplitMix64) for the sans-IO
//! consensus cores (`coordbench-raft`'s randomized election timeouts,
//! `coordbench-zab`'s jittered notification resends) and for the
//! `coordbench-sim` test harness. No entropy source, no I/O, no clock: a run
//! replays exactly from its seed.

#![cfg_attr(not(test), no_std)]

#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `[lo, hi)`; returns `lo` when the range is empty.
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        if hi <= lo {
            return lo;
        }
        let span = u64::from(hi - lo);
        // `span` fits in u32, so the remainder does too.
        lo + (self.next_u64() % span) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_stays_in_bounds_and_is_deterministic() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..1000 {
            let x = a.range(10, 20);
            assert!((10..20).contains(&x));
            assert_eq!(x, b.range(10, 20));
        }
        assert_eq!(a.range(5, 5), 5);
    }
}
