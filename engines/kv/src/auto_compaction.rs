//! etcd's automatic compaction setting (`--auto-compaction-mode`,
//! `--auto-compaction-retention`), read as etcd reads it.
//!
//! It lives beside the data model it compacts because two sides need the same reading of
//! the same text: `serve raft`, whose leader compacts on this setting, and the lab, which
//! checks a run's setting once and passes the text unchanged to etcd and to `serve raft`.
//! What the leader does with it is engines/etcd-api's compactor.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

/// Shortest periodic retention taken: its sampling interval (a tenth) is then at least
/// 1 ms. etcd takes shorter ones (and below 10 ns divides by zero).
pub const MIN_PERIOD: Duration = Duration::from_millis(10);

/// How the retention is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionMode {
    /// A span of time (etcd's default mode).
    Periodic,
    /// A number of revisions.
    Revision,
}

impl CompactionMode {
    /// The mode's name as etcd's flag takes it.
    pub fn name(self) -> &'static str {
        match self {
            CompactionMode::Periodic => "periodic",
            CompactionMode::Revision => "revision",
        }
    }
}

impl fmt::Display for CompactionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How much history to keep, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Keep this many revisions below the current one.
    Revisions(i64),
    /// Keep the revisions of this span of time.
    Period(Duration),
}

/// A setting that compacts (retention 0, compaction off, is `None` where one is parsed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoCompaction {
    pub mode: CompactionMode,
    /// The retention as given, which etcd is passed unchanged.
    pub text: String,
    pub retention: Retention,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AutoCompactionError {
    #[error("unknown auto-compaction mode {0:?} (periodic or revision)")]
    Mode(String),
    #[error("revision retention {0:?} is not a whole number of revisions")]
    Revisions(String),
    #[error("periodic retention {0:?} is neither a whole number of hours nor a duration such as 30s, 5m, 1h30m")]
    Period(String),
    #[error("periodic retention {0:?} is shorter than the shortest taken, {MIN_PERIOD:?}")]
    TooShort(String),
}

impl AutoCompaction {
    /// Reads `retention` in `mode` as etcd does: in revision mode a whole number of
    /// revisions; in periodic mode a bare whole number of hours or a Go duration
    /// (`30s`, `5m`, `1h30m`, `1.5h`). Zero in either mode is `None`: no compaction.
    ///
    /// Stricter than etcd where etcd would start with a setting it cannot mean: a
    /// duration in revision mode (etcd reads its nanoseconds as revisions), a negative
    /// duration, a period under [`MIN_PERIOD`], a number of hours past Go's longest
    /// duration (etcd's would wrap).
    pub fn parse(mode: &str, retention: &str) -> Result<Option<Self>, AutoCompactionError> {
        let mode = match mode {
            "periodic" => CompactionMode::Periodic,
            "revision" => CompactionMode::Revision,
            other => return Err(AutoCompactionError::Mode(other.to_string())),
        };
        let whole = whole_number(retention);
        let parsed = match mode {
            CompactionMode::Revision => {
                let n = whole.ok_or_else(|| AutoCompactionError::Revisions(retention.into()))?;
                let n = i64::try_from(n)
                    .map_err(|_| AutoCompactionError::Revisions(retention.into()))?;
                (n > 0).then_some(Retention::Revisions(n))
            }
            CompactionMode::Periodic => {
                let period = match whole {
                    Some(hours) => hours.checked_mul(3600).map(Duration::from_secs),
                    // Negative durations (Go takes them) mean nothing here.
                    None => go_parse_duration::parse_duration(retention)
                        .ok()
                        .and_then(|nanos| u64::try_from(nanos).ok())
                        .map(Duration::from_nanos),
                };
                // Go's durations end at i64::MAX nanoseconds (about 292 years).
                let period = period
                    .filter(|p| p.as_nanos() <= i64::MAX as u128)
                    .ok_or_else(|| AutoCompactionError::Period(retention.into()))?;
                if !period.is_zero() && period < MIN_PERIOD {
                    return Err(AutoCompactionError::TooShort(retention.into()));
                }
                (!period.is_zero()).then_some(Retention::Period(period))
            }
        };
        Ok(parsed.map(|retention_value| AutoCompaction {
            mode,
            text: retention.to_string(),
            retention: retention_value,
        }))
    }

    /// etcd's flags for this setting (the same ones `serve raft` takes).
    pub fn flags(&self) -> [String; 2] {
        [
            format!("--auto-compaction-mode={}", self.mode),
            format!("--auto-compaction-retention={}", self.text),
        ]
    }
}

/// `s` as an unsigned decimal number, if it is only digits.
fn whole_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retention(mode: &str, text: &str) -> Option<Retention> {
        AutoCompaction::parse(mode, text)
            .unwrap_or_else(|e| panic!("{mode} {text}: {e}"))
            .map(|a| a.retention)
    }

    #[test]
    fn periodic_takes_hours_or_a_go_duration() {
        let period = |d| Some(Retention::Period(d));
        assert_eq!(
            retention("periodic", "1"),
            period(Duration::from_secs(3600))
        );
        assert_eq!(
            retention("periodic", "30s"),
            period(Duration::from_secs(30))
        );
        assert_eq!(
            retention("periodic", "5m"),
            period(Duration::from_secs(300))
        );
        assert_eq!(
            retention("periodic", "1h30m"),
            period(Duration::from_secs(5400))
        );
        assert_eq!(
            retention("periodic", "1.5s"),
            period(Duration::from_millis(1500))
        );
        assert_eq!(
            retention("periodic", "100ms"),
            period(Duration::from_millis(100))
        );
        assert_eq!(retention("periodic", "0"), None);
        assert_eq!(retention("periodic", "0s"), None);
    }

    #[test]
    fn revision_takes_a_whole_number() {
        assert_eq!(
            retention("revision", "1000"),
            Some(Retention::Revisions(1000))
        );
        assert_eq!(retention("revision", "0"), None);
    }

    #[test]
    fn what_cannot_be_meant_is_refused() {
        for (mode, text) in [
            ("periodic", ""),
            ("periodic", "5x"),
            ("periodic", "-5m"),
            ("periodic", "1.5"),
            ("periodic", "1 h"),
            ("periodic", "1d"),
            ("periodic", "ms"),
            ("periodic", "1ms"),
            ("periodic", "99999999999999999999h"),
            ("periodic", "3000000h"),
            ("periodic", "3000000"),
            ("revision", "5m"),
            ("revision", "-1"),
            ("revision", "99999999999999999999"),
            ("hourly", "1"),
        ] {
            let e = AutoCompaction::parse(mode, text).expect_err(text);
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }

    #[test]
    fn flags_pass_the_text_unchanged() {
        let a = AutoCompaction::parse("periodic", "90m").unwrap().unwrap();
        assert_eq!(
            a.flags(),
            [
                "--auto-compaction-mode=periodic".to_string(),
                "--auto-compaction-retention=90m".to_string()
            ]
        );
    }
}
