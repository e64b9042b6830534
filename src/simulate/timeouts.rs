//! Election timeout ranges (`MIN-MAX` in ms) and their mapping to a core's ticks: the type
//! lives with the run option that shares it, `--election-timeout`
//! (`crate::election_timing::range`).

pub use crate::election_timing::range::{whole_ms, TimeoutRange};
