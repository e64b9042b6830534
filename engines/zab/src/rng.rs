//! Deterministic pseudo-random numbers (the shared `coordbench-splitmix`
//! crate), used only to jitter the resend interval of election
//! notifications so that nodes do not fall into lockstep. The core owns no
//! entropy source: a run replays from its seed.

pub(crate) use coordbench_splitmix::SplitMix64;
