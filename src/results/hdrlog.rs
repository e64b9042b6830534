//! `latency.hlog`: every interval's latency histogram in HdrHistogram's interval-log format
//! (V2 compressed), readable by HistogramLogProcessor and the hdrhistogram crates.
//! Values are microseconds; interval timestamps are seconds since the start of measurement.

use std::io::BufWriter;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;

use crate::results::RunRecord;
use crate::runner::RunOutcome;

pub fn write(path: &Path, record: &RunRecord, outcome: &RunOutcome) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::new(file);
    let mut serializer = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    builder
        .add_comment(&format!(
            "coordbench {} latency in microseconds; target={} workload={}",
            record.environment.coordbench_version, record.config.target, record.config.workload
        ))
        .with_max_value_divisor(1.0);
    let mut log = builder
        .begin_log_with(&mut out, &mut serializer)
        .context("writing latency.hlog")?;
    for (second, stats) in &outcome.intervals {
        log.write_histogram(
            &stats.latency,
            Duration::from_secs(*second),
            Duration::from_secs(1),
            None,
        )
        .map_err(|e| anyhow::anyhow!("writing latency.hlog: {e:?}"))?;
    }
    drop(log);
    std::io::Write::flush(&mut out).context("writing latency.hlog")?;
    Ok(())
}
