//! Holder pauses (`--holder-pause D --holder-pause-ratio R`): which acquisitions freeze
//! their holder inside the critical section, drawn per client from the run's seed with the
//! project's SplitMix64, so a run replays the same pauses from the same `--seed`.

use std::time::Duration;

use coordbench_splitmix::SplitMix64;

/// How long a paused holder freezes, and the fraction of acquisitions that pause.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HolderPause {
    pub duration: Duration,
    /// In (0, 1].
    pub ratio: f64,
}

/// Keeps the pause draw apart from the other draws a run makes from the same seed.
const SALT: u64 = 0x686f_6c64_6572_7061; // "holderpa"

/// One client's sequence of pause decisions, one per acquisition.
#[derive(Debug, Clone)]
pub struct PauseDraw {
    rng: SplitMix64,
    ratio: f64,
}

impl PauseDraw {
    /// Client `client`'s draw; every client gets its own stream of the seed.
    pub fn new(seed: u64, client: usize, ratio: f64) -> Self {
        // One SplitMix64 step hashes (seed, client) into a well-separated starting state:
        // seeds that differ by the generator's increment would give shifted copies.
        let start = SplitMix64::new(seed ^ SALT ^ client as u64).next_u64();
        PauseDraw {
            rng: SplitMix64::new(start),
            ratio,
        }
    }

    /// Whether the next acquisition pauses.
    pub fn next_pauses(&mut self) -> bool {
        // The top 53 bits as a uniform draw from [0, 1).
        let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        u < self.ratio
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(seed: u64, client: usize, ratio: f64, n: usize) -> Vec<bool> {
        let mut d = PauseDraw::new(seed, client, ratio);
        (0..n).map(|_| d.next_pauses()).collect()
    }

    #[test]
    fn the_fraction_paused_follows_the_ratio() {
        for ratio in [0.05, 0.2, 0.5] {
            let paused = draws(1, 0, ratio, 20_000).iter().filter(|p| **p).count();
            let fraction = paused as f64 / 20_000.0;
            assert!(
                (fraction - ratio).abs() < 0.02,
                "ratio {ratio}: {fraction} paused"
            );
        }
        assert!(draws(7, 3, 1.0, 1000).iter().all(|p| *p));
    }

    #[test]
    fn a_seed_replays_and_clients_and_seeds_differ() {
        assert_eq!(draws(1, 2, 0.3, 200), draws(1, 2, 0.3, 200));
        assert_ne!(draws(1, 2, 0.3, 200), draws(1, 3, 0.3, 200));
        assert_ne!(draws(1, 2, 0.3, 200), draws(2, 2, 0.3, 200));
        // Neighbouring clients are not shifted copies of one stream.
        let (a, b) = (draws(1, 0, 0.5, 201), draws(1, 1, 0.5, 200));
        assert_ne!(a[1..], b[..]);
    }
}
