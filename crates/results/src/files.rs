//! How result files are written and read back: JSON records pretty-printed with a final
//! newline and replaced whole (written beside, then renamed, so a record rewritten after
//! every window is never seen half-written), and CSV tables with a header row, either from
//! rows that serialize themselves or from named columns. Every error names its file.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A result file that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("encoding {path}: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("writing {path}: {source}")]
    Csv { path: PathBuf, source: csv::Error },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Writes `record` to `path` as pretty JSON with a final newline, replacing any earlier
/// version in one rename.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, record: &T) -> Result<(), FileError> {
    let json = serde_json::to_string_pretty(record).map_err(|source| FileError::Json {
        path: path.into(),
        source,
    })? + "\n";
    let io = |source| FileError::Io {
        path: path.into(),
        source,
    };
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, json).map_err(io)?;
    std::fs::rename(&partial, path).map_err(io)
}

/// Reads the JSON file at `path` as `T` (fields `T` does not name are ignored).
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, FileError> {
    let bytes = std::fs::read(path).map_err(|source| FileError::Read {
        path: path.into(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| FileError::Parse {
        path: path.into(),
        source,
    })
}

/// Writes `rows` to `path` as CSV, the header taken from the rows' field names.
pub fn write_csv_rows<R: Serialize>(
    path: &Path,
    rows: impl IntoIterator<Item = R>,
) -> Result<(), FileError> {
    let csv_error = |source| FileError::Csv {
        path: path.into(),
        source,
    };
    let mut w = csv::Writer::from_path(path).map_err(csv_error)?;
    for row in rows {
        w.serialize(row).map_err(csv_error)?;
    }
    flush(path, w)
}

/// Writes a CSV table of named columns to `path`: `header`, then each record.
pub fn write_csv_table<H, R>(
    path: &Path,
    header: impl IntoIterator<Item = H>,
    records: impl IntoIterator<Item = R>,
) -> Result<(), FileError>
where
    H: AsRef<[u8]>,
    R: IntoIterator,
    R::Item: AsRef<[u8]>,
{
    let csv_error = |source| FileError::Csv {
        path: path.into(),
        source,
    };
    let mut w = csv::Writer::from_path(path).map_err(csv_error)?;
    w.write_record(header).map_err(csv_error)?;
    for record in records {
        w.write_record(record).map_err(csv_error)?;
    }
    flush(path, w)
}

fn flush(path: &Path, mut w: csv::Writer<std::fs::File>) -> Result<(), FileError> {
    w.flush().map_err(|source| FileError::Io {
        path: path.into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        target: &'static str,
        p99_us: Option<u64>,
    }

    #[test]
    fn rows_and_tables_write_a_header_then_their_values() {
        let dir = tempfile::tempdir().unwrap();
        let rows = dir.path().join("rows.csv");
        write_csv_rows(
            &rows,
            [
                Row {
                    target: "raft",
                    p99_us: None,
                },
                Row {
                    target: "etcd",
                    p99_us: Some(9),
                },
            ],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&rows).unwrap(),
            "target,p99_us\nraft,\netcd,9\n"
        );
        let table = dir.path().join("table.csv");
        write_csv_table(&table, ["a", "b"], [vec!["1", "x,y"]]).unwrap();
        assert_eq!(std::fs::read_to_string(&table).unwrap(), "a,b\n1,\"x,y\"\n");
    }

    #[test]
    fn json_replaces_the_file_whole_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        write_json(&path, &serde_json::json!({"complete": false})).unwrap();
        write_json(&path, &serde_json::json!({"complete": true})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\n  \"complete\": true\n}\n"
        );
        assert!(!dir.path().join("run.json.partial").exists());
        let back: serde_json::Value = read_json(&path).unwrap();
        assert_eq!(back["complete"], true);
    }

    #[test]
    fn errors_name_the_file() {
        let missing = Path::new("/nonexistent-dir/run.json");
        let e = write_json(missing, &1).unwrap_err().to_string();
        assert!(e.starts_with("writing /nonexistent-dir/run.json: "), "{e}");
        let e = read_json::<u32>(missing).unwrap_err().to_string();
        assert!(e.starts_with("reading /nonexistent-dir/run.json: "), "{e}");
    }
}
