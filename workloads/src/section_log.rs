//! `sections.jsonl`: a lock run's critical sections, one JSON object per line, times in µs
//! on the run's clock. A shard of a sharded run writes it so that `coordbench merge` can
//! check mutual exclusion across the shards ([`crate::checker::check_sections_by_token`]).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Section;

/// The file's name in a run directory.
pub const SECTIONS_FILE: &str = "sections.jsonl";

#[derive(Serialize, Deserialize)]
struct SectionLine {
    lock: String,
    client: usize,
    token: i64,
    requested_us: u64,
    enter_us: u64,
    exit_us: u64,
    released_us: Option<u64>,
}

pub fn write(path: &Path, sections: &[Section]) -> std::io::Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    for s in sections {
        let line = SectionLine {
            lock: s.lock.clone(),
            client: s.client,
            token: s.token,
            requested_us: s.requested.as_micros() as u64,
            enter_us: s.enter.as_micros() as u64,
            exit_us: s.exit.as_micros() as u64,
            released_us: s.released.map(|r| r.as_micros() as u64),
        };
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// The sections of `path`, each moved `shift` later (onto a clock shared with other files).
pub fn read(path: &Path, shift: Duration) -> std::io::Result<Vec<Section>> {
    let file = std::fs::File::open(path)?;
    let mut sections = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line: SectionLine = serde_json::from_str(&line?).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} line {}: {e}", path.display(), n + 1),
            )
        })?;
        let at = |us: u64| Duration::from_micros(us) + shift;
        sections.push(Section {
            lock: line.lock,
            client: line.client,
            token: line.token,
            requested: at(line.requested_us),
            enter: at(line.enter_us),
            exit: at(line.exit_us),
            released: line.released_us.map(at),
        });
    }
    Ok(sections)
}
