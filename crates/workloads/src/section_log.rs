//! `sections.jsonl`: a lock run's critical sections (an election run's leaderships), one
//! JSON object per line, times in µs on the run's clock; `observed.jsonl`: the leaders an
//! election's observers learned of, and when. A shard of a sharded run writes them so that
//! `coordbench merge` can check mutual exclusion across the shards
//! ([`crate::checker::check_sections_by_token`]) and time the observers.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Section;

/// The files' names in a run directory.
pub const SECTIONS_FILE: &str = "sections.jsonl";
pub const OBSERVED_FILE: &str = "observed.jsonl";

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

/// An observer learned that the leader holding `token` leads, at `at_us`.
#[derive(Serialize, Deserialize)]
struct ObservedLine {
    token: i64,
    at_us: u64,
}

pub fn write(path: &Path, sections: &[Section]) -> std::io::Result<()> {
    write_lines(
        path,
        sections.iter().map(|s| SectionLine {
            lock: s.lock.clone(),
            client: s.client,
            token: s.token,
            requested_us: s.requested.as_micros() as u64,
            enter_us: s.enter.as_micros() as u64,
            exit_us: s.exit.as_micros() as u64,
            released_us: s.released.map(|r| r.as_micros() as u64),
        }),
    )
}

/// The sections of `path`, each moved `shift` later (onto a clock shared with other files).
pub fn read(path: &Path, shift: Duration) -> std::io::Result<Vec<Section>> {
    read_lines(path, |line: SectionLine| {
        let at = |us: u64| Duration::from_micros(us) + shift;
        Section {
            lock: line.lock,
            client: line.client,
            token: line.token,
            requested: at(line.requested_us),
            enter: at(line.enter_us),
            exit: at(line.exit_us),
            released: line.released_us.map(at),
        }
    })
}

/// What observers saw: (leader's token, when), as `observed.jsonl`.
pub fn write_observed(path: &Path, observed: &[(i64, Duration)]) -> std::io::Result<()> {
    write_lines(
        path,
        observed.iter().map(|(token, at)| ObservedLine {
            token: *token,
            at_us: at.as_micros() as u64,
        }),
    )
}

/// `observed.jsonl`'s observations, each moved `shift` later.
pub fn read_observed(path: &Path, shift: Duration) -> std::io::Result<Vec<(i64, Duration)>> {
    read_lines(path, |line: ObservedLine| {
        (line.token, Duration::from_micros(line.at_us) + shift)
    })
}

fn write_lines<T: Serialize>(path: &Path, lines: impl Iterator<Item = T>) -> std::io::Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    for line in lines {
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

fn read_lines<T: for<'de> Deserialize<'de>, U>(
    path: &Path,
    convert: impl Fn(T) -> U,
) -> std::io::Result<Vec<U>> {
    let file = std::fs::File::open(path)?;
    let mut items = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line: T = serde_json::from_str(&line?).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} line {}: {e}", path.display(), n + 1),
            )
        })?;
        items.push(convert(line));
    }
    Ok(items)
}
