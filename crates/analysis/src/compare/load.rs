//! The runs of one side of a comparison, read from result directories as they are: a run
//! directory (run.json of schema `coordbench.run/1`), a sweep or gate side directory
//! (run.json of schema `coordbench.sweep/1`, whose points are run directories), or a plain
//! directory holding any of these. Each complete run becomes one [`Run`]: its configuration
//! (run.json `config`, flattened to text), its summary.csv row, where its latency.hlog is,
//! and its repeat index when a sweep or gate-side run.json lists it (for pairing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::report::table::{Row, Table};

/// A side that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}: no such directory")]
    Missing(String),
    #[error("{path}: {message}")]
    Unreadable { path: String, message: String },
    #[error("{0}: holds no coordbench run (no run.json here or one level down)")]
    Empty(String),
}

/// One complete run.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    /// run.json `config`, each scalar as text (objects as compact JSON).
    pub config: BTreeMap<String, String>,
    /// The run's summary.csv row.
    pub summary: Row,
    /// run.json `results.errors_by_kind`.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The share of its window the generator waited for a CPU (run.json
    /// `generator.runqueue_wait_s` / `results.window_s`), when the run records it.
    pub cpu_wait_share: Option<f64>,
    /// The repeat index a sweep or gate side gave the run (its run.json `points[].repeat`);
    /// a gate's baseline and candidate runs of one repeat ran as a pair.
    pub repeat: Option<u32>,
}

impl Run {
    pub fn hlog(&self) -> PathBuf {
        self.dir.join("latency.hlog")
    }

    pub fn config_value(&self, key: &str) -> &str {
        self.config.get(key).map_or("", String::as_str)
    }
}

/// What one side held.
#[derive(Debug, Default)]
pub struct Side {
    pub runs: Vec<Run>,
    /// Run directories left out because their run did not complete.
    pub incomplete: Vec<PathBuf>,
}

/// Config fields that say nothing about what was measured.
const IGNORED_CONFIG: &[&str] = &["base_port"];

/// Reads every run under `paths` (each a run, sweep or parent directory).
pub fn side(paths: &[PathBuf]) -> Result<Side, LoadError> {
    let mut side = Side::default();
    for path in paths {
        let before = side.runs.len() + side.incomplete.len();
        collect(path, 0, &mut side)?;
        if side.runs.len() + side.incomplete.len() == before {
            return Err(LoadError::Empty(path.display().to_string()));
        }
    }
    Ok(side)
}

fn collect(path: &Path, depth: usize, side: &mut Side) -> Result<(), LoadError> {
    if !path.is_dir() {
        return Err(LoadError::Missing(path.display().to_string()));
    }
    let record = path.join("run.json");
    if record.is_file() {
        let json = read_json(&record)?;
        return match json.get("schema").and_then(|s| s.as_str()) {
            Some(s) if s.starts_with("coordbench.sweep/") => sweep_points(path, &json, side),
            _ => {
                let before = side.runs.len();
                run(path, &json, side)?;
                set_repeat(side, before, repeat_in_parent(path));
                Ok(())
            }
        };
    }
    if depth > 0 {
        return Ok(());
    }
    let mut children: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| unreadable(path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("run.json").is_file())
        .collect();
    children.sort();
    for child in children {
        collect(&child, depth + 1, side)?;
    }
    Ok(())
}

/// A sweep's points, in the order its run.json lists them.
fn sweep_points(dir: &Path, json: &serde_json::Value, side: &mut Side) -> Result<(), LoadError> {
    let points = json
        .get("points")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    for point in points {
        let Some(name) = point.get("name").and_then(|n| n.as_str()) else {
            continue;
        };
        let point_dir = dir.join(name);
        let record = point_dir.join("run.json");
        if record.is_file() {
            let before = side.runs.len();
            run(&point_dir, &read_json(&record)?, side)?;
            set_repeat(side, before, repeat_of(&point));
        }
    }
    Ok(())
}

/// A sweep point's `repeat`.
fn repeat_of(point: &serde_json::Value) -> Option<u32> {
    let repeat = point.get("repeat")?.as_u64()?;
    u32::try_from(repeat).ok()
}

/// Gives the run added at `index` (if one was: an incomplete run is not) its repeat.
fn set_repeat(side: &mut Side, index: usize, repeat: Option<u32>) {
    if let Some(added) = side.runs.get_mut(index) {
        added.repeat = repeat;
    }
}

/// The repeat index of a run directory named on its own, from the sweep or gate-side
/// run.json of the directory above it, when that lists the run.
fn repeat_in_parent(dir: &Path) -> Option<u32> {
    let name = dir.file_name()?.to_str()?;
    let text = std::fs::read(dir.parent()?.join("run.json")).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let schema = json.get("schema")?.as_str()?;
    if !schema.starts_with("coordbench.sweep/") {
        return None;
    }
    json.get("points")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(|n| n.as_str()) == Some(name))
        .and_then(repeat_of)
}

fn run(dir: &Path, json: &serde_json::Value, side: &mut Side) -> Result<(), LoadError> {
    let complete = json.get("complete").and_then(|c| c.as_bool()) == Some(true);
    let summary_path = dir.join("summary.csv");
    if !complete || !summary_path.is_file() {
        side.incomplete.push(dir.to_path_buf());
        return Ok(());
    }
    let table = Table::read(&summary_path).map_err(|e| LoadError::Unreadable {
        path: summary_path.display().to_string(),
        message: e.to_string(),
    })?;
    let Some(summary) = table.rows.into_iter().next() else {
        side.incomplete.push(dir.to_path_buf());
        return Ok(());
    };
    let config = json
        .get("config")
        .and_then(|c| c.as_object())
        .map(|c| {
            c.iter()
                .filter(|(k, _)| !IGNORED_CONFIG.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), text_of(v)))
                .collect()
        })
        .unwrap_or_default();
    let errors_by_kind = json
        .pointer("/results/errors_by_kind")
        .and_then(|e| e.as_object())
        .map(|e| {
            e.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    let wait = json
        .pointer("/generator/runqueue_wait_s")
        .and_then(|v| v.as_f64());
    let window = json.pointer("/results/window_s").and_then(|v| v.as_f64());
    side.runs.push(Run {
        dir: dir.to_path_buf(),
        config,
        summary,
        errors_by_kind,
        cpu_wait_share: wait
            .zip(window)
            .filter(|(_, w)| *w > 0.0)
            .map(|(a, w)| a / w),
        repeat: None,
    });
    Ok(())
}

fn text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, LoadError> {
    let bytes = std::fs::read(path).map_err(|e| unreadable(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| unreadable(path, e))
}

fn unreadable(path: &Path, e: impl std::fmt::Display) -> LoadError {
    LoadError::Unreadable {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}
