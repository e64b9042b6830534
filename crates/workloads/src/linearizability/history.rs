//! The recorded history of a register workload: one [`Op`] per client operation, its
//! validation, and `history.jsonl` (one op per line, serde_json) to write and read it.
//!
//! A line looks like
//! `{"id":7,"client":2,"key":"k1","call":{"kind":"cas","expected":"c1-3","new":"c2-7"},"invoke_us":1200,"complete_us":1450,"ret":{"kind":"cas_rejected","current":"c0-5"}}`.
//! An indeterminate op has neither `complete_us` nor `ret`. In `cas_rejected`, a missing
//! `current` means the server did not say; `"current":null` means it said the key is absent.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One client operation on one key, on the run's one monotonic clock (µs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Unique; increasing in invoke order.
    pub id: u64,
    pub client: usize,
    pub key: String,
    pub call: Call,
    pub invoke_us: u64,
    /// `None`: indeterminate (timed out, or failed in a way that may have applied).
    #[serde(default)]
    pub complete_us: Option<u64>,
    /// `None` iff `complete_us` is `None`.
    #[serde(default)]
    pub ret: Option<Ret>,
}

/// What the client asked for. Every `Write` and `Cas` writes a value unique in the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Call {
    Read,
    Write {
        value: String,
    },
    /// Set `new` iff the current value is `expected` (`None`: the key is absent).
    Cas {
        expected: Option<String>,
        new: String,
    },
}

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ret {
    Read {
        value: Option<String>,
    },
    Written,
    CasApplied,
    /// `current`: the value the server reported instead (etcd's Txn else-branch), or
    /// `None` when the API does not say (ZooKeeper's BadVersion).
    CasRejected {
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "reported_current"
        )]
        current: Option<Option<String>>,
    },
    /// Certainly had no effect (e.g. refused before it was sent): ignored by the checker.
    Failed,
}

/// `CasRejected::current` in JSON: absent field = not reported, `null` = reported absent.
/// (serde alone reads `null` as the outer `None`.)
mod reported_current {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        current: &Option<Option<String>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match current {
            Some(value) => value.serialize(s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<String>>, D::Error> {
        Option::<String>::deserialize(d).map(Some)
    }
}

impl Op {
    /// Timed out or failed in a way that may have applied: no completion, no result.
    pub fn is_indeterminate(&self) -> bool {
        self.ret.is_none()
    }

    /// Certainly had no effect.
    pub fn is_failed(&self) -> bool {
        matches!(self.ret, Some(Ret::Failed))
    }

    /// The value this op writes if it takes effect.
    pub fn written_value(&self) -> Option<&str> {
        match &self.call {
            Call::Read => None,
            Call::Write { value } => Some(value),
            Call::Cas { new, .. } => Some(new),
        }
    }

    /// The value this op wrote or may have written: a Write's or applied CAS's, or an
    /// indeterminate one's; `None` for reads, rejected CASes and failed ops.
    pub fn produced_value(&self) -> Option<&str> {
        match self.ret {
            None | Some(Ret::Written | Ret::CasApplied) => self.written_value(),
            _ => None,
        }
    }

    /// Whether this op's call and its result (if any) fit together.
    fn check_shape(&self) -> Result<(), String> {
        match (self.complete_us, &self.ret) {
            (Some(_), None) => return Err("complete_us is set but ret is missing".into()),
            (None, Some(_)) => return Err("ret is set but complete_us is missing".into()),
            (Some(c), Some(_)) if c < self.invoke_us => {
                return Err(format!(
                    "complete_us {c} is before invoke_us {}",
                    self.invoke_us
                ))
            }
            _ => {}
        }
        let fits = match (&self.call, &self.ret) {
            (_, None | Some(Ret::Failed)) => true,
            (Call::Read, Some(ret)) => matches!(ret, Ret::Read { .. }),
            (Call::Write { .. }, Some(ret)) => matches!(ret, Ret::Written),
            (Call::Cas { .. }, Some(ret)) => {
                matches!(ret, Ret::CasApplied | Ret::CasRejected { .. })
            }
        };
        if fits {
            Ok(())
        } else {
            Err(format!(
                "result {:?} does not answer call {:?}",
                self.ret, self.call
            ))
        }
    }
}

/// Checks that every op is well formed, ids are unique, and no value is written twice on a
/// key (the checker's pruning and excerpts rely on unique values). Returns the offending
/// op's position and a one-line reason.
pub fn validate(history: &[Op]) -> Result<(), (usize, String)> {
    let mut ids = HashSet::with_capacity(history.len());
    let mut written = HashSet::new();
    for (at, op) in history.iter().enumerate() {
        let fail = |reason: String| (at, format!("op #{}: {reason}", op.id));
        op.check_shape().map_err(fail)?;
        if !ids.insert(op.id) {
            return Err(fail("id used twice".into()));
        }
        if let (Some(value), false) = (op.written_value(), op.is_failed()) {
            if !written.insert((op.key.as_str(), value)) {
                return Err(fail(format!(
                    "value {value:?} is written twice on key {:?}; every write needs a unique value",
                    op.key
                )));
            }
        }
    }
    Ok(())
}

/// Why a history file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: not an op: {source}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{}:{line}: {reason}", path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// Writes `history` to `path`, one JSON op per line.
pub fn write_jsonl(path: &Path, history: &[Op]) -> Result<(), HistoryError> {
    let io = |source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    for op in history {
        serde_json::to_writer(&mut out, op).map_err(|e| io(e.into()))?;
        out.write_all(b"\n").map_err(io)?;
    }
    out.flush().map_err(io)
}

/// Reads a history written by [`write_jsonl`] (blank lines are skipped) and validates it
/// ([`validate`]); errors name the line.
pub fn read_jsonl(path: &Path) -> Result<Vec<Op>, HistoryError> {
    let io = |source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    };
    let reader = BufReader::new(File::open(path).map_err(io)?);
    let mut history = Vec::new();
    let mut lines = Vec::new();
    for (index, text) in reader.lines().enumerate() {
        let text = text.map_err(io)?;
        if text.trim().is_empty() {
            continue;
        }
        let op = serde_json::from_str(&text).map_err(|source| HistoryError::Parse {
            path: path.to_path_buf(),
            line: index + 1,
            source,
        })?;
        history.push(op);
        lines.push(index + 1);
    }
    validate(&history).map_err(|(at, reason)| HistoryError::Invalid {
        path: path.to_path_buf(),
        line: lines[at],
        reason,
    })?;
    Ok(history)
}
