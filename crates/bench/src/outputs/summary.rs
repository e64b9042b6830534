//! `summary.csv`: one row per run, the figures people chart and compare.

use serde::Serialize;

use crate::outputs::record::{MeasuredResults, RunRecord};
use crate::runner::RunOutcome;

/// One run. Column order is the field order; docs/reference.md documents each.
#[derive(Debug, Clone, Default, Serialize)]
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
    /// Of `errors`, the operations that hit the operation timeout.
    pub timeouts: u64,
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
    /// raft, zab with `--engine-cost`: instructions per committed write (deterministic).
    pub engine_instructions_per_op: Option<f64>,
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
        let r = MeasuredResults::of(outcome);
        let mut row = SummaryRow::identity(record);
        row.load(&r);
        row.latency(&r);
        row.workload_checks(record, &r);
        row.resources(record);
        row
    }

    /// What ran: the target, workload and options, where and with which server and client;
    /// every measured column is left empty.
    fn identity(record: &RunRecord) -> Self {
        let c = &record.config;
        let cluster = record.cluster.as_ref();
        SummaryRow {
            target: c.target.clone(),
            workload: c.workload.clone(),
            recipe: c.recipe.clone(),
            cluster_size: cluster.map_or(0, |cl| cl.members.len()),
            clients: c.clients,
            conns: c.conns,
            locks: c.locks,
            ttl_ms: c.ttl_ms,
            disk: cluster
                .and_then(|cl| cl.disk)
                .map(|d| d.to_string())
                .unwrap_or_default(),
            mode: c.mode.clone(),
            rate: c.rate,
            value_size: c.value_size,
            preload_keys: c.preload.keys,
            preload_watchers: c.preload.watchers,
            preload_sessions: c.preload.sessions,
            read_ratio: c.workload_options.kv.read_ratio,
            create_keys: c.workload_options.kv.create_keys,
            watchers: c.workload_options.watch.watchers,
            sync_delay_us: c.sync_delay_us,
            net_delay_us: c.net_delay.map(|d| d.delay.as_micros() as u64),
            server_version: record.server_version.clone().unwrap_or_default(),
            server_source: cluster.and_then(|cl| cl.source.clone()).unwrap_or_default(),
            client_lib: c.client_lib.clone(),
            complete: record.header.complete,
            ..SummaryRow::default()
        }
    }

    /// How much was done in the window: operations, errors, requests, by kind.
    fn load(&mut self, r: &MeasuredResults) {
        self.duration_s = r.window_s;
        self.ops = r.ops;
        self.throughput_ops_s = r.throughput_ops_s;
        self.schedule_dropped = r.schedule_dropped;
        self.errors = r.errors;
        self.timeouts = r.timeouts;
        self.read_ops = r.reads.as_ref().map(|k| k.ops);
        self.read_errors = r.reads.as_ref().map(|k| k.errors);
        self.write_ops = r.writes.as_ref().map(|k| k.ops);
        self.write_errors = r.writes.as_ref().map(|k| k.errors);
        self.requests_per_op = (r.ops > 0).then(|| r.requests as f64 / r.ops as f64);
        self.session_reestablishments = r.session_reestablishments;
    }

    /// Latency, service time and schedule lag, overall and by kind.
    fn latency(&mut self, r: &MeasuredResults) {
        self.p50_us = r.latency.p50_us;
        self.p90_us = r.latency.p90_us;
        self.p99_us = r.latency.p99_us;
        self.p999_us = r.latency.p999_us;
        self.max_us = r.latency.max_us;
        self.service_p50_us = r.service_time.p50_us;
        self.service_p99_us = r.service_time.p99_us;
        let lag = r.schedule_lag.as_ref();
        self.schedule_lag_p50_us = lag.and_then(|l| l.p50_us);
        self.schedule_lag_p99_us = lag.and_then(|l| l.p99_us);
        self.schedule_lag_max_us = lag.and_then(|l| l.max_us);
        self.read_p50_us = r.reads.as_ref().and_then(|k| k.latency.p50_us);
        self.read_p99_us = r.reads.as_ref().and_then(|k| k.latency.p99_us);
        self.write_p50_us = r.writes.as_ref().and_then(|k| k.latency.p50_us);
        self.write_p99_us = r.writes.as_ref().and_then(|k| k.latency.p99_us);
    }

    /// What the workload's checker and the fault injector found: violations, handovers,
    /// herds, elections, propagation, versions, linearizability, fencing, faults.
    fn workload_checks(&mut self, record: &RunRecord, r: &MeasuredResults) {
        let election = r.election.as_ref();
        let handover = r.lock.as_ref().or(election.map(|e| &e.handover));
        let herd = r.herd.as_ref();
        let discovery = r.discovery.as_ref();
        let watch = r.config_watch.as_ref();
        let fencing = r.holder_pauses.as_ref();
        let faults = record.faults.as_ref();
        self.violations = r.violations;
        self.handover_p50_us = handover.and_then(|l| l.handover_p50_us);
        self.handover_p99_us = handover.and_then(|l| l.handover_p99_us);
        self.waiters = herd.and_then(|h| h.waiters);
        self.notifications_per_release = herd.and_then(|h| h.notifications_per_release);
        self.requests_per_release = herd.and_then(|h| h.requests_per_release);
        self.split_brains = election.map(|e| e.split_brains);
        self.observer_p50_us = election.and_then(|e| e.observer_p50_us);
        self.observer_p99_us = election.and_then(|e| e.observer_p99_us);
        self.registration_p50_us = discovery.and_then(|d| d.registration_p50_us);
        self.registration_p99_us = discovery.and_then(|d| d.registration_p99_us);
        self.propagation_p50_us = discovery.and_then(|d| d.propagation_p50_us);
        self.propagation_p99_us = discovery.and_then(|d| d.propagation_p99_us);
        self.propagation_max_us = discovery.and_then(|d| d.propagation_max_us);
        self.unpropagated = discovery.map(|d| d.unpropagated);
        self.requests_per_change = r.requests_per_change;
        self.crash_listed_max_ms = discovery.and_then(|d| d.crash_listed_max_ms);
        self.crash_listed_ttl_ratio = discovery.and_then(|d| d.crash_listed_ttl_ratio);
        self.notify_first_p50_us = watch.and_then(|w| w.notify_first_p50_us);
        self.notify_first_p99_us = watch.and_then(|w| w.notify_first_p99_us);
        self.notify_last_p50_us = watch.and_then(|w| w.notify_last_p50_us);
        self.notify_last_p99_us = watch.and_then(|w| w.notify_last_p99_us);
        self.updates_delivered_per_s = watch.and_then(|w| w.updates_delivered_per_s);
        self.missed_versions = watch.map(|w| w.missed_versions);
        self.coalesced_versions = watch.map(|w| w.coalesced_versions);
        self.linearizable = r.register.as_ref().map(|g| g.linearizable.to_string());
        self.stale_reads = r.register.as_ref().map(|g| g.stale_reads);
        self.protect = fencing.map_or(String::new(), |f| f.protect.to_string());
        self.unsafe_sections = fencing.map(|f| f.unsafe_sections);
        self.stale_writes_accepted = fencing.map(|f| f.stale_writes_accepted);
        self.stale_writes_rejected = fencing.map(|f| f.stale_writes_rejected);
        self.stale_writes_failed = fencing.map(|f| f.stale_writes_failed);
        self.lost_locks = fencing.map(|f| f.lost_locks);
        self.faults = faults.map(|f| f.faults);
        self.lost_writes = faults.and_then(|f| f.lost_writes.as_ref()).map(|l| l.lost);
        self.detect_p50_us = faults.and_then(|f| f.detect_p50_us);
        self.new_leader_p50_us = faults.and_then(|f| f.new_leader_p50_us);
        self.new_leader_p99_us = faults.and_then(|f| f.new_leader_p99_us);
        self.new_leader_max_us = faults.and_then(|f| f.new_leader_max_us);
        self.first_write_p50_us = faults.and_then(|f| f.first_write_p50_us);
        self.first_write_max_us = faults.and_then(|f| f.first_write_max_us);
        self.unavailable_max_us = faults.and_then(|f| f.unavailable_max_us);
    }

    /// What the servers and the generator used: sync latency, CPU, memory, packets.
    fn resources(&mut self, record: &RunRecord) {
        let probe = record.sync_probe.as_ref();
        let used = record.resources.as_ref();
        let server = record.server_counters.as_ref();
        let generator = record.generator.as_ref();
        self.sync_p50_us = probe.map(|p| p.p50_us);
        self.sync_p99_us = probe.map(|p| p.p99_us);
        self.server_peak_rss_mb = used.and_then(|u| u.peak_rss_mb);
        self.server_cpu_s = used.and_then(|u| u.cpu_s);
        self.server_cpu_us_per_op = used.and_then(|u| u.cpu_us_per_op);
        self.engine_instructions_per_op =
            record.engine_cost.as_ref().map(|c| c.instructions_per_op);
        self.server_packets_received = server.and_then(|s| s.total_delta("zk_packets_received"));
        self.server_packets_sent = server.and_then(|s| s.total_delta("zk_packets_sent"));
        self.server_watch_count = server.and_then(|s| s.total_after("zk_watch_count"));
        self.client_cpu_s = generator.map(|g| g.cpu_s);
        self.client_cpu_us_per_op = generator.and_then(|g| g.cpu_us_per_op);
        self.client_cpu_util = generator.map(|g| g.cpu_util);
        self.client_peak_rss_mb = generator.map(|g| g.peak_rss_mb);
        self.generator_saturated = generator.map(|g| g.generator_saturated);
        self.generator_saturated_s = generator.map(|g| g.saturated_s);
    }
}
