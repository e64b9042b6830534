//! The seeded generator the state machines' property tests (engines/kv, engines/tree) draw
//! commands from: SplitMix64 with its own seed mixing, and the helpers those generators use
//! (uniform ranges, percent chances, picking from a list). Kept here so both test suites
//! share one copy; the stream is fixed, so a failing seed stays reproducible.

use coordbench_splitmix::SplitMix64;

pub struct PropRng(SplitMix64);

impl PropRng {
    pub fn new(seed: u64) -> Self {
        PropRng(SplitMix64::new(
            seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef,
        ))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `[0, n)`; 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `[lo, hi]`.
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `percent / 100`.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_the_one_property_tests_were_written_against() {
        // The first value of the hand-written generator this replaced, for seed 1.
        let mut state = 1u64.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef;
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        assert_eq!(PropRng::new(1).next_u64(), z ^ (z >> 31));
        let mut r = PropRng::new(3);
        for _ in 0..1000 {
            assert!((-2..=2).contains(&r.between(-2, 2)));
        }
        assert_eq!(r.between(5, 5), 5);
    }
}
