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
    pub preload_keys: Option<usize>,
    pub preload_watchers: Option<usize>,
    pub preload_sessions: Option<usize>,
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
    pub schedule_lag_p50_us: Option<u64>,
    pub schedule_lag_p99_us: Option<u64>,
    pub schedule_lag_max_us: Option<u64>,
    pub schedule_dropped: Option<u64>,
    pub errors: u64,
    /// kv-mixed: the read probability asked for (`--read-ratio`).
    pub read_ratio: Option<f64>,
    /// kv-put: every write created a new key (`--create-keys`).
    pub create_keys: bool,
    pub read_ops: Option<u64>,
    pub read_errors: Option<u64>,
    pub read_p50_us: Option<u64>,
    pub read_p99_us: Option<u64>,
    pub write_ops: Option<u64>,
    pub write_errors: Option<u64>,
    pub write_p50_us: Option<u64>,
    pub write_p99_us: Option<u64>,
    pub violations: u64,
    pub handover_p50_us: Option<u64>,
    pub handover_p99_us: Option<u64>,
    pub waiters: Option<f64>,
    pub notifications_per_release: Option<f64>,
    pub requests_per_release: Option<f64>,
    pub split_brains: Option<u64>,
    pub observer_p50_us: Option<u64>,
    pub observer_p99_us: Option<u64>,
    pub watchers: Option<usize>,
    pub registration_p50_us: Option<u64>,
    pub registration_p99_us: Option<u64>,
    pub propagation_p50_us: Option<u64>,
    pub propagation_p99_us: Option<u64>,
    pub propagation_max_us: Option<u64>,
    pub unpropagated: Option<u64>,
    pub requests_per_change: Option<f64>,
    pub crash_listed_max_ms: Option<f64>,
    pub crash_listed_ttl_ratio: Option<f64>,
    pub notify_first_p50_us: Option<u64>,
    pub notify_first_p99_us: Option<u64>,
    pub notify_last_p50_us: Option<u64>,
    pub notify_last_p99_us: Option<u64>,
    pub updates_delivered_per_s: Option<f64>,
    pub missed_versions: Option<u64>,
    pub coalesced_versions: Option<u64>,
    pub requests_per_op: Option<f64>,
    pub session_reestablishments: u64,
    /// register: `true`, `false` or `unknown`.
    pub linearizable: Option<String>,
    pub stale_reads: Option<u64>,
    pub protect: String,
    pub unsafe_sections: Option<u64>,
    pub stale_writes_accepted: Option<u64>,
    pub stale_writes_rejected: Option<u64>,
    pub stale_writes_failed: Option<u64>,
    pub lost_locks: Option<u64>,
    pub faults: Option<usize>,
    /// `--fault`: acknowledged probe writes missing when read back at the end.
    pub lost_writes: Option<u64>,
    pub detect_p50_us: Option<u64>,
    pub new_leader_p50_us: Option<u64>,
    pub new_leader_p99_us: Option<u64>,
    pub new_leader_max_us: Option<u64>,
    pub first_write_p50_us: Option<u64>,
    pub first_write_max_us: Option<u64>,
    pub unavailable_max_us: Option<u64>,
    pub sync_p50_us: Option<u64>,
    pub sync_p99_us: Option<u64>,
    pub sync_delay_us: Option<u64>,
    pub net_delay_us: Option<u64>,
    pub server_peak_rss_mb: Option<f64>,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_op: Option<f64>,
    pub server_packets_received: Option<f64>,
    pub server_packets_sent: Option<f64>,
    pub server_watch_count: Option<f64>,
    pub client_cpu_s: Option<f64>,
    pub client_cpu_us_per_op: Option<f64>,
    pub client_cpu_util: Option<f64>,
    pub client_peak_rss_mb: Option<f64>,
    pub generator_saturated: Option<bool>,
    pub generator_saturated_s: Option<f64>,
    pub server_version: String,
    /// Where a started etcd or ZooKeeper came from (run.json's `cluster.source`):
    /// `coordbench install`'s provenance or the Debian package.
    pub server_source: String,
    pub client_lib: String,
    pub complete: bool,
}

impl SummaryRow {
    pub fn new(record: &RunRecord, outcome: &RunOutcome) -> Self {
        let c = &record.config;
        let r = MeasuredResults::of(outcome);
        let election = r.election.as_ref();
        let handover = r.lock.as_ref().or(election.map(|e| &e.handover));
        let herd = r.herd.as_ref();
        let discovery = r.discovery.as_ref();
        let watch = r.config_watch.as_ref();
        let server = record.server_counters.as_ref();
        let faults = record.faults.as_ref();
        let fencing = r.holder_pauses.as_ref();
        let generator = record.generator.as_ref();
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
            preload_keys: c.preload.keys,
            preload_watchers: c.preload.watchers,
            preload_sessions: c.preload.sessions,
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
            schedule_lag_p50_us: r.schedule_lag.as_ref().and_then(|l| l.p50_us),
            schedule_lag_p99_us: r.schedule_lag.as_ref().and_then(|l| l.p99_us),
            schedule_lag_max_us: r.schedule_lag.as_ref().and_then(|l| l.max_us),
            schedule_dropped: r.schedule_dropped,
            errors: r.errors,
            read_ratio: c.workload_options.read_ratio,
            create_keys: c.workload_options.create_keys,
            read_ops: r.reads.as_ref().map(|k| k.ops),
            read_errors: r.reads.as_ref().map(|k| k.errors),
            read_p50_us: r.reads.as_ref().and_then(|k| k.latency.p50_us),
            read_p99_us: r.reads.as_ref().and_then(|k| k.latency.p99_us),
            write_ops: r.writes.as_ref().map(|k| k.ops),
            write_errors: r.writes.as_ref().map(|k| k.errors),
            write_p50_us: r.writes.as_ref().and_then(|k| k.latency.p50_us),
            write_p99_us: r.writes.as_ref().and_then(|k| k.latency.p99_us),
            violations: r.violations,
            handover_p50_us: handover.and_then(|l| l.handover_p50_us),
            handover_p99_us: handover.and_then(|l| l.handover_p99_us),
            waiters: herd.and_then(|h| h.waiters),
            notifications_per_release: herd.and_then(|h| h.notifications_per_release),
            requests_per_release: herd.and_then(|h| h.requests_per_release),
            split_brains: election.map(|e| e.split_brains),
            observer_p50_us: election.and_then(|e| e.observer_p50_us),
            observer_p99_us: election.and_then(|e| e.observer_p99_us),
            watchers: c.workload_options.watchers,
            registration_p50_us: discovery.and_then(|d| d.registration_p50_us),
            registration_p99_us: discovery.and_then(|d| d.registration_p99_us),
            propagation_p50_us: discovery.and_then(|d| d.propagation_p50_us),
            propagation_p99_us: discovery.and_then(|d| d.propagation_p99_us),
            propagation_max_us: discovery.and_then(|d| d.propagation_max_us),
            unpropagated: discovery.map(|d| d.unpropagated),
            requests_per_change: r.requests_per_change,
            crash_listed_max_ms: discovery.and_then(|d| d.crash_listed_max_ms),
            crash_listed_ttl_ratio: discovery.and_then(|d| d.crash_listed_ttl_ratio),
            notify_first_p50_us: watch.and_then(|w| w.notify_first_p50_us),
            notify_first_p99_us: watch.and_then(|w| w.notify_first_p99_us),
            notify_last_p50_us: watch.and_then(|w| w.notify_last_p50_us),
            notify_last_p99_us: watch.and_then(|w| w.notify_last_p99_us),
            updates_delivered_per_s: watch.and_then(|w| w.updates_delivered_per_s),
            missed_versions: watch.map(|w| w.missed_versions),
            coalesced_versions: watch.map(|w| w.coalesced_versions),
            requests_per_op: (r.ops > 0).then(|| r.requests as f64 / r.ops as f64),
            session_reestablishments: r.session_reestablishments,
            linearizable: r.register.as_ref().map(|g| g.linearizable.to_string()),
            stale_reads: r.register.as_ref().map(|g| g.stale_reads),
            protect: fencing.map_or(String::new(), |f| f.protect.to_string()),
            unsafe_sections: fencing.map(|f| f.unsafe_sections),
            stale_writes_accepted: fencing.map(|f| f.stale_writes_accepted),
            stale_writes_rejected: fencing.map(|f| f.stale_writes_rejected),
            stale_writes_failed: fencing.map(|f| f.stale_writes_failed),
            lost_locks: fencing.map(|f| f.lost_locks),
            faults: faults.map(|f| f.faults),
            lost_writes: faults.and_then(|f| f.lost_writes.as_ref()).map(|l| l.lost),
            detect_p50_us: faults.and_then(|f| f.detect_p50_us),
            new_leader_p50_us: faults.and_then(|f| f.new_leader_p50_us),
            new_leader_p99_us: faults.and_then(|f| f.new_leader_p99_us),
            new_leader_max_us: faults.and_then(|f| f.new_leader_max_us),
            first_write_p50_us: faults.and_then(|f| f.first_write_p50_us),
            first_write_max_us: faults.and_then(|f| f.first_write_max_us),
            unavailable_max_us: faults.and_then(|f| f.unavailable_max_us),
            sync_p50_us: record.sync_probe.as_ref().map(|p| p.p50_us),
            sync_p99_us: record.sync_probe.as_ref().map(|p| p.p99_us),
            sync_delay_us: c.sync_delay_us,
            net_delay_us: c.net_delay.map(|d| d.delay.as_micros() as u64),
            server_peak_rss_mb: record.resources.as_ref().and_then(|r| r.peak_rss_mb),
            server_cpu_s: record.resources.as_ref().and_then(|r| r.cpu_s),
            server_cpu_us_per_op: record.resources.as_ref().and_then(|r| r.cpu_us_per_op),
            server_packets_received: server.and_then(|s| s.total_delta("zk_packets_received")),
            server_packets_sent: server.and_then(|s| s.total_delta("zk_packets_sent")),
            server_watch_count: server.and_then(|s| s.total_after("zk_watch_count")),
            client_cpu_s: generator.map(|g| g.cpu_s),
            client_cpu_us_per_op: generator.and_then(|g| g.cpu_us_per_op),
            client_cpu_util: generator.map(|g| g.cpu_util),
            client_peak_rss_mb: generator.map(|g| g.peak_rss_mb),
            generator_saturated: generator.map(|g| g.generator_saturated),
            generator_saturated_s: generator.map(|g| g.saturated_s),
            server_version: record.server_version.clone().unwrap_or_default(),
            server_source: record
                .cluster
                .as_ref()
                .and_then(|c| c.source.clone())
                .unwrap_or_default(),
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
