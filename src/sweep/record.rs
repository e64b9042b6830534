//! The sweep's own `run.json` (the spec as written, what it expanded to, the machine, and
//! every point's status) and what a point's `run.json` says about being complete.

use coordbench_results::files::{self, FileError};
use coordbench_results::record::{read_header, EndReason, RecordHeader};
use coordbench_results::schema::SWEEP_SCHEMA;
use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::sweep::plan::Point;
use crate::sweep::spec::Spec;
use coordbench_lab::environment::Environment;

#[derive(Debug, Serialize)]
pub struct SweepRecord {
    /// Complete when every point's run is; its times are the first point's start and the
    /// last point's finish (see [`points_span`]), or the invocation's own when no point ran.
    #[serde(flatten)]
    pub header: RecordHeader,
    pub interrupted: bool,
    pub spec_file: String,
    pub name: String,
    pub description: Option<String>,
    pub quick: bool,
    /// The spec file as written.
    pub spec: String,
    pub targets: Vec<String>,
    /// The workload, or the swept workloads joined by `,`.
    pub workload: String,
    pub repeats: u32,
    /// `coordbench run` options every point shares (unless its target's own replace one).
    pub options: Vec<String>,
    /// `[targets.NAME]`: each target's own options, replacing those of `options` with the
    /// same flag for its points.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub target_options: BTreeMap<String, Vec<String>>,
    /// Axis name → values, in column order.
    pub axes: Vec<(String, Vec<String>)>,
    pub environment: Environment,
    pub points: Vec<PointStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PointStatus {
    pub name: String,
    pub target: String,
    pub repeat: u32,
    pub axes: BTreeMap<String, String>,
    /// `complete`, `skipped` (complete from an earlier invocation), `failed`,
    /// `interrupted`, or `pending` (not reached).
    pub status: String,
    pub error: Option<String>,
}

impl SweepRecord {
    pub fn new(spec: &Spec, points: &[Point], started_at: String) -> Self {
        SweepRecord {
            header: RecordHeader::begin(SWEEP_SCHEMA, started_at),
            interrupted: false,
            spec_file: spec.file.display().to_string(),
            name: spec.name.clone(),
            description: spec.description.clone(),
            quick: spec.quick,
            spec: spec.text.clone(),
            targets: spec.targets.iter().map(|(t, _)| t.clone()).collect(),
            workload: spec.workloads().join(","),
            repeats: spec.repeats,
            options: spec.settings.iter().flat_map(|s| s.args.clone()).collect(),
            target_options: spec
                .target_settings
                .iter()
                .filter(|(_, own)| !own.is_empty())
                .map(|(t, own)| (t.clone(), own.iter().flat_map(|s| s.args.clone()).collect()))
                .collect(),
            axes: spec
                .axes
                .iter()
                .map(|a| (a.axis.name().to_string(), a.values.clone()))
                .collect(),
            environment: Environment::capture(),
            points: points
                .iter()
                .map(|p| PointStatus {
                    name: p.name.clone(),
                    target: p.target.clone(),
                    repeat: p.repeat,
                    axes: p
                        .axes
                        .iter()
                        .map(|(a, v)| (a.name().to_string(), v.clone()))
                        .collect(),
                    status: "pending".into(),
                    error: None,
                })
                .collect(),
        }
    }

    pub fn write(&self, dir: &Path) -> Result<(), FileError> {
        files::write_json(&dir.join("run.json"), self)
    }

    /// Ends the record: complete when every point is, interrupted, or failed naming how
    /// many points did not complete.
    pub fn end(&mut self, interrupted: bool) {
        self.interrupted = interrupted;
        let unfinished = self
            .points
            .iter()
            .filter(|p| p.status != "complete" && p.status != "skipped")
            .count();
        let (reason, error) = match (interrupted, unfinished) {
            (true, _) => (EndReason::Interrupted, None),
            (false, 0) => (EndReason::Completed, None),
            (false, n) => (
                EndReason::Failed,
                Some(format!(
                    "{n} of {} points did not complete",
                    self.points.len()
                )),
            ),
        };
        self.header.end(reason, error);
    }
}

/// True when the point's directory holds a run.json that says the run is complete.
pub fn point_complete(dir: &Path) -> bool {
    // A capacity sweep's point is a search: its capacity.json says whether it ended.
    ["run.json", "capacity.json"]
        .iter()
        .any(|file| read_header(&dir.join(file)).is_ok_and(|h| h.complete))
}

/// When the sweep really ran: the earliest start and latest finish in its points' run.json
/// files, so a resumed sweep (even one whose rerun skipped every point) reports the span of
/// the runs it holds rather than the last invocation's. RFC 3339 UTC times of one format
/// order as strings. `None` when no point has both.
pub fn points_span(points: &[Point]) -> Option<(String, String)> {
    let mut span: Option<(String, String)> = None;
    for point in points {
        let Ok(header) = read_header(&point.dir.join("run.json")) else {
            continue;
        };
        let (started, finished) = (&header.started_at, &header.finished_at);
        if started.is_empty() || finished.is_empty() {
            continue;
        }
        span = Some(match span {
            None => (started.to_string(), finished.to_string()),
            Some((s, f)) => (s.min(started.to_string()), f.max(finished.to_string())),
        });
    }
    span
}

/// What a point's run.json says it measured, for the progress line.
#[derive(Debug, Default)]
pub struct PointFigures {
    pub throughput: Option<f64>,
    pub p99_us: Option<u64>,
    pub error: Option<String>,
    /// The run's load generator was saturated (run.json `generator_saturated`).
    pub generator_saturated: bool,
}

pub fn point_figures(dir: &Path) -> PointFigures {
    let Some(v) = std::fs::read(dir.join("run.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    else {
        return PointFigures::default();
    };
    let results = v.get("results");
    PointFigures {
        throughput: results
            .and_then(|r| r.get("throughput_ops_s"))
            .and_then(serde_json::Value::as_f64),
        p99_us: results
            .and_then(|r| r.pointer("/latency/p99_us"))
            .and_then(serde_json::Value::as_u64),
        error: v.get("error").and_then(|e| e.as_str()).map(str::to_string),
        generator_saturated: v.get("generator_saturated") == Some(&serde_json::Value::Bool(true)),
    }
}
