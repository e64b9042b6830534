//! Seeded random numbers for the simulation: every fault, delay and client
//! action is drawn from here, so a seed replays a run. The generator is the
//! cores' SplitMix64 (`coordbench-splitmix`) with the seed whitened, so the
//! harness's stream differs from any node's.

use coordbench_splitmix::SplitMix64;

pub struct SimRng(SplitMix64);

impl SimRng {
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed ^ 0x5DEE_CE66_D1CE_4E5B))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `[0, n)`; 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[self.below(items.len() as u64) as usize])
        }
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (SimRng::new(42), SimRng::new(42));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        // Pinned seeds in the cores' tests depend on this exact stream.
        assert_eq!(
            SimRng::new(0).next_u64(),
            SplitMix64::new(0x5DEE_CE66_D1CE_4E5B).next_u64()
        );
    }

    #[test]
    fn helpers_stay_in_range() {
        let mut r = SimRng::new(7);
        assert_eq!(r.below(0), 0);
        assert!(!r.chance(0));
        assert!(r.chance(1000));
        assert_eq!(r.pick::<u8>(&[]), None);
        for _ in 0..1000 {
            assert!(r.below(5) < 5);
            assert!(matches!(r.pick(&[1, 2, 3]), Some(1..=3)));
        }
        let mut v: Vec<u32> = (0..20).collect();
        r.shuffle(&mut v);
        v.sort_unstable();
        assert_eq!(v, (0..20).collect::<Vec<_>>());
    }
}
