//! Errors in the TOML files coordbench reads (sweep, gate and threshold specs), located by
//! line and field.

/// A spec that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read sweep spec {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    /// Line 0: set on the command line (`coordbench gate --candidate KEY=VALUE`).
    #[error("{}", located(file, *line, field, message))]
    Invalid {
        file: String,
        line: usize,
        field: String,
        message: String,
    },
}

fn located(file: &str, line: usize, field: &str, message: &str) -> String {
    if line == 0 {
        format!("{file}: {field} (command line): {message}")
    } else {
        format!("{file}:{line}: {field}: {message}")
    }
}

/// The 1-based line of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}
