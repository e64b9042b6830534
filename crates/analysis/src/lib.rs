//! coordbench's analysis: what it makes of result files once they are written. [`report`]
//! charts a sweep or run directory and writes report.md, [`compare`] judges a candidate's
//! results against a baseline's beyond noise, [`slo`] reads latency objectives, and
//! [`simulate`] runs the engines' sans-IO cores in a deterministic simulated cluster.
//! Synchronous: it reads files and the results crate's vocabulary, and starts nothing.

pub mod compare;
pub mod report;
pub mod simulate;
pub mod slo;
