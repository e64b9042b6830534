//! The election-time CDF of a sweep over `election_timeout` (the Raft paper's Figure 16, live
//! and simulated side by side): one chart per swept range, with each target's time to a new
//! leader over its kill-leader faults (failover.csv), the Raft core's CDF for the same range
//! from `coordbench simulate election` (same member count, the runs' network delay as half
//! the broadcast time, a fixed seed, so the report is reproducible), and the paper's
//! published points for that range where it gives any (docs/reference.md, "simulate election").

use std::path::Path;
use std::time::Duration;

use clap::Parser;

use super::chart::{target_color, Line, LineChart, XScale};
use super::failover::cdf;
use super::published::RAFT_FIGURE16;
use super::table::Table;
use crate::simulate::args::ElectionArgs;
use crate::simulate::election::{run_line, Setup};
use crate::simulate::timeouts::TimeoutRange;

/// Trials of the simulated line per chart: enough for a smooth CDF, a second or so.
const SIMULATED_TRIALS: u32 = 300;
/// The simulated line's seed (fixed: the same report from the same results).
const SEED: u64 = 16;
/// The paper's broadcast time, used when the runs record no network delay.
const PAPER_BROADCAST: Duration = Duration::from_millis(15);

/// Live new-leader times (ms) of one target at one swept range and member count.
struct Live {
    range: String,
    target: String,
    members: u8,
    new_leader_ms: Vec<f64>,
}

/// One chart per swept election-timeout range with kill-leader faults; none when the table
/// has no `election_timeout` column or no faults.
pub fn charts(dir: &Path, table: &Table) -> Vec<(String, LineChart)> {
    if !table.has("election_timeout") {
        return Vec::new();
    }
    let live = collect(dir, table);
    let mut ranges: Vec<&str> = Vec::new();
    for l in &live {
        if !ranges.contains(&l.range.as_str()) {
            ranges.push(&l.range);
        }
    }
    let broadcast = broadcast(table);
    ranges
        .into_iter()
        .filter_map(|range| {
            let chart = chart_for(range, &live, broadcast)?;
            Some((format!("election-cdf-{range}"), chart))
        })
        .collect()
}

/// Every complete row's kill-leader faults, by range, target and member count, in
/// first-seen order.
fn collect(dir: &Path, table: &Table) -> Vec<Live> {
    let mut live: Vec<Live> = Vec::new();
    for (i, row) in table.rows.iter().enumerate() {
        let (Some(range), Some(target)) = (row.get("election_timeout"), row.get("target")) else {
            continue;
        };
        let Some(run_dir) = table.run_dir(dir, i) else {
            continue;
        };
        let times = super::failover::new_leader_ms(&run_dir.join("failover.csv"), "kill-leader");
        if times.is_empty() {
            continue;
        }
        // The simulation takes 3 to 13 members, as the ZooKeeper paper's tables.
        let members = row
            .num("cluster_size")
            .map_or(3, |n| n.clamp(3.0, 13.0) as u8);
        match live
            .iter_mut()
            .find(|l| l.range == range && l.target == target && l.members == members)
        {
            Some(l) => l.new_leader_ms.extend(times),
            None => live.push(Live {
                range: range.to_string(),
                target: target.to_string(),
                members,
                new_leader_ms: times,
            }),
        }
    }
    live
}

/// The runs' broadcast time (twice the one-way `net_delay`), as the simulation should
/// replay it.
fn broadcast(table: &Table) -> Duration {
    let first = table.rows.first();
    // summary.csv's own column, or the swept axis's value when the delay was swept.
    let one_way = first.and_then(|r| {
        r.num("net_delay_us")
            .map(|us| Duration::from_micros(us as u64))
            .or_else(|| humantime::parse_duration(r.get("net_delay")?).ok())
    });
    one_way
        .filter(|d| !d.is_zero())
        .map_or(PAPER_BROADCAST, |one_way| one_way * 2)
}

/// One range's chart: a live line per target and member count, a simulated line per
/// member count (labels name the members only when the sweep has several counts).
fn chart_for(range: &str, live: &[Live], broadcast: Duration) -> Option<LineChart> {
    let parsed = TimeoutRange::parse(range).ok()?;
    let live: Vec<&Live> = live.iter().filter(|l| l.range == range).collect();
    let mut sizes: Vec<u8> = live.iter().map(|l| l.members).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let of_size = |members: u8| match sizes.len() {
        1 => String::new(),
        _ => format!(" {members} members"),
    };
    let mut lines: Vec<Line> = live
        .iter()
        .map(|l| Line {
            label: format!(
                "{}{} live ({} faults)",
                l.target,
                of_size(l.members),
                l.new_leader_ms.len()
            ),
            color: target_color(&l.target),
            dashed: l.members != sizes[0],
            markers: true,
            points: cdf(&l.new_leader_ms),
            bars: Vec::new(),
        })
        .collect();
    for &members in &sizes {
        let Some(simulated) = simulated_ms(&parsed, members, broadcast) else {
            continue;
        };
        lines.push(Line {
            label: format!(
                "raft core simulated ({SIMULATED_TRIALS} trials, {members} members, broadcast {})",
                humantime::format_duration(broadcast)
            ),
            color: target_color("raft"),
            dashed: true,
            markers: false,
            points: cdf(&simulated),
            bars: Vec::new(),
        });
    }
    for p in RAFT_FIGURE16
        .iter()
        .filter(|p| p.min_ms == parsed.min_ms && p.max_ms == parsed.max_ms)
    {
        lines.push(Line {
            label: format!("Raft paper, Figure 16: {}", p.what),
            color: plotters::style::BLACK,
            dashed: false,
            markers: true,
            points: vec![(p.at_ms, p.fraction)],
            bars: Vec::new(),
        });
    }
    Some(LineChart {
        title: format!("Time to a new leader, election timeout {range} ms"),
        x_label: "time after the leader was killed (ms)".into(),
        y_label: "fraction of faults at or below".into(),
        x_scale: XScale::Linear,
        y_range: Some((0.0, 1.02)),
        lines,
        notes: Vec::new(),
    })
}

/// The Raft core's election times (ms) for `range` in simulation; `None` if the setup is
/// refused (the error is the simulation's own; the live lines still stand).
fn simulated_ms(range: &TimeoutRange, members: u8, broadcast: Duration) -> Option<Vec<f64>> {
    // The simulation's defaults and checks live in its options: build them as a user would.
    #[derive(Parser)]
    struct Options {
        #[command(flatten)]
        election: ElectionArgs,
    }
    let options = Options::try_parse_from([
        "simulate".to_string(),
        format!("--members={members}"),
        format!("--broadcast={}", humantime::format_duration(broadcast)),
        format!("--timeouts={}-{}", range.min_ms, range.max_ms),
        format!("--trials={SIMULATED_TRIALS}"),
    ])
    .ok()?;
    let setup = Setup::from_args(&options.election).ok()?;
    let trials = run_line(&setup, range, SIMULATED_TRIALS, SEED).ok()?;
    Some(
        trials
            .iter()
            .filter_map(|t| t.election_us)
            .map(|us| us as f64 / 1000.0)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep_dir() -> tempfile::TempDir {
        sweep_dir_of(&[("raft-150-155", "raft", 3), ("zab-150-155", "zab", 3)])
    }

    fn sweep_dir_of(points: &[(&str, &str, u8)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut summary = String::from(
            "point,target,election_timeout,cluster_size,net_delay_us,throughput_ops_s\n",
        );
        for &(point, target, members) in points {
            summary.push_str(&format!("{point},{target},150-155,{members},7500,100\n"));
            let run = dir.path().join(point);
            std::fs::create_dir_all(&run).expect("run dir");
            let rows = "fault,new_leader_us,first_write_us\nkill-leader,180000,200000\nkill-leader,240000,\nkill-random,90000,95000\n";
            std::fs::write(run.join("failover.csv"), rows).expect("failover.csv");
        }
        std::fs::write(dir.path().join("summary.csv"), summary).expect("summary.csv");
        dir
    }

    #[test]
    fn a_swept_range_gets_live_simulated_and_published_lines() {
        let dir = sweep_dir();
        let table = Table::read(&dir.path().join("summary.csv")).expect("table");
        let charts = charts(dir.path(), &table);
        assert_eq!(charts.len(), 1, "one chart per range");
        let (name, chart) = &charts[0];
        assert_eq!(name, "election-cdf-150-155");
        let labels: Vec<&str> = chart.lines.iter().map(|l| l.label.as_str()).collect();
        assert!(labels[0].starts_with("raft live (2 faults)"), "{labels:?}");
        assert!(labels[1].starts_with("zab live (2 faults)"), "{labels:?}");
        let simulated = chart
            .lines
            .iter()
            .find(|l| l.label.contains("simulated"))
            .expect("a simulated line");
        assert!(simulated.label.contains("3 members") && simulated.label.contains("15ms"));
        assert!(simulated.points.len() > 100, "{}", simulated.points.len());
        // Figure 16's 150-155 line: half the trials within 287 ms.
        assert!(
            labels.iter().any(|l| l.starts_with("Raft paper")),
            "{labels:?}"
        );
    }

    #[test]
    fn member_counts_get_lines_of_their_own() {
        let dir = sweep_dir_of(&[("raft-3", "raft", 3), ("raft-5", "raft", 5)]);
        let table = Table::read(&dir.path().join("summary.csv")).expect("table");
        let charts = charts(dir.path(), &table);
        let labels: Vec<&str> = charts[0].1.lines.iter().map(|l| l.label.as_str()).collect();
        assert!(labels[0].starts_with("raft 3 members live"), "{labels:?}");
        assert!(labels[1].starts_with("raft 5 members live"), "{labels:?}");
        let simulated: Vec<&&str> = labels.iter().filter(|l| l.contains("simulated")).collect();
        assert_eq!(simulated.len(), 2, "{labels:?}");
        assert!(simulated[1].contains("5 members"), "{labels:?}");
    }

    #[test]
    fn a_sweep_over_another_axis_gets_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("summary.csv"),
            "point,target,clients,throughput_ops_s\nx,raft,4,100\n",
        )
        .expect("summary.csv");
        let table = Table::read(&dir.path().join("summary.csv")).expect("table");
        assert!(charts(dir.path(), &table).is_empty());
    }
}
