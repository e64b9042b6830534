//! Reading the shard directories a merge is given, and refusing a set that is not the
//! shards of one run with one set of options, in one line.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use coordbench_bench::generator::GeneratorUsage;
use coordbench_bench::shard::ShardRecord;
use coordbench_lab::environment::Environment;
use coordbench_lab::provision::ClusterInfo;
use coordbench_lab::resources::ResourceSummary;
use coordbench_results::record::RecordHeader;

use super::MergeError;

/// What a merge reads from a shard's run.json.
#[derive(Debug, Clone, Deserialize)]
pub struct ShardRun {
    #[serde(skip)]
    pub dir: PathBuf,
    #[serde(flatten)]
    pub header: RecordHeader,
    pub config: serde_json::Value,
    pub environment: Environment,
    pub server_version: Option<String>,
    pub cluster: Option<ClusterInfo>,
    pub resources: Option<ResourceSummary>,
    pub generator: Option<GeneratorUsage>,
    pub results: Option<ShardResults>,
    pub shard: Option<ShardRecord>,
}

/// The figures of a shard's run.json `results` the merge sums or takes the largest of.
#[derive(Debug, Clone, Deserialize)]
pub struct ShardResults {
    pub window_s: f64,
    pub ops: u64,
    pub throughput_ops_s: f64,
    pub schedule_dropped: Option<u64>,
    pub requests: u64,
    pub notifications: u64,
    pub keepalives: u64,
    pub session_reestablishments: u64,
}

impl ShardRun {
    pub fn shard(&self) -> &ShardRecord {
        self.shard.as_ref().expect("checked when read")
    }

    pub fn results(&self) -> &ShardResults {
        self.results.as_ref().expect("checked when read")
    }
}

/// The shards in `dirs`, ordered by shard number, once they are known to be every shard of
/// one run with the same options, each of which measured.
pub fn read_all(dirs: &[PathBuf]) -> Result<Vec<ShardRun>, MergeError> {
    let mut shards = dirs
        .iter()
        .map(|d| read_one(d))
        .collect::<Result<Vec<_>, _>>()?;
    shards.sort_by_key(|s| s.shard().index);
    let first = &shards[0];
    for other in &shards[1..] {
        same_run(first, other)?;
    }
    let count = first.shard().count;
    let run_id = &first.shard().run_id;
    for pair in shards.windows(2) {
        if pair[0].shard().index == pair[1].shard().index {
            return Err(MergeError::Mismatch(format!(
                "{} and {} are both shard {} of run {run_id}",
                pair[0].dir.display(),
                pair[1].dir.display(),
                pair[0].shard().index
            )));
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !shards.iter().any(|s| s.shard().index == *i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Incomplete(format!(
            "run {run_id} has {count} shards; shard(s) {} missing",
            missing.join(", ")
        )));
    }
    Ok(shards)
}

fn read_one(dir: &Path) -> Result<ShardRun, MergeError> {
    let path = dir.join("run.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| MergeError::Unreadable(format!("{}: {e}", path.display())))?;
    let mut run: ShardRun = serde_json::from_str(&text)
        .map_err(|e| MergeError::Unreadable(format!("{}: {e}", path.display())))?;
    run.dir = dir.to_path_buf();
    if run.shard.is_none() {
        return Err(MergeError::NotAShard(dir.display().to_string()));
    }
    if run.results.is_none() {
        return Err(MergeError::Incomplete(format!(
            "{} measured nothing (its run.json has no results: {}); rerun that shard",
            dir.display(),
            run.header
                .error
                .as_deref()
                .unwrap_or(run.header.end_reason.name())
        )));
    }
    Ok(run)
}

/// Refuses two shards of different runs, shard counts or options.
fn same_run(a: &ShardRun, b: &ShardRun) -> Result<(), MergeError> {
    let (sa, sb) = (a.shard(), b.shard());
    let mismatch = |what: String| {
        MergeError::Mismatch(format!(
            "{} and {} are not shards of one run: {what}",
            a.dir.display(),
            b.dir.display()
        ))
    };
    if sa.run_id != sb.run_id {
        return Err(mismatch(format!("run id {} vs {}", sa.run_id, sb.run_id)));
    }
    if sa.count != sb.count {
        return Err(mismatch(format!("{} vs {} shards", sa.count, sb.count)));
    }
    if let Some(field) = first_difference(&a.config, &b.config) {
        return Err(mismatch(format!("options differ in {field}")));
    }
    Ok(())
}

/// The first top-level config field whose value differs, as `name (A vs B)`.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value) -> Option<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return (a != b).then(|| "config".to_string());
    };
    let null = serde_json::Value::Null;
    a.keys()
        .chain(b.keys())
        .find(|k| a.get(*k).unwrap_or(&null) != b.get(*k).unwrap_or(&null))
        .map(|k| {
            format!(
                "{k} ({} vs {})",
                a.get(k).unwrap_or(&null),
                b.get(k).unwrap_or(&null)
            )
        })
}
