//! A slowdown of known size for testing performance gates: with the `test-slowdown`
//! feature, every committed command an engine applies first spins
//! `COORDBENCH_TEST_COMMIT_SPIN` iterations (read once; unset or 0: no spin). A gate must
//! catch a regression it was built to catch, and a real slowdown in the engine's apply path
//! is the honest way to give it one. Without the feature (release builds, the binary users
//! run) [`per_commit`] is empty and the variable is never read.

/// The environment variable that sets the spin, in iterations per committed command.
pub const SPIN_VAR: &str = "COORDBENCH_TEST_COMMIT_SPIN";

/// Spends the configured number of iterations; called once per committed command applied,
/// by the runtime and by the cost simulation alike.
#[inline]
pub fn per_commit() {
    #[cfg(feature = "test-slowdown")]
    spin(configured_spin());
}

/// The iterations [`per_commit`] spins in this process: 0 in a build without the
/// `test-slowdown` feature, whatever the variable says. Recorded beside a deterministic
/// cost, so a count that should have carried a slowdown says whether it could.
pub fn configured_spin() -> u64 {
    #[cfg(feature = "test-slowdown")]
    {
        static SPIN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *SPIN.get_or_init(|| {
            std::env::var(SPIN_VAR)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        })
    }
    #[cfg(not(feature = "test-slowdown"))]
    0
}

/// `iterations` rounds of work the optimiser cannot remove: a fixed number of
/// instructions per round, so the slowdown is the same on every run.
#[cfg(feature = "test-slowdown")]
fn spin(iterations: u64) {
    let mut x = 0u64;
    for i in 0..iterations {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    std::hint::black_box(x);
}
