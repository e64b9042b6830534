//! The header every JSON record of coordbench starts with (run.json, a sweep's run.json,
//! capacity.json, gate.json): which layout it has, whether it ran to its end and why it
//! ended, and when. Writers flatten [`RecordHeader`] into their record, so the fields sit at
//! the top level of every file in one order; readers that only need to know whether a result
//! is finished (a resumed sweep, a merge, a report) read the header alone with [`read_header`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::files::FileError;

/// Why a run, search, sweep or gate ended, as `end_reason` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// It ran to its planned end.
    Completed,
    /// A run's operation budget (`--ops`) was spent before its window ended.
    OpsReached,
    /// Ctrl-C or SIGTERM: what was measured is written.
    Interrupted,
    /// An error stopped it (the record's `error` says which); also the state of a record
    /// written before its end, so a process that dies leaves `failed` behind.
    Failed,
}

impl EndReason {
    /// The label in records and summary tables (`completed`, `ops_reached`, ...).
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Completed => "completed",
            EndReason::OpsReached => "ops_reached",
            EndReason::Interrupted => "interrupted",
            EndReason::Failed => "failed",
        }
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The first fields of every JSON record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordHeader {
    /// The record's layout (see [`crate::schema`]).
    pub schema: String,
    /// True only if it ran to its planned end without an interruption or a failure.
    pub complete: bool,
    pub end_reason: EndReason,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC; empty until it ends.
    pub finished_at: String,
}

impl RecordHeader {
    /// A record that has begun: incomplete and `failed` until [`RecordHeader::end`] says
    /// otherwise, so a file rewritten mid-way never claims more than it holds.
    pub fn begin(schema: &str, started_at: String) -> Self {
        RecordHeader {
            schema: schema.to_string(),
            complete: false,
            end_reason: EndReason::Failed,
            error: None,
            started_at,
            finished_at: String::new(),
        }
    }

    /// Ends the record now: complete when it ran to its end (or its budget) without error.
    pub fn end(&mut self, reason: EndReason, error: Option<String>) {
        self.complete =
            matches!(reason, EndReason::Completed | EndReason::OpsReached) && error.is_none();
        self.end_reason = reason;
        self.error = error;
        self.finished_at = crate::time::now_rfc3339();
    }
}

/// The header of the JSON record at `path`, whatever record it is.
pub fn read_header(path: &Path) -> Result<RecordHeader, FileError> {
    crate::files::read_json(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Example {
        #[serde(flatten)]
        header: RecordHeader,
        rate: u32,
    }

    #[test]
    fn a_flattened_header_leads_the_record_and_reads_back_alone() {
        let mut header = RecordHeader::begin("coordbench.example/1", "2026-12-05T00:00:00Z".into());
        header.end(EndReason::OpsReached, None);
        let text = serde_json::to_string(&Example {
            header: header.clone(),
            rate: 7,
        })
        .unwrap();
        assert!(text.starts_with(r#"{"schema":"coordbench.example/1","complete":true,"end_reason":"ops_reached","error":null,"started_at":"2026-12-05T00:00:00Z","#), "{text}");
        assert!(text.ends_with(r#","rate":7}"#), "{text}");
        let back: RecordHeader = serde_json::from_str(&text).unwrap();
        assert_eq!(back, header);
    }

    #[test]
    fn a_record_begun_is_failed_until_it_ends_and_an_error_is_never_complete() {
        let mut header = RecordHeader::begin("s", String::new());
        assert!(!header.complete);
        assert_eq!(header.end_reason, EndReason::Failed);
        header.end(EndReason::Completed, Some("member 2 died".into()));
        assert!(!header.complete);
        header.end(EndReason::Interrupted, None);
        assert!(!header.complete);
        assert!(!header.finished_at.is_empty());
    }
}
