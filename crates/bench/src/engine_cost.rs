//! `--engine-cost`: a built-in engine's deterministic cost recorded beside a run's measured
//! figures. After the window, the binary that ran the members (`--engine-bin`, or this one)
//! counts the instructions its core and store spend per committed write on a seeded
//! simulated workload (`coordbench simulate cost`, under valgrind), so a gate comparing two
//! engine builds compares a figure that the machine's other tenants cannot move.
//! docs/reference.md ("Deterministic cost") defines it.
//!
//! The count is a property of the binary, not of the run (it repeats to within 0.15%), so a
//! process counts each binary, engine and size once and every later run of it (a gate's
//! repeats) records that count: a 10-repeat gate of 4 points otherwise spent 80 counts,
//! about 4 minutes of CPU, measuring the same number.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// What `simulate cost --json` printed, and which binary printed it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineCost {
    pub engine: String,
    pub ops: u64,
    pub seed: u64,
    /// Instructions of the runs of `ops` and `2·ops` writes.
    pub instructions: [u64; 2],
    pub instructions_per_op: f64,
    pub counter: String,
    /// The test slowdown's iterations per committed command in the counted runs.
    #[serde(default)]
    pub commit_spin: u64,
    #[serde(default)]
    pub binary: PathBuf,
}

/// A binary as it is on disk now: a rebuilt binary at the same path is counted afresh.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CountKey {
    binary: PathBuf,
    modified: Option<SystemTime>,
    len: u64,
    engine: String,
    ops: u64,
}

static COUNTED: LazyLock<Mutex<HashMap<CountKey, EngineCost>>> = LazyLock::new(Default::default);

fn counted() -> MutexGuard<'static, HashMap<CountKey, EngineCost>> {
    // A count is inserted whole or not at all; a panic elsewhere cannot leave one half-made.
    COUNTED.lock().unwrap_or_else(|p| p.into_inner())
}

/// The cost of `engine` (raft, zab) with `binary` over `ops` writes: counted by
/// [`count_afresh`] the first time this process asks for it, then the same count.
pub async fn count(binary: &Path, engine: &str, ops: u64) -> Result<EngineCost, String> {
    let meta = std::fs::metadata(binary).ok();
    let key = CountKey {
        binary: binary.to_path_buf(),
        modified: meta.as_ref().and_then(|m| m.modified().ok()),
        len: meta.map_or(0, |m| m.len()),
        engine: engine.to_string(),
        ops,
    };
    if let Some(cost) = counted().get(&key).cloned() {
        return Ok(cost);
    }
    let cost = count_afresh(binary, engine, ops).await?;
    counted().insert(key, cost.clone());
    Ok(cost)
}

/// Counts the cost of `engine` (raft, zab) with `binary` over `ops` writes (about 3 s of
/// CPU under valgrind at 1,000); the error is one line naming what failed (valgrind
/// missing, the binary lacking `simulate cost`).
async fn count_afresh(binary: &Path, engine: &str, ops: u64) -> Result<EngineCost, String> {
    let out = tokio::process::Command::new(binary)
        .args(["simulate", "cost", "--json", "--engine", engine])
        .args(["--ops", &ops.to_string()])
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("counting the engine's cost with {}: {e}", binary.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "counting the engine's cost with {} failed: {}",
            binary.display(),
            last.unwrap_or("no output")
        ));
    }
    let mut cost: EngineCost = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{} simulate cost printed no cost ({e}); is it a build with `simulate cost`?",
            binary.display()
        )
    })?;
    cost.binary = binary.to_path_buf();
    Ok(cost)
}
