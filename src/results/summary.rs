//! `summary.csv`: one row per run, the figures people chart and compare.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::results::record::{MeasuredResults, RunRecord};
use crate::runner::RunOutcome;

/// One run. Column order is the field order; RESULTS.md documents each.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryRow {
    pub target: String,
    pub workload: String,
    pub recipe: String,
    pub cluster_size: usize,
    pub clients: usize,
    pub conns: usize,
    pub locks: usize,
    pub ttl_ms: u64,
    pub disk: String,
    pub mode: String,
    pub rate: Option<f64>,
    pub value_size: usize,
    pub duration_s: f64,
    pub ops: u64,
    pub throughput_ops_s: f64,
    pub p50_us: Option<u64>,
    pub p90_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub p999_us: Option<u64>,
    pub max_us: Option<u64>,
    pub service_p50_us: Option<u64>,
    pub service_p99_us: Option<u64>,
    pub errors: u64,
    pub violations: u64,
    pub handover_p50_us: Option<u64>,
    pub handover_p99_us: Option<u64>,
    pub requests_per_op: Option<f64>,
    pub session_reestablishments: u64,
    pub sync_p50_us: Option<u64>,
    pub sync_p99_us: Option<u64>,
    pub server_packets_received: Option<f64>,
    pub server_packets_sent: Option<f64>,
    pub server_watch_count: Option<f64>,
    pub server_version: String,
    pub client_lib: String,
    pub complete: bool,
}

impl SummaryRow {
    pub fn new(record: &RunRecord, outcome: &RunOutcome) -> Self {
        let c = &record.config;
        let r = MeasuredResults::of(outcome);
        let lock = r.lock.as_ref();
        let server = record.server_counters.as_ref();
        SummaryRow {
            target: c.target.clone(),
            workload: c.workload.clone(),
            recipe: c.recipe.clone(),
            cluster_size: record.cluster.as_ref().map_or(0, |cl| cl.members.len()),
            clients: c.clients,
            conns: c.conns,
            locks: c.locks,
            ttl_ms: c.ttl_ms,
            disk: record
                .cluster
                .as_ref()
                .and_then(|cl| cl.disk)
                .map(|d| d.to_string())
                .unwrap_or_default(),
            mode: c.mode.clone(),
            rate: c.rate,
            value_size: c.value_size,
            duration_s: r.window_s,
            ops: r.ops,
            throughput_ops_s: r.throughput_ops_s,
            p50_us: r.latency.p50_us,
            p90_us: r.latency.p90_us,
            p99_us: r.latency.p99_us,
            p999_us: r.latency.p999_us,
            max_us: r.latency.max_us,
            service_p50_us: r.service_time.p50_us,
            service_p99_us: r.service_time.p99_us,
            errors: r.errors,
            violations: r.violations,
            handover_p50_us: lock.and_then(|l| l.handover_p50_us),
            handover_p99_us: lock.and_then(|l| l.handover_p99_us),
            requests_per_op: (r.ops > 0).then(|| r.requests as f64 / r.ops as f64),
            session_reestablishments: r.session_reestablishments,
            sync_p50_us: record.sync_probe.as_ref().map(|p| p.p50_us),
            sync_p99_us: record.sync_probe.as_ref().map(|p| p.p99_us),
            server_packets_received: server.and_then(|s| s.total_delta("zk_packets_received")),
            server_packets_sent: server.and_then(|s| s.total_delta("zk_packets_sent")),
            server_watch_count: server.and_then(|s| s.total_after("zk_watch_count")),
            server_version: record.server_version.clone().unwrap_or_default(),
            client_lib: c.client_lib.clone(),
            complete: record.complete,
        }
    }
}

/// Writes `rows` to `path` with a header.
pub fn write(path: &Path, rows: &[SummaryRow]) -> anyhow::Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    for row in rows {
        w.serialize(row)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
