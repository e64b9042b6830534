//! What a finished `coordbench` process said, for assertion messages. Small enough for test
//! binaries that need nothing else of the harness: `#[path = "common/output.rs"] mod output;`.

use std::process::Output;

/// Exit status, stdout and stderr of a finished process.
pub fn describe(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
