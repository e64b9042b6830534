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
use super::table::Table;

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
group goes through its one leader and is replicated to every member, so a group's max rate \
at the objective does not grow with members (compare the cluster sizes above); N× today's \
rate R needs ⌈N × R / R_best⌉ independent groups (shards), where R_best is the best max rate \
measured for the target. Memory per member is linear in the state it holds: RSS ≈ base + \
keys × bytes per key + watchers × bytes per watcher + sessions × bytes per session (the \
fitted costs; base is the smallest fitted base), with the state spread evenly over the \
groups.";

/// The paragraph: the model, then a line per target with a max rate.
pub fn paragraph(table: &Table, rows: &[usize], costs: &[UnitCost], planning: &Planning) -> String {
    let mut s = String::from(MODEL);
    s.push_str(match planning.load {
        Some(_) => " R is the load given (`--load`).",
        None => {
            " R is the max rate of the target's first configuration above (a cluster at its \
             limit today; give `coordbench report --load` for your own)."
        }
    });
    s.push_str("\n\n");
    let mut targets: Vec<&str> = Vec::new();
    for target in rows.iter().filter_map(|&r| table.rows[r].get("target")) {
        if !targets.contains(&target) {
            targets.push(target);
        }
    }
    for target in targets {
        let rates: Vec<f64> = rows
            .iter()
            .filter(|&&r| table.rows[r].get("target") == Some(target))
            .filter_map(|&r| table.rows[r].num("max_rate_ops_s"))
            .collect();
        let (Some(&first), Some(best)) = (rates.first(), rates.iter().copied().reduce(f64::max))
        else {
            continue;
        };
        let today = planning.load.unwrap_or(first);
        let ours: Vec<&UnitCost> = costs
            .iter()
            .chain(&planning.costs)
            .filter(|c| c.target == target)
            .collect();
        let _ = write!(
            s,
            "- {target}: R = {}/s, R_best = {}/s ({:.0}% of one group)",
            number(today.round()),
            number(best.round()),
            100.0 * today / best
        );
        let state = planning.state();
        for n in MULTIPLES {
            let groups = (n * today / best).ceil().max(1.0);
            let _ = write!(s, "; {n}× → {groups} group(s)");
            if let Some(mb) = member_mb(&ours, &state, n / groups) {
                let _ = write!(s, ", ≈ {mb:.0} MB per member");
            }
        }
        if state.is_empty() {
            for c in &ours {
                let mb = MULTIPLES[2] * c.largest * c.fit.slope / (1024.0 * 1024.0);
                let _ = write!(
                    s,
                    "; 10× {} {}s ({}): {mb:.0} MB more per member",
                    number(c.largest),
                    c.unit,
                    c.workload
                );
            }
        }
        for (unit, _) in state.iter().filter(|(u, _)| cost_of(&ours, u).is_none()) {
            let _ = write!(s, "; no fitted cost per {unit} (run a state sweep)");
        }
        s.push_str(".\n");
    }
    s
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
    use crate::report::table::Row;

    fn table(rows: &[(&str, &str, f64)]) -> Table {
        Table {
            columns: ["target", "cluster_size", "max_rate_ops_s"]
                .map(String::from)
                .to_vec(),
            rows: rows
                .iter()
                .map(|(target, size, rate)| {
                    Row([
                        ("target".to_string(), target.to_string()),
                        ("cluster_size".to_string(), size.to_string()),
                        ("max_rate_ops_s".to_string(), rate.to_string()),
                    ]
                    .into_iter()
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
    fn groups_and_memory_follow_the_given_load_and_state() {
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
        // 3,000/s against a best of 5,000/s: 2× → 2 groups, 5× → 3, 10× → 6. Memory per
        // member: 30 MB + share × (10 MB of keys + 1 MB of watchers), share = N / groups.
        assert!(
            p.contains("- raft: R = 3000/s, R_best = 5000/s (60% of one group)"),
            "{p}"
        );
        assert!(p.contains("2× → 2 group(s), ≈ 41 MB per member"), "{p}");
        assert!(p.contains("5× → 3 group(s), ≈ 48 MB per member"), "{p}");
        assert!(p.contains("10× → 6 group(s), ≈ 48 MB per member"), "{p}");
        assert!(p.contains("no fitted cost per session"), "{p}");
        // etcd has no state fits: groups only.
        assert!(
            p.contains("- etcd: R = 3000/s, R_best = 2000/s (150% of one group); 2× → 3 group(s); 5× → 8 group(s); 10× → 15 group(s); no fitted cost per key"),
            "{p}"
        );
        assert!(p.contains("R is the load given"), "{p}");
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
        assert!(p.contains("2× → 1 group(s), ≈ 40 MB per member"), "{p}");
        assert!(!p.contains("raft"), "{p}");
    }

    #[test]
    fn without_the_planners_figures_the_first_max_rate_and_largest_state_are_scaled() {
        let t = table(&[("zab", "3", 4000.0), ("zab", "5", 8000.0)]);
        let costs = [cost("zab", "key", 30.0, 3.0 * 1024.0 * 1024.0 / 100_000.0)];
        let p = paragraph(&t, &[0, 1], &costs, &Planning::default());
        assert!(
            p.contains("- zab: R = 4000/s, R_best = 8000/s (50% of one group); 2× → 1 group(s); 5× → 3 group(s); 10× → 5 group(s); 10× 100k keys (kv-put): 30 MB more per member."),
            "{p}"
        );
        assert!(p.contains("give `coordbench report --load`"), "{p}");
    }
}
