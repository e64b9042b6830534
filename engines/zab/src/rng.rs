//! Deterministic pseudo-random numbers (SplitMix64), used only to jitter the
//! resend interval of election notifications so that nodes do not fall into
//! lockstep. The core owns no entropy source: a run replays from its seed.

#[derive(Clone, Debug)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `[lo, hi)`; returns `lo` when the range is empty.
    pub(crate) fn range(&mut self, lo: u32, hi: u32) -> u32 {
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
