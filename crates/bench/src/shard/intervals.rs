//! `intervals.jsonl`: every 1 s interval a shard measured, losslessly (each histogram in
//! HdrHistogram's V2 encoding, base64), one JSON object per line. latency.hlog keeps only
//! the latency series; `coordbench merge` needs the service times, schedule lags, errors by
//! kind and per-kind splits as well, to add the shards' intervals exactly.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use base64::Engine;
use coordbench_workloads::histogram::latency_histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::runner::op_classes::{ClassSplit, ClassStats};
use crate::runner::IntervalStats;

/// The file's name in a shard's run directory.
pub const INTERVALS_FILE: &str = "intervals.jsonl";

#[derive(Serialize, Deserialize)]
struct IntervalLine {
    /// Seconds since the shard's measured window began.
    second: u64,
    ops: u64,
    errors: BTreeMap<String, u64>,
    latency: String,
    service: String,
    schedule_lag: String,
    classes: Option<[ClassLine; 2]>,
}

#[derive(Serialize, Deserialize)]
struct ClassLine {
    ops: u64,
    errors: u64,
    latency: String,
}

pub fn write(path: &Path, intervals: &BTreeMap<u64, IntervalStats>) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::new(file);
    for (second, stats) in intervals {
        let line = IntervalLine {
            second: *second,
            ops: stats.ops,
            errors: stats
                .errors
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            latency: encode(&stats.latency)?,
            service: encode(&stats.service)?,
            schedule_lag: encode(&stats.schedule_lag)?,
            classes: match &stats.classes {
                Some(c) => Some([class_line(&c.read)?, class_line(&c.write)?]),
                None => None,
            },
        };
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()
        .with_context(|| format!("writing {}", path.display()))
}

pub fn read(path: &Path) -> anyhow::Result<BTreeMap<u64, IntervalStats>> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut intervals = BTreeMap::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        let parsed: IntervalLine = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}", path.display(), n + 1))?;
        let stats =
            stats_of(parsed).with_context(|| format!("{} line {}", path.display(), n + 1))?;
        intervals.insert(stats.0, stats.1);
    }
    Ok(intervals)
}

fn stats_of(line: IntervalLine) -> anyhow::Result<(u64, IntervalStats)> {
    let mut stats = IntervalStats::new();
    stats.ops = line.ops;
    stats.errors = line
        .errors
        .into_iter()
        .map(|(kind, n)| (error_kind(kind), n))
        .collect();
    stats.latency = decode(&line.latency)?;
    stats.service = decode(&line.service)?;
    stats.schedule_lag = decode(&line.schedule_lag)?;
    if let Some([read, write]) = line.classes {
        let mut split = ClassSplit::new();
        split.read = class_stats(read)?;
        split.write = class_stats(write)?;
        stats.classes = Some(Box::new(split));
    }
    Ok((line.second, stats))
}

fn class_line(c: &ClassStats) -> anyhow::Result<ClassLine> {
    Ok(ClassLine {
        ops: c.ops,
        errors: c.errors,
        latency: encode(&c.latency)?,
    })
}

fn class_stats(line: ClassLine) -> anyhow::Result<ClassStats> {
    let mut stats = ClassSplit::new().read;
    stats.ops = line.ops;
    stats.errors = line.errors;
    stats.latency = decode(&line.latency)?;
    Ok(stats)
}

fn encode(h: &Histogram<u64>) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| anyhow::anyhow!("encoding a histogram: {e:?}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A histogram read back into the recorder's bounds, so intervals add without resizing.
fn decode(text: &str) -> anyhow::Result<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .context("a histogram is not base64")?;
    let read: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| anyhow::anyhow!("decoding a histogram: {e:?}"))?;
    let mut h = latency_histogram();
    h.add(&read)
        .map_err(|e| anyhow::anyhow!("a histogram out of the recorder's bounds: {e:?}"))?;
    Ok(h)
}

/// Error kinds are a small fixed set of names; the merge keeps each once for the process.
fn error_kind(kind: String) -> &'static str {
    static KINDS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut kinds = KINDS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(known) = kinds.iter().find(|k| **k == kind) {
        return known;
    }
    let leaked: &'static str = Box::leak(kind.into_boxed_str());
    kinds.push(leaked);
    leaked
}
