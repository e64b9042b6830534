//! "What N× the load would need", for planners: worked out per target from the max rate at
//! the objective (capacity searches) and the fitted cost per unit of state
//! ([`super::state_cost`]: from the same table, or from a state sweep named by
//! `report --state DIR`), with the model stated. The load and state scaled are the
//! planner's own when `coordbench report --load --keys --watchers --sessions` give them;
//! otherwise the load is the first configuration's max rate (a cluster run at its limit
//! today) and the state is the largest measured.

use std::fmt::Write as _;

use super::chart::number;
use super::state_cost::UnitCost;
use super::table::{Row, Table};

/// The planner's figures for today (`coordbench report --load ...`); all optional.
#[derive(Debug, Clone, Default)]
pub struct Planning {
    /// Today's rate of the searched workload, operations per second.
    pub load: Option<f64>,
    pub keys: Option<u64>,
    pub watchers: Option<u64>,
    pub sessions: Option<u64>,
    /// Costs per unit fitted from another sweep (`--state DIR`), used after the table's own.
    pub costs: Vec<UnitCost>,
}

impl Planning {
    /// Today's state as (unit, count), for the units given.
    fn state(&self) -> Vec<(&'static str, f64)> {
        [
            ("key", self.keys),
            ("watcher", self.watchers),
            ("session", self.sessions),
        ]
        .into_iter()
        .filter_map(|(unit, n)| Some((unit, n? as f64)))
        .collect()
    }
}

/// Load multiples the paragraph works out.
pub const MULTIPLES: [f64; 3] = [2.0, 5.0, 10.0];

const MODEL: &str = "**What N× the load would need.** Model: every write of a Raft or Zab \
group goes through its one leader and is replicated to every member, so adding members does \
not add write capacity (compare the cluster sizes above); N× today's rate R needs \
⌈N × R / R_max⌉ independent groups (shards) of a configuration whose max rate at the \
objective is R_max. Memory per member is linear in the state it holds: RSS ≈ base + keys × \
bytes per key + watchers × bytes per watcher + sessions × bytes per session (the fitted \
costs; base is the smallest fitted base), with the state spread evenly over the groups.";

/// The paragraph: the model, a row per configuration searched, then what the state costs;
/// empty when no search found a max rate.
pub fn paragraph(table: &Table, rows: &[usize], costs: &[UnitCost], planning: &Planning) -> String {
    let searched: Vec<&Row> = rows
        .iter()
        .map(|&r| &table.rows[r])
        .filter(|row| row.get("slo").is_some() && row.num("max_rate_ops_s").is_some())
        .collect();
    if searched.is_empty() {
        return String::new();
    }
    let mut s = String::from(MODEL);
    s.push_str(match planning.load {
        Some(_) => " R is the load given (`--load`).",
        None => {
            " R is the max rate of the target's first configuration above (a cluster at its \
             limit today; give `coordbench report --load` for your own)."
        }
    });
    s.push_str("\n\n| target | cluster size | disk | R_max | R | 2× | 5× | 10× |\n|---|---|---|---|---|---|---|---|\n");
    let state = planning.state();
    let mut notes = String::new();
    let mut targets: Vec<&str> = Vec::new();
    for row in &searched {
        let target = row.get("target").unwrap_or("?");
        let first = searched
            .iter()
            .find(|r| r.get("target") == Some(target))
            .and_then(|r| r.num("max_rate_ops_s"));
        let (Some(max), Some(today)) = (row.num("max_rate_ops_s"), planning.load.or(first)) else {
            continue;
        };
        let ours: Vec<&UnitCost> = costs
            .iter()
            .chain(&planning.costs)
            .filter(|c| c.target == target)
            .collect();
        let cells: Vec<String> = MULTIPLES
            .iter()
            .map(|n| {
                let groups = (n * today / max).ceil().max(1.0);
                match member_mb(&ours, &state, n / groups) {
                    Some(mb) => format!("{groups} group(s), ≈ {mb:.0} MB per member"),
                    None => format!("{groups} group(s)"),
                }
            })
            .collect();
        let _ = writeln!(
            s,
            "| {target} | {} | {} | {}/s | {}/s | {} |",
            row.get("cluster_size").unwrap_or("–"),
            row.get("disk").unwrap_or("–"),
            number(max.round()),
            number(today.round()),
            cells.join(" | ")
        );
        if !targets.contains(&target) {
            targets.push(target);
            notes.push_str(&state_notes(target, &ours, &state));
        }
    }
    if !notes.is_empty() {
        s.push('\n');
        s.push_str(&notes);
    }
    s
}

/// Per target: what 10× the largest state measured adds (without the planner's state), or
/// which of the planner's units have no fitted cost.
fn state_notes(target: &str, costs: &[&UnitCost], state: &[(&str, f64)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    if state.is_empty() {
        for c in costs {
            let mb = MULTIPLES[2] * c.largest * c.fit.slope / (1024.0 * 1024.0);
            parts.push(format!(
                "10× {} {}s ({}): {mb:.0} MB more per member",
                number(c.largest),
                c.unit,
                c.workload
            ));
        }
    }
    for (unit, _) in state.iter().filter(|(u, _)| cost_of(costs, u).is_none()) {
        parts.push(format!("no fitted cost per {unit} (run a state sweep)"));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!("- {target}: {}.\n", parts.join("; "))
}

/// RSS per member holding `share` times today's `state`: base + Σ count × bytes per unit;
/// `None` without a state or without a fitted cost for any of it.
fn member_mb(costs: &[&UnitCost], state: &[(&str, f64)], share: f64) -> Option<f64> {
    let base = costs.iter().map(|c| c.fit.base).reduce(f64::min)?;
    let mut bytes = base;
    let mut any = false;
    for (unit, count) in state {
        if let Some(c) = cost_of(costs, unit) {
            bytes += share * count * c.fit.slope;
            any = true;
        }
    }
    any.then_some(bytes / (1024.0 * 1024.0))
}

/// The target's fitted cost of a unit (the first workload's, when several were swept).
fn cost_of<'a>(costs: &[&'a UnitCost], unit: &str) -> Option<&'a UnitCost> {
    costs.iter().copied().find(|c| c.unit == unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::state_cost::Fit;

    fn table(rows: &[(&str, &str, f64)]) -> Table {
        let columns = ["target", "cluster_size", "disk", "slo", "max_rate_ops_s"];
        Table {
            columns: columns.map(String::from).to_vec(),
            rows: rows
                .iter()
                .map(|(target, size, rate)| {
                    let values = [target, size, "disk", "p99<20ms", &rate.to_string()];
                    Row(columns
                        .iter()
                        .zip(values)
                        .map(|(c, v)| (c.to_string(), v.to_string()))
                        .collect())
                })
                .collect(),
        }
    }

    fn cost(target: &str, unit: &'static str, base_mb: f64, slope: f64) -> UnitCost {
        UnitCost {
            target: target.into(),
            workload: "kv-put".into(),
            unit,
            fit: Fit {
                slope,
                base: base_mb * 1024.0 * 1024.0,
                points: 3,
            },
            largest: 100_000.0,
        }
    }

    #[test]
    fn groups_and_memory_follow_the_given_load_and_state_per_configuration() {
        let t = table(&[
            ("raft", "3", 5000.0),
            ("raft", "5", 4000.0),
            ("etcd", "3", 2000.0),
        ]);
        let costs = [
            cost("raft", "key", 30.0, 1024.0),
            cost("raft", "watcher", 32.0, 512.0),
        ];
        let planning = Planning {
            load: Some(3000.0),
            keys: Some(10_240),
            watchers: Some(2_048),
            sessions: Some(100),
            costs: Vec::new(),
        };
        let p = paragraph(&t, &[0, 1, 2], &costs, &planning);
        // 3,000/s on groups that take 5,000/s: 2× → 2 groups, 5× → 3, 10× → 6. Memory per
        // member: 30 MB + share × (10 MB of keys + 1 MB of watchers), share = N / groups.
        for row in [
            "| raft | 3 | disk | 5000/s | 3000/s | 2 group(s), ≈ 41 MB per member | 3 group(s), ≈ 48 MB per member | 6 group(s), ≈ 48 MB per member |",
            "| raft | 5 | disk | 4000/s | 3000/s | 2 group(s), ≈ 41 MB per member | 4 group(s), ≈ 44 MB per member | 8 group(s), ≈ 44 MB per member |",
            "| etcd | 3 | disk | 2000/s | 3000/s | 3 group(s) | 8 group(s) | 15 group(s) |",
            "- raft: no fitted cost per session (run a state sweep).",
            "- etcd: no fitted cost per key (run a state sweep); no fitted cost per watcher",
            "R is the load given",
        ] {
            assert!(p.contains(row), "{row}\n{p}");
        }
    }

    #[test]
    fn nothing_to_plan_from_searches_that_found_no_rate() {
        let mut t = table(&[("zab", "3", 4000.0)]);
        t.rows[0].0.insert("max_rate_ops_s".into(), String::new());
        assert_eq!(paragraph(&t, &[0], &[], &Planning::default()), "");
    }

    #[test]
    fn costs_from_a_state_sweep_are_used_when_the_table_has_none() {
        let t = table(&[("zab", "3", 4000.0)]);
        let planning = Planning {
            load: Some(2000.0),
            keys: Some(10_240),
            costs: vec![
                cost("zab", "key", 20.0, 1024.0),
                cost("raft", "key", 1.0, 1.0),
            ],
            ..Planning::default()
        };
        let p = paragraph(&t, &[0], &[], &planning);
        // 20 MiB + 10 MiB of keys at 2× (one group holding twice today's keys: 40 MiB).
        assert!(
            p.contains("| zab | 3 | disk | 4000/s | 2000/s | 1 group(s), ≈ 40 MB per member |"),
            "{p}"
        );
        assert!(!p.contains("raft"), "{p}");
    }

    #[test]
    fn without_the_planners_figures_the_first_max_rate_and_largest_state_are_scaled() {
        let t = table(&[("zab", "3", 4000.0), ("zab", "5", 8000.0)]);
        let costs = [cost("zab", "key", 30.0, 3.0 * 1024.0 * 1024.0 / 100_000.0)];
        let p = paragraph(&t, &[0, 1], &costs, &Planning::default());
        for row in [
            "| zab | 3 | disk | 4000/s | 4000/s | 2 group(s) | 5 group(s) | 10 group(s) |",
            "| zab | 5 | disk | 8000/s | 4000/s | 1 group(s) | 3 group(s) | 5 group(s) |",
            "- zab: 10× 100k keys (kv-put): 30 MB more per member.",
            "give `coordbench report --load`",
        ] {
            assert!(p.contains(row), "{row}\n{p}");
        }
    }
}
