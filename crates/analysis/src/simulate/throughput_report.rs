//! What `simulate throughput` writes: throughput.csv (every modelled point), costs.json
//! (the calibrated costs and the runs they came from) and summary.md, which puts the model
//! beside the ZooKeeper paper's Table 1 and says which figures are measured and which
//! modelled.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use anyhow::Context;
use coordbench_results::files;
use serde::Serialize;

use super::throughput::{saturated, Measured, OpCosts};
use crate::report::published::{ZK_TABLE1_READS, ZK_TABLE1_WRITES};

/// The model's inputs and every point it gave.
pub struct Model<'a> {
    pub costs: &'a BTreeMap<String, OpCosts>,
    pub runs: &'a [Measured],
    pub members: &'a [u32],
    pub read_ratios: &'a [f64],
    pub cores: f64,
}

#[derive(Serialize)]
struct Row<'a> {
    target: &'a str,
    members: u32,
    read_ratio: f64,
    cores: f64,
    ops_s: f64,
    bottleneck: &'static str,
}

#[derive(Serialize)]
struct CostsFile<'a> {
    model: &'static str,
    cores_per_server: f64,
    costs_us: &'a BTreeMap<String, OpCosts>,
    calibrated_from: Vec<String>,
}

/// Writes the three files into `out`; returns summary.md's text.
pub fn write(out: &Path, model: &Model) -> anyhow::Result<String> {
    let rows = model.costs.iter().flat_map(|(target, costs)| {
        model.members.iter().flat_map(move |&members| {
            model.read_ratios.iter().map(move |&read_ratio| {
                let s = saturated(costs, members, read_ratio, model.cores);
                Row {
                    target,
                    members,
                    read_ratio,
                    cores: model.cores,
                    ops_s: s.ops_s,
                    bottleneck: s.bottleneck.name(),
                }
            })
        })
    });
    files::write_csv_rows(&out.join("throughput.csv"), rows)?;
    let costs = CostsFile {
        model: "cpu: leader = ρ·r/N + (1−ρ)·(w_leader + (N−1)·w_send); follower = ρ·r/N + (1−ρ)·w_follower; ops/s = cores / max",
        cores_per_server: model.cores,
        costs_us: model.costs,
        calibrated_from: model.runs.iter().map(|r| r.dir.display().to_string()).collect(),
    };
    files::write_json(&out.join("costs.json"), &costs)?;
    let summary = summary_md(model);
    let md_path = out.join("summary.md");
    std::fs::write(&md_path, &summary).with_context(|| format!("writing {}", md_path.display()))?;
    Ok(summary)
}

fn summary_md(model: &Model) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# simulate throughput: a model, not a measurement\n\n\
         Measured on this machine: each target's CPU per operation (below). Modelled: the \
         saturated throughput of N servers with {} core(s) each, CPU-bound, reads answered \
         locally, clients spread evenly (docs/reference.md, \"simulate throughput\").\n",
        model.cores
    );
    md.push_str("| target | read µs | write µs, leader alone | + per follower, on the leader | write µs, per follower |\n|---|---|---|---|---|\n");
    for (target, c) in model.costs {
        let _ = writeln!(
            md,
            "| {target} | {:.1} | {:.1} | {:.1} | {:.1} |",
            c.read_us, c.write_leader_us, c.write_send_us, c.write_follower_us
        );
    }
    for (target, costs) in model.costs {
        let _ = write!(md, "\n## {target}: modelled ops/s\n\n| servers |");
        for r in model.read_ratios {
            let _ = write!(md, " {:.0}% reads |", r * 100.0);
        }
        md.push_str("\n|---|");
        md.push_str(&"---|".repeat(model.read_ratios.len()));
        for &n in model.members {
            let _ = write!(md, "\n| {n} |");
            for &r in model.read_ratios {
                let s = saturated(costs, n, r, model.cores);
                let _ = write!(md, " {:.0} ({}) |", s.ops_s, s.bottleneck.name());
            }
        }
        md.push('\n');
        beside_table1(&mut md, costs, model.cores);
    }
    md
}

/// The model's 0% and 100% reads columns beside the paper's, each relative to 3 servers:
/// the shape is what should reproduce, not the absolute numbers.
fn beside_table1(md: &mut String, costs: &OpCosts, cores: f64) {
    md.push_str("\nBeside the ZooKeeper paper's Table 1 (relative to 3 servers; docs/published-figures.md):\n\n\
                 | servers | writes, paper | writes, model | reads, paper | reads, model |\n|---|---|---|---|---|\n");
    let base = |ratio| saturated(costs, 3, ratio, cores).ops_s;
    let (w3, r3) = (base(0.0), base(1.0));
    for ((n, writes), (_, reads)) in ZK_TABLE1_WRITES.iter().zip(ZK_TABLE1_READS.iter()) {
        let _ = writeln!(
            md,
            "| {n} | {:.2} | {:.2} | {:.2} | {:.2} |",
            writes / ZK_TABLE1_WRITES[0].1,
            saturated(costs, *n, 0.0, cores).ops_s / w3,
            reads / ZK_TABLE1_READS[0].1,
            saturated(costs, *n, 1.0, cores).ops_s / r3,
        );
    }
}
