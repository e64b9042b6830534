//! The seed loop around [`Sim::run`](crate::Sim::run): sweeps a range of
//! seeds, turns a panic into a failure of its seed, prints every failing
//! seed with the command that replays it alone, and replays one seed from
//! the environment (`<PREFIX>_SEED`, `_NODES`, `_ROUNDS`, `_TRACE`;
//! `<PREFIX>_SEEDS=N` widens sweeps for a longer soak).

use std::fmt::Debug;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use crate::sim::SimOptions;

/// Statistics of one run that can be summed over a sweep.
pub trait Summary: Default + Debug {
    fn add(&mut self, other: &Self);
    /// One line for the end of a sweep.
    fn summary(&self) -> String;
}

/// How a core's simulation test names itself.
pub struct Harness<S> {
    /// Environment variable prefix, e.g. `RAFT_SIM`.
    pub env_prefix: &'static str,
    /// Cargo package of the test, for the replay command.
    pub package: &'static str,
    /// Ticks of the fault phase.
    pub rounds: u64,
    /// Runs one seed end to end.
    pub run: fn(SimOptions) -> Result<S, String>,
}

impl<S: Summary> Harness<S> {
    fn env_u64(&self, name: &str) -> Option<u64> {
        std::env::var(format!("{}_{name}", self.env_prefix))
            .ok()
            .and_then(|v| v.trim().parse().ok())
    }

    pub fn repro(&self, seed: u64, nodes: u64, rounds: u64) -> String {
        let p = self.env_prefix;
        format!(
            "reproduce: {p}_SEED={seed} {p}_NODES={nodes} {p}_ROUNDS={rounds} \
             cargo test -p {} --test simulation replay -- --nocapture",
            self.package
        )
    }

    pub fn run_one(&self, seed: u64, nodes: u64, rounds: u64, trace: bool) -> Result<S, String> {
        let opts = SimOptions {
            seed,
            nodes,
            rounds,
            trace,
        };
        match catch_unwind(AssertUnwindSafe(|| (self.run)(opts))) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(format!("panicked: {msg}"))
            }
        }
    }

    /// Runs every seed (or `<PREFIX>_SEEDS` seeds from `seeds.start`) and
    /// fails listing the seeds that failed; returns the summed statistics.
    pub fn sweep(&self, nodes: u64, seeds: Range<u64>) -> S {
        let seeds = match self.env_u64("SEEDS") {
            Some(n) => seeds.start..seeds.start + n,
            None => seeds,
        };
        let rounds = self.rounds;
        let started = Instant::now();
        let mut total = S::default();
        let mut failures = Vec::new();
        let count = seeds.end - seeds.start;
        for seed in seeds {
            match self.run_one(seed, nodes, rounds, false) {
                Ok(s) => total.add(&s),
                Err(e) => {
                    eprintln!(
                        "seed {seed} ({nodes} nodes) FAILED: {e}\n  {}",
                        self.repro(seed, nodes, rounds)
                    );
                    failures.push(seed);
                }
            }
        }
        eprintln!(
            "{nodes} nodes, {count} seeds x {rounds} ticks in {:.1?}: {}",
            started.elapsed(),
            total.summary()
        );
        assert!(
            failures.is_empty(),
            "failing seeds: {failures:?} (see stderr for how to reproduce)"
        );
        total
    }

    /// Runs pinned `(seed, nodes)` pairs, panicking at the first failure.
    pub fn pinned(&self, pinned: &[(u64, u64)]) {
        for &(seed, nodes) in pinned {
            if let Err(e) = self.run_one(seed, nodes, self.rounds, false) {
                panic!(
                    "seed {seed}: {e}\n  {}",
                    self.repro(seed, nodes, self.rounds)
                );
            }
        }
    }

    /// Replays the seed given by `<PREFIX>_SEED` (does nothing without it).
    pub fn replay(&self) {
        let Some(seed) = self.env_u64("SEED") else {
            return;
        };
        let nodes = self.env_u64("NODES").unwrap_or(3);
        let rounds = self.env_u64("ROUNDS").unwrap_or(self.rounds);
        let trace = std::env::var(format!("{}_TRACE", self.env_prefix)).is_ok_and(|v| v != "0");
        match self.run_one(seed, nodes, rounds, trace) {
            Ok(s) => eprintln!("seed {seed} passed: {s:?}"),
            Err(e) => panic!(
                "seed {seed} FAILED: {e}\n  {}",
                self.repro(seed, nodes, rounds)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug)]
    struct Count(u64);

    impl Summary for Count {
        fn add(&mut self, other: &Self) {
            self.0 += other.0;
        }

        fn summary(&self) -> String {
            format!("{} runs", self.0)
        }
    }

    fn fails_on_odd(opts: SimOptions) -> Result<Count, String> {
        match opts.seed % 4 {
            1 => Err("odd".to_string()),
            3 => panic!("boom {}", opts.seed),
            _ => Ok(Count(1)),
        }
    }

    const H: Harness<Count> = Harness {
        env_prefix: "COORDBENCH_SIM_SELFTEST",
        package: "some-core",
        rounds: 10,
        run: fails_on_odd,
    };

    #[test]
    fn repro_names_the_seed_and_package() {
        assert_eq!(
            H.repro(7, 5, 10),
            "reproduce: COORDBENCH_SIM_SELFTEST_SEED=7 COORDBENCH_SIM_SELFTEST_NODES=5 \
             COORDBENCH_SIM_SELFTEST_ROUNDS=10 cargo test -p some-core --test simulation \
             replay -- --nocapture"
        );
    }

    #[test]
    fn run_one_turns_panics_into_failures() {
        assert!(H.run_one(0, 3, 10, false).is_ok());
        assert_eq!(H.run_one(1, 3, 10, false).unwrap_err(), "odd");
        assert_eq!(H.run_one(3, 3, 10, false).unwrap_err(), "panicked: boom 3");
    }

    #[test]
    #[should_panic(expected = "failing seeds: [1, 3, 5]")]
    fn sweep_lists_failing_seeds() {
        H.sweep(3, 0..6);
    }

    #[test]
    fn sweep_and_pinned_pass_on_good_seeds() {
        H.sweep(3, 0..1);
        H.pinned(&[(0, 3), (2, 5), (4, 3)]);
        // Without COORDBENCH_SIM_SELFTEST_SEED set, replay does nothing.
        H.replay();
    }
}
