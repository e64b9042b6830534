//! How a command ends: its [`Outcome`] (the exit code) or a [`UsageError`] (bad input or
//! an environment problem, exit 2), with errors folded onto [`one_line`].

/// How a command ended, as the process exit code says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 0: the run completed.
    Complete,
    /// 1: the run failed after it began measuring; results are incomplete.
    Failed,
    /// 130: interrupted; what was measured is written.
    Interrupted,
    /// 3: a gate's (or compare --thresholds') threshold was breached.
    Breached,
}

/// A command that could not run: bad input or an environment problem, exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl<E: Into<anyhow::Error>> From<E> for UsageError {
    fn from(e: E) -> Self {
        UsageError(one_line(&format!("{:#}", e.into())))
    }
}

/// Errors are printed on one line: chains joined with ": ", newlines folded.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
