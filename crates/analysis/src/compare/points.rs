//! Matching the two sides' runs point by point. A point is a configuration: runs of one side
//! whose configurations agree on every field that varies within either side (the target,
//! the workload, swept axes, ...) are repeats of one point. Fields that are constant within
//! each side but differ between them are what the comparison is about (a binary, a disk, a
//! recipe): they are reported as the sides' difference and do not split points.

use std::collections::{BTreeMap, BTreeSet};

use super::load::Run;

/// One configuration and the runs of each side that measured it.
#[derive(Debug)]
pub struct Point<'a> {
    /// `target workload field=value ...`: how output names the point.
    pub label: String,
    pub key: Key,
    pub base: Vec<&'a Run>,
    pub cand: Vec<&'a Run>,
}

/// How the sides were matched.
#[derive(Debug)]
pub struct Matching<'a> {
    pub points: Vec<Point<'a>>,
    /// Config fields constant on each side with different values: (field, base, cand).
    pub differences: Vec<(String, String, String)>,
    /// Points only one side measured, by label.
    pub only_base: Vec<String>,
    pub only_cand: Vec<String>,
}

/// A point's key: the values of the fields that tell points apart.
type Key = Vec<(String, String)>;

pub fn match_sides<'a>(base: &'a [Run], cand: &'a [Run]) -> Matching<'a> {
    let varying: BTreeSet<String> = varying_fields(base)
        .union(&varying_fields(cand))
        .cloned()
        .collect();
    let key_of = |run: &Run| -> Key {
        varying
            .iter()
            .map(|f| (f.clone(), run.config_value(f).to_string()))
            .collect()
    };
    let mut by_key: BTreeMap<Key, (Vec<&Run>, Vec<&Run>)> = BTreeMap::new();
    // Keys in the order the base side ran them, then any the candidate adds.
    let mut order: Vec<Key> = Vec::new();
    for (runs, is_base) in [(base, true), (cand, false)] {
        for run in runs {
            let key = key_of(run);
            let entry = by_key.entry(key.clone()).or_insert_with(|| {
                order.push(key.clone());
                (Vec::new(), Vec::new())
            });
            if is_base {
                entry.0.push(run)
            } else {
                entry.1.push(run)
            }
        }
    }
    let mut matching = Matching {
        points: Vec::new(),
        differences: differences(base, cand, &varying),
        only_base: Vec::new(),
        only_cand: Vec::new(),
    };
    let shown = independent_fields(base.iter().chain(cand), &varying);
    for key in order {
        let (b, c) = by_key.remove(&key).unwrap_or_default();
        let sample = b.first().or(c.first()).copied();
        let label = sample.map_or_else(String::new, |run| label(run, &key, &shown));
        match (b.is_empty(), c.is_empty()) {
            (false, false) => matching.points.push(Point {
                label,
                key,
                base: b,
                cand: c,
            }),
            (false, true) => matching.only_base.push(label),
            (true, false) => matching.only_cand.push(label),
            (true, true) => {}
        }
    }
    matching
}

/// Key fields that are not settled by the target and workload alone (`client_lib` and
/// `recipe` follow from them and would only clutter labels).
fn independent_fields<'a>(
    runs: impl Iterator<Item = &'a Run>,
    varying: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut seen: BTreeMap<(&str, &str, &str), &str> = BTreeMap::new();
    let mut independent = BTreeSet::new();
    for run in runs {
        let (target, workload) = (run.config_value("target"), run.config_value("workload"));
        for field in varying {
            let value = run.config_value(field);
            let first = *seen
                .entry((field.as_str(), target, workload))
                .or_insert(value);
            if first != value {
                independent.insert(field.clone());
            }
        }
    }
    independent
}

/// `raft kv-put disk=hdd`: target and workload always, then the other key fields that
/// tell points apart.
fn label(run: &Run, key: &Key, shown: &BTreeSet<String>) -> String {
    let mut parts: Vec<String> = ["target", "workload"]
        .iter()
        .map(|f| run.config_value(f).to_string())
        .filter(|v| !v.is_empty())
        .collect();
    for (field, value) in key {
        if shown.contains(field) && field != "target" && field != "workload" {
            let shown = if value.is_empty() { "-" } else { value };
            parts.push(format!("{field}={shown}"));
        }
    }
    parts.join(" ")
}

fn varying_fields(runs: &[Run]) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    let Some(first) = runs.first() else {
        return fields;
    };
    let all: BTreeSet<&String> = runs.iter().flat_map(|r| r.config.keys()).collect();
    for field in all {
        let value = first.config_value(field);
        if runs.iter().any(|r| r.config_value(field) != value) {
            fields.insert(field.clone());
        }
    }
    fields
}

fn differences(
    base: &[Run],
    cand: &[Run],
    varying: &BTreeSet<String>,
) -> Vec<(String, String, String)> {
    let (Some(b), Some(c)) = (base.first(), cand.first()) else {
        return Vec::new();
    };
    let fields: BTreeSet<&String> = b.config.keys().chain(c.config.keys()).collect();
    fields
        .into_iter()
        .filter(|f| !varying.contains(*f))
        .filter(|f| b.config_value(f) != c.config_value(f))
        .map(|f| {
            (
                f.clone(),
                b.config_value(f).to_string(),
                c.config_value(f).to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::Row;

    fn run(pairs: &[(&str, &str)]) -> Run {
        Run {
            dir: "/x".into(),
            config: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            summary: Row::default(),
            errors_by_kind: Default::default(),
            cpu_wait_share: None,
            repeat: None,
        }
    }

    #[test]
    fn fields_varying_within_a_side_split_points_and_constant_ones_are_the_difference() {
        let base = vec![
            run(&[
                ("target", "raft"),
                ("workload", "kv-put"),
                ("disk", "tmpfs"),
            ]),
            run(&[("target", "zab"), ("workload", "kv-put"), ("disk", "tmpfs")]),
            run(&[
                ("target", "raft"),
                ("workload", "kv-put"),
                ("disk", "tmpfs"),
            ]),
        ];
        let cand = vec![
            run(&[("target", "zab"), ("workload", "kv-put"), ("disk", "hdd")]),
            run(&[("target", "raft"), ("workload", "kv-put"), ("disk", "hdd")]),
        ];
        let m = match_sides(&base, &cand);
        assert_eq!(m.points.len(), 2);
        assert_eq!(m.points[0].label, "raft kv-put");
        assert_eq!((m.points[0].base.len(), m.points[0].cand.len()), (2, 1));
        assert_eq!(
            m.differences,
            vec![("disk".into(), "tmpfs".into(), "hdd".into())]
        );
    }

    #[test]
    fn points_one_side_lacks_are_named() {
        let base = vec![
            run(&[("target", "raft"), ("clients", "1")]),
            run(&[("target", "raft"), ("clients", "2")]),
        ];
        let cand = vec![
            run(&[("target", "raft"), ("clients", "2")]),
            run(&[("target", "raft"), ("clients", "4")]),
        ];
        let m = match_sides(&base, &cand);
        assert_eq!(m.points.len(), 1);
        assert_eq!(m.only_base, vec!["raft clients=1"]);
        assert_eq!(m.only_cand, vec!["raft clients=4"]);
    }
}
