//! Errors from starting and supervising clusters.
//!
//! Every message is one line that says what to do, because the CLI prints `error: {err}`.
//! Multi-line context (a member's log tail) is kept in a field; see
//! [`ProvisionError::log_tail`].

use std::io;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("{binary} not found or not executable; {hint}")]
    BinaryNotFound { binary: String, hint: String },

    #[error("port 127.0.0.1:{port} is already in use; choose another --base-port or omit it to pick free ports")]
    PortInUse { port: u16 },

    #[error("{member} exited ({status}): {} (log: {})", summarize(.log_tail), .log_file.display())]
    MemberExited {
        member: String,
        status: String,
        log_file: PathBuf,
        /// The last lines of the member's log, for the caller to print below the error.
        log_tail: String,
    },

    #[error("{target} cluster not ready after {}: {detail}", humantime::format_duration(*.waited))]
    NotReady {
        target: String,
        waited: Duration,
        detail: String,
    },

    #[error("{0}")]
    Unsupported(String),

    /// Certificates could not be made or the cluster's auth could not be set up.
    #[error("securing the cluster: {0}")]
    Secure(String),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl ProvisionError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        ProvisionError::Io {
            context: context.into(),
            source,
        }
    }

    /// A member process that did not start: a missing program is
    /// [`BinaryNotFound`](Self::BinaryNotFound) (`binary` and `hint` say which and what to
    /// do), any other failure an I/O error in `context`.
    pub(crate) fn spawn(source: io::Error, binary: String, hint: &str, context: String) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            ProvisionError::BinaryNotFound {
                binary,
                hint: hint.to_string(),
            }
        } else {
            ProvisionError::io(context, source)
        }
    }

    /// The multi-line log tail behind a [`MemberExited`](Self::MemberExited), if any.
    pub fn log_tail(&self) -> Option<&str> {
        match self {
            ProvisionError::MemberExited { log_tail, .. } => Some(log_tail),
            _ => None,
        }
    }
}

/// The most telling line of a log tail, as one short line: the last line that mentions an
/// error (else the last non-empty line). etcd's zap JSON lines are shortened to
/// "msg: error".
pub(crate) fn summarize(log_tail: &str) -> String {
    let lines: Vec<&str> = log_tail
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let pick = lines
        .iter()
        .rev()
        .find(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("fatal") || l.contains("error") || l.contains("panic")
        })
        .or(lines.last());
    let Some(line) = pick else {
        return "no log output".to_string();
    };
    let text = match serde_json::from_str::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(m)) => {
            let msg = m.get("msg").and_then(|v| v.as_str()).unwrap_or("");
            match m.get("error").and_then(|v| v.as_str()) {
                Some(err) if !msg.is_empty() => format!("{msg}: {err}"),
                Some(err) => err.to_string(),
                None => msg.to_string(),
            }
        }
        _ => String::new(),
    };
    let text = if text.is_empty() {
        line.to_string()
    } else {
        text
    };
    const MAX: usize = 300;
    if text.chars().count() > MAX {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}...")
    } else {
        text
    }
}
