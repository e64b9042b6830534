//! One window of a capacity search: the run configuration at the probed rate, the window
//! run through [`coordbench_bench::run::measure`] on the search's cluster into its own directory, and
//! its verdict against the objectives (which failed, and whether the limit was the
//! target's, the generator's or the clients').

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::capacity::search::Limit;
use coordbench_analysis::slo::{Figures, Slo};
use coordbench_bench::config::RunConfig;
use coordbench_bench::outputs::{LatencySummary, RunRecord};
use coordbench_bench::runner::LoadMode;
use coordbench_results::kinds::WorkloadKind;

/// A window in which more than this fraction of the intended starts was never sent did
/// not offer its rate: every client was kept busy. (A loaded machine's stalls of the
/// generator leave a percent or two unsent at a window's end; more is a backlog.)
pub const MAX_UNSENT: f64 = 0.05;

/// One probe as capacity.json lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// `search` or `confirm`.
    pub kind: &'static str,
    /// Offered rate, operations per second.
    pub rate: f64,
    pub duration_s: f64,
    pub passed: bool,
    /// Objectives (or the offered rate) the window missed, with what it measured.
    pub failed: Vec<String>,
    /// Why it failed: the target's limit, or the load generator's.
    pub limited_by: Option<Limit>,
    pub throughput_ops_s: f64,
    pub figures: Figures,
    pub generator_saturated: Option<bool>,
    /// Whether the window ran on a cluster started for it (the fresh-cluster rule).
    pub fresh_cluster: bool,
    /// The window's own results directory, relative to the search's.
    pub dir: String,
}

/// The run configuration of a window at `rate` lasting `duration`.
pub fn at_rate(base: &RunConfig, rate: f64, duration: Duration) -> RunConfig {
    let mut config = base.clone();
    config.plan.mode = LoadMode::Open { rate };
    config.plan.duration = duration;
    config
}

/// Makes the window's warm-up at least `warmup`.
pub fn warm_up_for(config: &mut RunConfig, warmup: Duration) {
    if warmup > config.plan.warmup {
        config.plan.warmup = warmup;
    }
}

/// The window's figures as objectives read them: config-watch's are the notification
/// latency to the last watcher, every other workload's its operations' latency.
pub fn figures(record: &RunRecord) -> Figures {
    let Some(r) = &record.results else {
        return Figures::default();
    };
    let mut f = Figures {
        ops: r.ops,
        errors: r.errors,
        ..latency_figures(&r.latency)
    };
    if let Some(w) = &r.config_watch {
        f.p50_us = w.notify_last_p50_us;
        f.p90_us = None;
        f.p99_us = w.notify_last_p99_us;
        f.p999_us = None;
        f.max_us = w.notify_last_max_us;
    }
    f
}

fn latency_figures(l: &LatencySummary) -> Figures {
    Figures {
        p50_us: l.p50_us,
        p90_us: l.p90_us,
        p99_us: l.p99_us,
        p999_us: l.p999_us,
        max_us: l.max_us,
        ..Figures::default()
    }
}

/// Which objectives a window missed, and why it failed; empty when it passed.
pub fn verdict(slos: &[Slo], record: &RunRecord, rate: f64) -> (Vec<String>, Option<Limit>) {
    let f = figures(record);
    let mut failed: Vec<String> = Vec::new();
    if !record.header.complete {
        let header = &record.header;
        let why = header.error.as_deref().unwrap_or(header.end_reason.name());
        failed.push(format!("window incomplete: {why}"));
    }
    for slo in slos.iter().filter(|s| !s.met(&f)) {
        failed.push(match slo.measured(&f) {
            Some(v) => format!("{slo} (measured {})", shown(slo, v)),
            None => format!("{slo} (not measured)"),
        });
    }
    if let Some(r) = &record.results {
        let offered = rate * r.window_s;
        let unsent = r.schedule_dropped.unwrap_or(0) as f64;
        if offered > 0.0 && unsent / offered > MAX_UNSENT {
            failed.push(format!(
                "rate (of {offered:.0} intended starts {unsent:.0} were never sent)"
            ));
        }
    }
    if failed.is_empty() {
        return (failed, None);
    }
    let limit = match record.generator_saturated {
        Some(true) => Limit::Generator,
        _ => Limit::Target,
    };
    (failed, Some(limit))
}

fn shown(slo: &Slo, v: f64) -> String {
    match slo.latency_bound() {
        Some(_) => format!("{:.1}ms", v / 1000.0),
        None => format!("{:.3}%", v * 100.0),
    }
}

/// The workloads a capacity search can offer a rate to, and what their rate counts.
pub fn rate_unit(workload: WorkloadKind) -> Option<&'static str> {
    match workload {
        WorkloadKind::KvPut | WorkloadKind::KvGet | WorkloadKind::KvMixed => Some("ops/s"),
        WorkloadKind::Lock => Some("acquisitions/s"),
        WorkloadKind::ConfigWatch => Some("updates/s"),
        _ => None,
    }
}

/// `probe-03-12500`: the window's directory name.
pub fn dir_name(index: usize, rate: f64) -> String {
    format!("probe-{index:02}-{rate:.0}")
}

/// Whether `dir` holds a window's summary.csv (it measured something).
pub fn has_summary(dir: &Path) -> bool {
    dir.join("summary.csv").exists()
}
