//! What each fault kind needs, and the seeded order in which a run uses the kinds it was
//! given.
//!
//! The order goes in rounds: each round is the whole `--fault` list in a Fisher–Yates
//! shuffle drawn from a SplitMix64 seeded with `--seed` (on a stream of its own, so the
//! order depends only on the seed and the list). After k rounds every kind was used exactly
//! k times; within a run the kinds interleave without a fixed pattern.

use coordbench_splitmix::SplitMix64;

use coordbench_results::kinds::FaultArg;

/// Keeps the order's draws apart from the victims' and timings' (same seed, other stream).
const ORDER_STREAM: u64 = 0x6661_756c_745f_6f72; // "fault_or"

/// The kinds of a run, in seeded rounds.
#[derive(Debug, Clone)]
pub struct FaultOrder {
    kinds: Vec<FaultArg>,
    rng: SplitMix64,
    round: Vec<FaultArg>,
}

impl FaultOrder {
    pub fn new(kinds: &[FaultArg], seed: u64) -> Self {
        FaultOrder {
            kinds: kinds.to_vec(),
            rng: SplitMix64::new(seed ^ ORDER_STREAM),
            round: Vec::new(),
        }
    }

    /// The next kind (`None` only for an empty list).
    pub fn next_kind(&mut self) -> Option<FaultArg> {
        if self.round.is_empty() {
            self.round = self.kinds.clone();
            shuffle(&mut self.round, &mut self.rng);
            // Taken from the back: reverse so the round runs in the shuffled order.
            self.round.reverse();
        }
        self.round.pop()
    }
}

/// Fisher–Yates: every order equally likely.
pub fn shuffle<T>(items: &mut [T], rng: &mut SplitMix64) {
    for i in (1..items.len()).rev() {
        let j = rng.range(0, i as u32 + 1) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const KINDS: [FaultArg; 3] = [
        FaultArg::KillLeader,
        FaultArg::PauseLeader,
        FaultArg::PartitionLeader,
    ];

    fn draw(seed: u64, n: usize) -> Vec<FaultArg> {
        let mut order = FaultOrder::new(&KINDS, seed);
        (0..n).map(|_| order.next_kind().expect("a kind")).collect()
    }

    #[test]
    fn every_round_uses_every_kind_once_in_a_seeded_order() {
        let drawn = draw(1, 30);
        for round in drawn.chunks(KINDS.len()) {
            let mut sorted = round.to_vec();
            sorted.sort();
            assert_eq!(sorted, KINDS, "round {round:?}");
        }
        assert_eq!(drawn, draw(1, 30), "the same seed gives the same order");
        assert_ne!(drawn, draw(2, 30), "another seed gives another order");
        // The rounds are not all the same permutation.
        let firsts: BTreeMap<_, usize> = drawn.chunks(3).fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r[0]).or_default() += 1;
            m
        });
        assert!(firsts.len() > 1, "{drawn:?}");
        assert_eq!(FaultOrder::new(&[], 1).next_kind(), None);
    }

    #[test]
    fn a_shuffle_reaches_every_order_about_equally() {
        let mut rng = SplitMix64::new(7);
        let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        for _ in 0..6000 {
            let mut v = vec![0u8, 1, 2];
            shuffle(&mut v, &mut rng);
            *seen.entry(v).or_default() += 1;
        }
        assert_eq!(seen.len(), 6);
        assert!(seen.values().all(|&c| (800..1200).contains(&c)), "{seen:?}");
    }

    #[test]
    fn only_restart_all_runs_on_small_clusters() {
        assert_eq!(FaultArg::RestartAll.min_members(), 1);
        assert_eq!(FaultArg::PauseRandom.min_members(), 3);
        assert!(FaultArg::PartitionRandom.is_partition() && !FaultArg::KillRandom.is_partition());
    }
}
