//! `latency.hlog`: every interval's latency histogram in HdrHistogram's interval-log format
//! (V2 compressed), readable by HistogramLogProcessor and the hdrhistogram crates.
//! Values are microseconds; interval timestamps are seconds since the start of measurement.
//!
//! Each interval's combined histogram (every operation) is untagged. A workload that mixes
//! kinds (kv-mixed) adds, per interval, one histogram per kind tagged with its name
//! (`Tag=read`, `Tag=write`), the format's way of keeping several series in one log;
//! readers that want the combined distribution take the untagged entries only
//! ([`coordbench_analysis::report::cdf::merge_log`]).

use std::io::BufWriter;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;

use crate::outputs::RunRecord;
use crate::runner::op_classes::CLASSES;
use crate::runner::RunOutcome;

pub fn write(path: &Path, record: &RunRecord, outcome: &RunOutcome) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::new(file);
    let mut serializer = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    builder
        .add_comment(&format!(
            "coordbench {} latency in microseconds; target={} workload={}{}",
            record.environment.coordbench_version,
            record.config.target,
            record.config.workload,
            if record.config.workload_options.kv.read_ratio.is_some() {
                "; untagged: every operation, Tag=read and Tag=write: each kind alone"
            } else {
                ""
            }
        ))
        .with_max_value_divisor(1.0);
    let mut log = builder
        .begin_log_with(&mut out, &mut serializer)
        .context("writing latency.hlog")?;
    for (second, stats) in &outcome.intervals {
        let start = Duration::from_secs(*second);
        let mut series = vec![(&stats.latency, None)];
        if let Some(classes) = &stats.classes {
            for class in CLASSES {
                series.push((&classes.of(class).latency, Tag::new(class.name())));
            }
        }
        for (histogram, tag) in series {
            log.write_histogram(histogram, start, Duration::from_secs(1), tag)
                .map_err(|e| anyhow::anyhow!("writing latency.hlog: {e:?}"))?;
        }
    }
    drop(log);
    std::io::Write::flush(&mut out).context("writing latency.hlog")?;
    Ok(())
}
