//! What a capacity search writes: capacity.json (the answer, the figures at it, every
//! probe, the fresh-cluster rule; rewritten after every window, `complete: false` until the
//! search ends) and summary.csv (one row: the capacity columns, then the confirming
//! window's own summary.csv columns), and the lines it prints.

use coordbench_results::files::{self, FileError};
use coordbench_results::outcome::Outcome;
use coordbench_results::record::{EndReason, RecordHeader};
use coordbench_results::schema::CAPACITY_SCHEMA;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::capacity::probe::Probe;
use crate::capacity::search::Limit;
use coordbench_analysis::slo::{Figures, Slo};
use coordbench_bench::config::RunConfig;
use coordbench_bench::outputs::RunRecord;
use coordbench_results::kinds::value_name;

/// capacity.json.
#[derive(Debug, Clone, Serialize)]
pub struct CapacityRecord {
    /// Complete when the search ran to its answer (or found that no rate passes);
    /// `completed`, `interrupted` or `failed`.
    #[serde(flatten)]
    pub header: RecordHeader,
    pub target: String,
    pub workload: String,
    /// What the rate counts (`ops/s`, `acquisitions/s`, `updates/s`).
    pub rate_unit: &'static str,
    pub slos: Vec<String>,
    /// The highest rate whose confirming window met every objective.
    pub max_rate_ops_s: Option<f64>,
    /// Without a confirmed answer: the highest rate a search window passed at.
    pub unconfirmed_rate_ops_s: Option<f64>,
    /// Why the lowest failing window failed: `target`, or `generator` when the load
    /// generator saturated (the answer is then a lower bound on the target's capacity).
    pub limited_by: Option<Limit>,
    /// The confirming window at the answer.
    pub at_max_rate: Option<AtMaxRate>,
    pub fresh_cluster_rule: &'static str,
    pub probes: Vec<Probe>,
    /// The run configuration every window shares (its rate and duration aside).
    pub config: coordbench_bench::config::record::ConfigRecord,
}

/// The figures of the window that confirmed the answer.
#[derive(Debug, Clone, Serialize)]
pub struct AtMaxRate {
    pub throughput_ops_s: f64,
    pub figures: Figures,
    pub server_peak_rss_mb: Option<f64>,
    pub server_cpu_us_per_op: Option<f64>,
    pub dir: String,
}

impl AtMaxRate {
    pub fn of(probe: &Probe, record: &RunRecord) -> Self {
        let resources = record.resources.as_ref();
        AtMaxRate {
            throughput_ops_s: probe.throughput_ops_s,
            figures: probe.figures,
            server_peak_rss_mb: resources.and_then(|r| r.peak_rss_mb),
            server_cpu_us_per_op: resources.and_then(|r| r.cpu_us_per_op),
            dir: probe.dir.clone(),
        }
    }
}

/// The rule settle.rs applies, as capacity.json states it.
pub const FRESH_CLUSTER_RULE: &str = "every window runs on the search's one cluster until a \
window fails; the window after a failed one runs on a fresh cluster (stopped, started again \
and preloaded again), since a failed window may leave requests queued, a grown log or a \
snapshot under way that one fast read does not reveal; attached clusters are never replaced";

impl CapacityRecord {
    pub fn new(config: &RunConfig, slos: &[Slo], rate_unit: &'static str, now: String) -> Self {
        CapacityRecord {
            header: RecordHeader::begin(CAPACITY_SCHEMA, now),
            target: value_name(config.target),
            workload: value_name(config.workload),
            rate_unit,
            slos: slos.iter().map(Slo::to_string).collect(),
            max_rate_ops_s: None,
            unconfirmed_rate_ops_s: None,
            limited_by: None,
            at_max_rate: None,
            fresh_cluster_rule: FRESH_CLUSTER_RULE,
            probes: Vec::new(),
            config: config.record(),
        }
    }

    /// Sets `unconfirmed_rate_ops_s` when there is no answer.
    pub fn note_unconfirmed(&mut self) {
        self.unconfirmed_rate_ops_s = match self.max_rate_ops_s {
            Some(_) => None,
            None => self
                .probes
                .iter()
                .filter(|p| p.passed)
                .map(|p| p.rate)
                .reduce(f64::max),
        };
    }

    /// Ends the search's record as `outcome` says (keeping the error it recorded).
    pub fn end(&mut self, outcome: Outcome) {
        let reason = match outcome {
            Outcome::Complete => EndReason::Completed,
            Outcome::Interrupted => EndReason::Interrupted,
            Outcome::Failed | Outcome::Breached => EndReason::Failed,
        };
        let error = self.header.error.take();
        self.header.end(reason, error);
    }

    pub fn write_json(&self, dir: &Path) -> Result<(), FileError> {
        files::write_json(&dir.join("capacity.json"), self)
    }

    /// `500:pass;1000:fail(p99<20ms)`: every probe in one cell.
    pub fn probes_cell(&self) -> String {
        let cells: Vec<String> = self
            .probes
            .iter()
            .map(|p| {
                let verdict = match p.failed.first() {
                    None => "pass".to_string(),
                    Some(f) => format!("fail({})", f.split(" (").next().unwrap_or(f)),
                };
                format!("{:.0}:{verdict}", p.rate)
            })
            .collect();
        cells.join(";")
    }

    /// summary.csv: the capacity columns, then the answer's window's summary.csv columns
    /// (or, without an answer, the target and workload).
    pub fn write_summary(&self, dir: &Path) -> anyhow::Result<()> {
        let mut header: Vec<String> = ["max_rate_ops_s", "slo", "limited_by", "probes"]
            .map(String::from)
            .to_vec();
        let mut row = vec![
            self.max_rate_ops_s
                .map_or(String::new(), |r| format!("{r:.1}")),
            self.slos.join(" and "),
            self.limited_by.map_or(String::new(), limit_name),
            self.probes_cell(),
        ];
        let window = self
            .at_max_rate
            .as_ref()
            .map(|a| dir.join(&a.dir).join("summary.csv"));
        match window.filter(|p| p.exists()) {
            Some(path) => {
                let mut reader = csv::Reader::from_path(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                header.extend(reader.headers()?.iter().map(String::from));
                if let Some(record) = reader.records().next() {
                    row.extend(record?.iter().map(String::from));
                }
            }
            None => {
                header.extend(["target", "workload", "complete"].map(String::from));
                row.extend([self.target.clone(), self.workload.clone(), "false".into()]);
            }
        }
        Ok(files::write_csv_table(
            &dir.join("summary.csv"),
            &header,
            [&row],
        )?)
    }
}

pub fn limit_name(limit: Limit) -> String {
    match limit {
        Limit::Target => "target",
        Limit::Generator => "generator",
    }
    .to_string()
}

/// One line per window as the search runs.
pub fn probe_line(index: usize, p: &Probe, unit: &str) -> String {
    let ms = |us: Option<u64>| us.map_or("-".into(), |v| format!("{:.2}ms", v as f64 / 1000.0));
    let verdict = if p.passed {
        "pass".to_string()
    } else {
        let limit = p
            .limited_by
            .map_or(String::new(), |l| format!(" [{}]", limit_name(l)));
        format!("FAIL {}{limit}", p.failed.join(", "))
    };
    format!(
        "probe {index:>2} {:<7} {:>9.0} {unit} {:>3.0}s{}: {:>9.1} {unit}, p50 {} p99 {} p99.9 {}: {verdict}",
        p.kind,
        p.rate,
        p.duration_s,
        if p.fresh_cluster { " (fresh cluster)" } else { "" },
        p.throughput_ops_s,
        ms(p.figures.p50_us),
        ms(p.figures.p99_us),
        ms(p.figures.p999_us),
    )
}

/// The answer in one line.
pub fn answer_line(r: &CapacityRecord) -> String {
    let slos = r.slos.join(" and ");
    match (r.max_rate_ops_s, r.limited_by) {
        (Some(rate), limit) => {
            let bound = match limit {
                Some(Limit::Generator) => "; the lowest failing window saturated the load generator, so this is a lower bound on the target's capacity",
                Some(Limit::Target) => "; the lowest failing window was the target's limit",
                None => "; no window failed (raise --max-rate)",
            };
            format!(
                "max rate at {slos}: {rate:.0} {} on {} {}{bound}",
                r.rate_unit, r.target, r.workload
            )
        }
        (None, _) => {
            let passed = r.unconfirmed_rate_ops_s.map_or(String::new(), |rate| {
                format!(
                    "; the highest rate a search window passed was {rate:.0} {}, unconfirmed",
                    r.rate_unit
                )
            });
            format!(
                "no rate met {slos} for a whole confirming window on {} {} ({} windows, every one in capacity.json){passed}",
                r.target,
                r.workload,
                r.probes.len()
            )
        }
    }
}
