//! `coordbench simulate throughput`: a CPU model of a leader-based service's saturated
//! throughput against cluster size and read ratio, calibrated on runs measured here.
//!
//! Why a model: the ZooKeeper paper's Table 1 shows reads rising and writes falling as
//! servers are added, on a cluster with a machine per server. On two cores every member
//! shares the same CPUs, so adding members cannot add read capacity; this model asks what
//! the measured per-operation CPU costs would give with `--cores` per server.
//!
//! The model (docs/reference.md, "simulate throughput"), per operation at read ratio ρ with N
//! members, clients spread evenly over the members, reads answered locally:
//! - leader CPU:   ρ·r/N + (1−ρ)·(w_leader + (N−1)·w_send)
//! - follower CPU: ρ·r/N + (1−ρ)·w_follower
//!
//! and the saturated rate is `cores / max(leader, follower)`. CPU only: the disk, the
//! network and the clients are taken to keep up (the paper's servers had dedicated disks).
//!
//! Calibration ([`calibrate`]) reads three runs per target: kv-put on one member
//! (`w_leader`: the whole write path with no follower), kv-put on N ≥ 2 members (the
//! leader's and the followers' CPU, told apart in resources.csv: the leader is the member
//! that used the most; `w_send` is the leader's extra per follower) and kv-get (`r`: all
//! members' CPU per read).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// CPU microseconds per operation, as calibrated (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OpCosts {
    pub read_us: f64,
    pub write_leader_us: f64,
    pub write_send_us: f64,
    pub write_follower_us: f64,
}

/// Which member saturates first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bottleneck {
    Leader,
    Follower,
}

impl Bottleneck {
    pub fn name(self) -> &'static str {
        match self {
            Bottleneck::Leader => "leader",
            Bottleneck::Follower => "follower",
        }
    }
}

/// The model's answer for one cluster size and read ratio.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Saturation {
    pub ops_s: f64,
    pub bottleneck: Bottleneck,
}

/// Saturated throughput of `members` servers with `cores` each at `read_ratio` (0–1).
pub fn saturated(costs: &OpCosts, members: u32, read_ratio: f64, cores: f64) -> Saturation {
    let n = f64::from(members.max(1));
    let reads = read_ratio * costs.read_us / n;
    let writes = 1.0 - read_ratio;
    let leader = reads + writes * (costs.write_leader_us + (n - 1.0) * costs.write_send_us);
    let follower = reads + writes * costs.write_follower_us;
    let (busiest, bottleneck) = if members <= 1 || leader >= follower {
        (leader, Bottleneck::Leader)
    } else {
        (follower, Bottleneck::Follower)
    };
    Saturation {
        ops_s: if busiest > 0.0 {
            cores * 1e6 / busiest
        } else {
            f64::INFINITY
        },
        bottleneck,
    }
}

/// What one measured run contributes to a calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub dir: PathBuf,
    pub target: String,
    pub workload: String,
    pub cluster_size: u32,
    /// All members' CPU per successful op in the window, µs.
    pub server_cpu_us_per_op: f64,
    /// The busiest member's share of the members' CPU over the run (0–1).
    pub busiest_share: f64,
}

/// Reads a run directory's summary.csv and resources.csv.
pub fn read_run(dir: &Path) -> Result<Measured, String> {
    let summary = dir.join("summary.csv");
    let mut rows =
        csv::Reader::from_path(&summary).map_err(|e| format!("{}: {e}", summary.display()))?;
    let headers = rows.headers().map_err(|e| e.to_string())?.clone();
    let row = rows
        .records()
        .last()
        .ok_or_else(|| format!("{}: no row", summary.display()))?
        .map_err(|e| format!("{}: {e}", summary.display()))?;
    let field = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .and_then(|i| row.get(i))
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{}: no {name}", summary.display()))
    };
    let number = |name: &str| -> Result<f64, String> {
        field(name)?
            .parse::<f64>()
            .map_err(|e| format!("{}: {name}: {e}", summary.display()))
    };
    Ok(Measured {
        dir: dir.to_path_buf(),
        target: field("target")?.to_string(),
        workload: field("workload")?.to_string(),
        cluster_size: number("cluster_size")? as u32,
        server_cpu_us_per_op: number("server_cpu_us_per_op")?,
        busiest_share: busiest_share(&dir.join("resources.csv"))?,
    })
}

/// The share of the members' CPU that the busiest member used, from resources.csv's
/// cumulative `cpu_s` per member (last sample minus first).
fn busiest_share(path: &Path) -> Result<f64, String> {
    let mut rows = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut span: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for row in rows.deserialize::<ResourceRow>() {
        let row = row.map_err(|e| format!("{}: {e}", path.display()))?;
        let entry = span.entry(row.member).or_insert((row.cpu_s, row.cpu_s));
        entry.0 = entry.0.min(row.cpu_s);
        entry.1 = entry.1.max(row.cpu_s);
    }
    let used: Vec<f64> = span.values().map(|(first, last)| last - first).collect();
    let total: f64 = used.iter().sum();
    if total <= 0.0 {
        return Err(format!("{}: the members used no CPU", path.display()));
    }
    Ok(used.iter().copied().fold(0.0, f64::max) / total)
}

#[derive(serde::Deserialize)]
struct ResourceRow {
    member: String,
    cpu_s: f64,
}

/// Every run directory under `roots` (a directory holding run.json and summary.csv).
pub fn find_runs(roots: &[PathBuf]) -> Result<Vec<Measured>, String> {
    let mut dirs = Vec::new();
    for root in roots {
        collect_run_dirs(root, &mut dirs)
            .map_err(|e| format!("reading {}: {e}", root.display()))?;
    }
    if dirs.is_empty() {
        return Err("no run directories (with run.json) under the --calibrate paths".into());
    }
    dirs.sort();
    dirs.iter().map(|d| read_run(d)).collect()
}

fn collect_run_dirs(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if dir.join("run.json").is_file() && dir.join("resources.csv").is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_run_dirs(&path, out)?;
        }
    }
    Ok(())
}

/// Per target, the costs its runs give (see the module doc). A target lacking one of the
/// three runs is an error naming the run to make.
pub fn calibrate(runs: &[Measured]) -> Result<BTreeMap<String, OpCosts>, String> {
    let mut targets: BTreeMap<&str, Vec<&Measured>> = BTreeMap::new();
    for run in runs {
        targets.entry(run.target.as_str()).or_default().push(run);
    }
    targets
        .into_iter()
        .map(|(target, runs)| Ok((target.to_string(), calibrate_target(target, &runs)?)))
        .collect()
}

fn calibrate_target(target: &str, runs: &[&Measured]) -> Result<OpCosts, String> {
    let missing = |what: &str, how: &str| {
        format!(
            "target {target}: no {what} run to calibrate from; add one (`coordbench run --target {target} {how}`, or workloads/throughput-calibration.toml)"
        )
    };
    // The mean of `figure` over the runs `pick` selects; `None` when it selects none.
    let mean = |pick: &dyn Fn(&Measured) -> bool, figure: &dyn Fn(&Measured) -> f64| {
        let values: Vec<f64> = runs.iter().filter(|r| pick(r)).map(|r| figure(r)).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let cpu = |r: &Measured| r.server_cpu_us_per_op;
    let write_leader_us = mean(&|r| r.workload == "kv-put" && r.cluster_size == 1, &cpu)
        .ok_or_else(|| missing("one-member kv-put", "--workload kv-put --cluster-size 1"))?;
    let largest = runs
        .iter()
        .filter(|r| r.workload == "kv-put" && r.cluster_size >= 2)
        .map(|r| r.cluster_size)
        .max()
        .ok_or_else(|| {
            missing(
                "kv-put on 2 or more members",
                "--workload kv-put --cluster-size 3",
            )
        })?;
    let replicated = |r: &Measured| r.workload == "kv-put" && r.cluster_size == largest;
    let leader_us = mean(&replicated, &|r| cpu(r) * r.busiest_share).unwrap_or(0.0);
    let followers_us = mean(&replicated, &|r| cpu(r) * (1.0 - r.busiest_share)).unwrap_or(0.0);
    let read_us = mean(&|r| r.workload == "kv-get", &cpu)
        .ok_or_else(|| missing("kv-get", "--workload kv-get --cluster-size 3"))?;
    let followers = f64::from(largest - 1);
    Ok(OpCosts {
        read_us,
        write_leader_us,
        write_send_us: ((leader_us - write_leader_us) / followers).max(0.0),
        write_follower_us: followers_us / followers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> OpCosts {
        OpCosts {
            read_us: 20.0,
            write_leader_us: 60.0,
            write_send_us: 10.0,
            write_follower_us: 30.0,
        }
    }

    #[test]
    fn writes_fall_and_reads_rise_with_members() {
        let c = costs();
        let w3 = saturated(&c, 3, 0.0, 1.0);
        let w13 = saturated(&c, 13, 0.0, 1.0);
        assert_eq!(w3.bottleneck, Bottleneck::Leader);
        assert!((w3.ops_s - 1e6 / 80.0).abs() < 1e-6, "{w3:?}");
        assert!(w13.ops_s < w3.ops_s);
        let r3 = saturated(&c, 3, 1.0, 1.0);
        let r13 = saturated(&c, 13, 1.0, 1.0);
        assert!((r3.ops_s - 3.0 * 1e6 / 20.0).abs() < 1e-6, "{r3:?}");
        assert!((r13.ops_s / r3.ops_s - 13.0 / 3.0).abs() < 1e-9);
        assert!((saturated(&c, 3, 0.0, 4.0).ops_s / w3.ops_s - 4.0).abs() < 1e-9);
    }

    #[test]
    fn a_cheap_leader_makes_followers_the_bottleneck() {
        let c = OpCosts {
            write_send_us: 0.0,
            write_leader_us: 10.0,
            ..costs()
        };
        assert_eq!(saturated(&c, 5, 0.0, 1.0).bottleneck, Bottleneck::Follower);
        assert_eq!(saturated(&c, 1, 0.0, 1.0).bottleneck, Bottleneck::Leader);
    }

    fn run(workload: &str, cluster_size: u32, cpu: f64, busiest_share: f64) -> Measured {
        Measured {
            dir: PathBuf::new(),
            target: "raft".into(),
            workload: workload.into(),
            cluster_size,
            server_cpu_us_per_op: cpu,
            busiest_share,
        }
    }

    #[test]
    fn calibration_splits_leader_and_followers() {
        // 1 member: 60 µs. 3 members: 140 µs, the leader 80 (60 + 2 x 10), followers 30 each.
        let runs = vec![
            run("kv-put", 1, 60.0, 1.0),
            run("kv-put", 3, 140.0, 80.0 / 140.0),
            run("kv-get", 3, 20.0, 0.4),
        ];
        let got = calibrate(&runs).unwrap()["raft"];
        let want = costs();
        for (g, w) in [
            (got.read_us, want.read_us),
            (got.write_leader_us, want.write_leader_us),
            (got.write_send_us, want.write_send_us),
            (got.write_follower_us, want.write_follower_us),
        ] {
            assert!((g - w).abs() < 1e-9, "{got:?}");
        }
        let err = calibrate(&runs[1..]).unwrap_err();
        assert!(
            err.contains("one-member kv-put") && err.contains("--cluster-size 1"),
            "{err}"
        );
    }
}
