//! Rows grouped for charts: which swept axis goes on x (the first in [`Axis::ALL`] order
//! whose values differ between rows, preferring quantities over names), and one series per
//! target and value of any other axis that differs. Repeats of a point are averaged.
//!
//! Swept means listed in the sweep's run.json when there is one: a run's own columns that
//! follow from another axis (a workload sweep's `recipe` or `clients`) split nothing. A
//! summary.csv put together from single runs has no such list: any axis column counts.

use coordbench_results::axis::{Axis, HERD_FREE};

use super::chart::{target_name, XScale};
use super::table::{Table, RECIPE_AS_RUN};

/// What the x position of a row is.
#[derive(Debug, Clone)]
pub enum XKind {
    /// A swept axis, read from `column`.
    Axis(Axis, String),
    /// Clients queued behind one holder: clients / locks − 1.
    Waiters,
    /// Nothing varies but the target: one position per target.
    Target,
}

#[derive(Debug, Clone)]
pub struct XAxis {
    pub kind: XKind,
    pub label: String,
    pub scale: XScale,
}

/// Rows at one x position of one series.
#[derive(Debug, Clone)]
pub struct GroupPoint {
    pub x: f64,
    pub x_text: String,
    pub rows: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub target: String,
    /// The values of the other varying axes (`naive`, `locks=4`); empty if none.
    pub key: String,
    /// Index among the series of the same target: drawn dashed when odd.
    pub variant: usize,
    pub points: Vec<GroupPoint>,
}

impl Series {
    /// The series in legends: its target as [`target_name`] names it, and its key.
    pub fn label(&self) -> String {
        let target = target_name(&self.target);
        if self.key.is_empty() {
            target
        } else {
            format!("{target} {}", self.key)
        }
    }
}

/// The column holding an axis: the sweep's axis column, else the run's own.
pub fn axis_column(table: &Table, axis: Axis) -> Option<String> {
    [Some(axis.name()), axis.run_column()]
        .into_iter()
        .flatten()
        .find(|c| table.has(c))
        .map(String::from)
}

/// Axes whose values differ between `rows`, with their columns, in [`Axis::ALL`] order;
/// only those in `swept` when the sweep says which it swept.
pub fn varying(table: &Table, rows: &[usize], swept: Option<&[Axis]>) -> Vec<(Axis, String)> {
    Axis::ALL
        .into_iter()
        .filter(|axis| swept.is_none_or(|s| s.contains(axis)))
        .filter_map(|axis| {
            let column = axis_column(table, axis)?;
            let first = rows.first().and_then(|&i| table.rows[i].get(&column));
            rows.iter()
                .any(|&i| table.rows[i].get(&column) != first)
                .then_some((axis, column))
        })
        .collect()
}

/// The x axis for `rows` and the other varying axes, which split series.
pub fn choose_x(
    table: &Table,
    rows: &[usize],
    swept: Option<&[Axis]>,
) -> (XAxis, Vec<(Axis, String)>) {
    let varying = varying(table, rows, swept);
    let pick = varying
        .iter()
        .position(|(a, _)| !a.is_categorical())
        .or(if varying.is_empty() { None } else { Some(0) });
    let Some(i) = pick else {
        let targets = distinct(rows.iter().filter_map(|&r| table.rows[r].get("target")));
        let x = XAxis {
            kind: XKind::Target,
            label: "target".into(),
            scale: XScale::Categories(targets),
        };
        return (x, varying);
    };
    let mut others = varying;
    let (axis, column) = others.remove(i);
    (axis_x(table, rows, axis, column), others)
}

/// `axis` (held in `column`) as the x axis of `rows`: categories in
/// [`Axis::category_order`], numbers on their scale.
pub fn axis_x(table: &Table, rows: &[usize], axis: Axis, column: String) -> XAxis {
    let scale = if axis.is_categorical() {
        let mut names = distinct(rows.iter().filter_map(|&r| table.rows[r].get(&column)));
        axis.category_order(&mut names);
        XScale::Categories(names)
    } else {
        let values: Vec<f64> = rows
            .iter()
            .filter_map(|&r| axis.numeric(table.rows[r].get(&column)?))
            .collect();
        XScale::for_values(&values)
    };
    XAxis {
        kind: XKind::Axis(axis, column),
        label: axis.label().into(),
        scale,
    }
}

/// The waiters x axis of herd charts (lock runs, one lock or several).
pub fn waiters_axis(table: &Table, rows: &[usize]) -> XAxis {
    let values: Vec<f64> = rows.iter().filter_map(|&r| waiters(table, r)).collect();
    XAxis {
        kind: XKind::Waiters,
        label: "waiters per lock (clients / locks − 1)".into(),
        scale: XScale::for_values(&values),
    }
}

fn waiters(table: &Table, row: usize) -> Option<f64> {
    let r = &table.rows[row];
    let clients = r.num("clients")?;
    let locks = r.num("locks").unwrap_or(1.0).max(1.0);
    Some((clients / locks - 1.0).max(0.0))
}

/// Where a row sits on `x`, and how its value reads.
fn position(table: &Table, x: &XAxis, row: usize) -> Option<(f64, String)> {
    let r = &table.rows[row];
    let categorical = |text: &str| match &x.scale {
        XScale::Categories(names) => names.iter().position(|n| n == text).map(|i| i as f64),
        _ => None,
    };
    match &x.kind {
        XKind::Axis(axis, column) => {
            let text = r.get(column)?;
            let value = if axis.is_categorical() {
                categorical(text)?
            } else {
                axis.numeric(text)?
            };
            Some((value, text.to_string()))
        }
        XKind::Waiters => waiters(table, row).map(|w| (w, format!("{w}"))),
        XKind::Target => {
            let t = r.get("target")?;
            Some((categorical(t)?, t.to_string()))
        }
    }
}

/// Series of `rows` along `x`, split by target and the values of `others`.
pub fn group(table: &Table, rows: &[usize], x: &XAxis, others: &[(Axis, String)]) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for &row in rows {
        let r = &table.rows[row];
        let Some((xv, x_text)) = position(table, x, row) else {
            continue;
        };
        let target = r.get("target").unwrap_or("?").to_string();
        let key = others
            .iter()
            .map(|(axis, column)| {
                let mut v = r.get(column).unwrap_or("-");
                // A shared herd-free point keeps the recipe's own name in legends.
                if *axis == Axis::Recipe && v == HERD_FREE {
                    v = r.get(RECIPE_AS_RUN).unwrap_or(v);
                }
                if axis.is_categorical() {
                    v.to_string()
                } else {
                    format!("{}={v}", axis.name())
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        let index = match series
            .iter()
            .position(|s| s.target == target && s.key == key)
        {
            Some(i) => i,
            None => {
                let variant = series.iter().filter(|s| s.target == target).count();
                series.push(Series {
                    target,
                    key,
                    variant,
                    points: Vec::new(),
                });
                series.len() - 1
            }
        };
        let points = &mut series[index].points;
        match points.iter_mut().find(|p| p.x == xv) {
            Some(p) => p.rows.push(row),
            None => points.push(GroupPoint {
                x: xv,
                x_text,
                rows: vec![row],
            }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    series
}

/// The values of `column` in `rows` that have one.
fn values(table: &Table, rows: &[usize], column: &str) -> Vec<f64> {
    rows.iter()
        .filter_map(|&r| table.rows[r].num(column))
        .collect()
}

/// The mean of `column` over `rows` (the repeats of one point); `None` if none has it.
pub fn mean(table: &Table, rows: &[usize], column: &str) -> Option<f64> {
    let values = values(table, rows, column);
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// How a chart names one point of a series: `clients=4`, `clients=4 naive`, or empty when
/// nothing but the target varies.
pub fn point_label(x: &XAxis, series: &Series, point: &GroupPoint) -> String {
    format!("{} {}", x_label(x, point), series.key)
        .trim()
        .to_string()
}

/// Where `point` sits on `x` (`clients=16`; empty when only the target varies).
pub fn x_label(x: &XAxis, point: &GroupPoint) -> String {
    match &x.kind {
        XKind::Axis(axis, _) => format!("{}={}", axis.name(), point.x_text),
        XKind::Waiters => format!("waiters={}", point.x_text),
        XKind::Target => String::new(),
    }
}

/// The lowest and highest `column` over `rows`; `None` unless at least two rows have it.
pub fn spread(table: &Table, rows: &[usize], column: &str) -> Option<(f64, f64)> {
    let values = values(table, rows, column);
    (values.len() > 1).then(|| {
        let low = values.iter().copied().fold(f64::INFINITY, f64::min);
        let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (low, high)
    })
}

fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !out.iter().any(|o| o == v) {
            out.push(v.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::Row;

    /// A sweep summary with `columns` and one row per entry of `rows`, complete, with a
    /// throughput.
    fn table(columns: &[&str], rows: &[&[&str]]) -> Table {
        let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        let rows = rows
            .iter()
            .map(|values| {
                let mut row: std::collections::BTreeMap<String, String> = columns
                    .iter()
                    .cloned()
                    .zip(values.iter().map(|v| v.to_string()))
                    .collect();
                row.insert("throughput_ops_s".into(), "100".into());
                Row(row)
            })
            .collect();
        let mut columns = columns;
        columns.push("throughput_ops_s".into());
        Table { columns, rows }
    }

    fn all(t: &Table) -> Vec<usize> {
        (0..t.rows.len()).collect()
    }

    #[test]
    fn a_sweep_of_only_engine_binaries_puts_them_on_a_categorical_x() {
        let t = table(
            &["target", "workload", "engine_bin"],
            &[
                &["raft", "kv-put", "/v1/coordbench"],
                &["raft", "kv-put", "/v2/coordbench"],
            ],
        );
        let (x, others) = choose_x(&t, &all(&t), None);
        assert!(matches!(x.kind, XKind::Axis(Axis::EngineBin, _)), "{x:?}");
        let XScale::Categories(names) = &x.scale else {
            panic!("{x:?}");
        };
        assert_eq!(names, &["/v1/coordbench", "/v2/coordbench"]);
        assert!(others.is_empty());
        let series = group(&t, &all(&t), &x, &others);
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].points.len(), 2);
    }

    #[test]
    fn server_versions_go_on_x_in_release_order() {
        let rows: [&[&str]; 4] = [
            &["etcd", "3.7.3"],
            &["etcd", "3.10.0"],
            &["etcd", "3.4.23"],
            &["zookeeper", "3.9.5"],
        ];
        let t = table(&["target", "server_version"], &rows);
        let (x, _) = choose_x(&t, &all(&t), None);
        let XScale::Categories(names) = &x.scale else {
            panic!("{x:?}");
        };
        assert_eq!(names, &["3.4.23", "3.7.3", "3.9.5", "3.10.0"]);
    }

    #[test]
    fn a_numeric_axis_takes_x_and_workloads_and_binaries_split_series() {
        let mut rows: Vec<Vec<&str>> = Vec::new();
        for workload in ["kv-put", "lock"] {
            for bin in ["/v1/coordbench", "/v2/coordbench"] {
                for clients in ["1", "4"] {
                    rows.push(vec!["raft", workload, clients, bin]);
                }
            }
        }
        let rows: Vec<&[&str]> = rows.iter().map(Vec::as_slice).collect();
        let t = table(&["target", "workload", "clients", "engine_bin"], &rows);
        let (x, others) = choose_x(&t, &all(&t), None);
        assert!(matches!(x.kind, XKind::Axis(Axis::Clients, _)), "{x:?}");
        let split: Vec<Axis> = others.iter().map(|(a, _)| *a).collect();
        assert_eq!(split, [Axis::Workload, Axis::EngineBin]);
        let series = group(&t, &all(&t), &x, &others);
        let labels: Vec<String> = series.iter().map(Series::label).collect();
        assert_eq!(
            labels,
            [
                "raft (coordbench) kv-put /v1/coordbench",
                "raft (coordbench) kv-put /v2/coordbench",
                "raft (coordbench) lock /v1/coordbench",
                "raft (coordbench) lock /v2/coordbench"
            ]
        );

        // A workload sweep: the recipe the run's own column shows follows the workload and
        // splits nothing when the sweep lists what it swept.
        let mut rows: Vec<Vec<&str>> = Vec::new();
        for (workload, recipe) in [("kv-put", ""), ("lock", "etcd-mutex")] {
            for bin in ["/v1/coordbench", "/v2/coordbench"] {
                rows.push(vec!["raft", workload, recipe, bin]);
            }
        }
        let rows: Vec<&[&str]> = rows.iter().map(Vec::as_slice).collect();
        let t = table(&["target", "workload", "recipe", "engine_bin"], &rows);
        let swept = [Axis::Workload, Axis::EngineBin];
        let (x, others) = choose_x(&t, &all(&t), Some(&swept));
        assert!(matches!(x.kind, XKind::Axis(Axis::Workload, _)), "{x:?}");
        let series = group(&t, &all(&t), &x, &others);
        let labels: Vec<String> = series.iter().map(Series::label).collect();
        assert_eq!(
            labels,
            [
                "raft (coordbench) /v1/coordbench",
                "raft (coordbench) /v2/coordbench"
            ]
        );
        assert!(series.iter().all(|s| s.points.len() == 2), "{series:?}");
        let (_, others) = choose_x(&t, &all(&t), None);
        assert_eq!(
            others.len(),
            2,
            "without the list, the recipe column counts"
        );

        // Without a quantity, the workload takes x and the binaries split its lines.
        let t = table(
            &["target", "workload", "engine_bin"],
            &[
                &["raft", "kv-put", "/v1/coordbench"],
                &["raft", "lock", "/v2/coordbench"],
            ],
        );
        let (x, others) = choose_x(&t, &all(&t), None);
        assert!(matches!(x.kind, XKind::Axis(Axis::Workload, _)), "{x:?}");
        assert_eq!(others.len(), 1);
    }
}
