//! Election timeout ranges (`MIN-MAX` in ms) and their mapping to a core's ticks: the type
//! lives with the run option that shares it, `--election-timeout`
//! (`coordbench_results::timeout_range`).

pub use coordbench_results::timeout_range::{whole_ms, TimeoutRange};
