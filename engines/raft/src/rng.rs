//! Deterministic pseudo-random numbers for randomized election timeouts
//! (the shared `coordbench-splitmix` crate). The core owns no entropy
//! source, so runs replay exactly from a seed.

pub(crate) use coordbench_splitmix::SplitMix64;
