//! The failover chart: when runs injected faults (`--fault`, failover.csv in their run
//! directories), the time to a new leader and to the first acknowledged write after each
//! fault, as a CDF over the faults, one pair of lines per target (and fault kind, when
//! several ran, and swept value, when a target ran several points). The figures are defined in docs/reference.md ("failover.csv columns").

use std::path::Path;

use super::chart::{shade, target_color, Line, LineChart, XScale};
use super::groups::Series;
use super::table::Table;

/// Faults of one target and kind: the two figures in ms, each where it was measured.
#[derive(Debug, Default, Clone, PartialEq)]
struct Faults {
    new_leader_ms: Vec<f64>,
    first_write_ms: Vec<f64>,
}

/// A line pair's identity: target, fault kind and, when a series has several points (a
/// swept axis such as `election_timeout`), the point's x value, so each value gets its own
/// lines rather than all being pooled.
type Key = (String, String, String);

/// The faults of every run of `series`, grouped by [`Key`] in first-seen order.
fn grouped(dir: &Path, table: &Table, series: &[Series]) -> Vec<(Key, Faults)> {
    let mut groups: Vec<(Key, Faults)> = Vec::new();
    for s in series {
        let per_point = s.points.len() > 1;
        for point in &s.points {
            let x = if per_point {
                point.x_text.clone()
            } else {
                String::new()
            };
            for row in &point.rows {
                let Some(run_dir) = table.run_dir(dir, *row) else {
                    continue;
                };
                for (kind, new_leader, first_write) in read(&run_dir.join("failover.csv")) {
                    let key = (s.label(), kind, x.clone());
                    let i = match groups.iter().position(|(k, _)| *k == key) {
                        Some(i) => i,
                        None => {
                            groups.push((key, Faults::default()));
                            groups.len() - 1
                        }
                    };
                    groups[i].1.new_leader_ms.extend(new_leader);
                    groups[i].1.first_write_ms.extend(first_write);
                }
            }
        }
    }
    groups
}

/// The failover chart, when any run of `series` has a failover.csv with figures.
pub fn chart(dir: &Path, table: &Table, series: &[Series]) -> Option<LineChart> {
    let groups = grouped(dir, table, series);
    let first_kind = groups.first().map(|((_, kind, _), _)| kind);
    let several_kinds = groups
        .iter()
        .any(|((_, kind, _), _)| Some(kind) != first_kind);
    let per_point = groups.iter().any(|((_, _, x), _)| !x.is_empty());
    let mut lines = Vec::new();
    for (i, ((label, kind, x), faults)) in groups.iter().enumerate() {
        let target = label.split(' ').next().unwrap_or(label);
        let mut name = label.clone();
        for part in [several_kinds.then_some(kind), per_point.then_some(x)]
            .into_iter()
            .flatten()
        {
            name = format!("{name} {part}");
        }
        let color = if several_kinds || per_point {
            // Shades of the target's colour, one per line pair of that target.
            let of_target = |k: &&(Key, Faults)| k.0 .0.split(' ').next() == Some(target);
            let nth = groups[..i].iter().filter(of_target).count();
            let all = groups.iter().filter(of_target).count().max(1);
            shade(target_color(target), nth as f64 / all as f64)
        } else {
            target_color(target)
        };
        for (values, what, dashed) in [
            (&faults.new_leader_ms, "new leader", false),
            (&faults.first_write_ms, "first write", true),
        ] {
            if values.is_empty() {
                continue;
            }
            lines.push(Line {
                label: format!("{name}: {what} ({} faults)", values.len()),
                color,
                dashed,
                markers: true,
                points: cdf(values),
                bars: Vec::new(),
            });
        }
    }
    (!lines.is_empty()).then(|| LineChart {
        title: "Failover: time to a new leader and to the first write".into(),
        x_label: "time after the fault (ms)".into(),
        y_label: "fraction of faults at or below".into(),
        x_scale: XScale::Linear,
        y_range: Some((0.0, 1.02)),
        lines,
        notes: Vec::new(),
    })
}

/// The time to a new leader (ms) of every `kind` fault in a failover.csv that has one.
pub(crate) fn new_leader_ms(path: &Path, kind: &str) -> Vec<f64> {
    read(path)
        .into_iter()
        .filter(|(k, _, _)| k == kind)
        .filter_map(|(_, new_leader, _)| new_leader)
        .collect()
}

/// A failover.csv's rows as (kind, new_leader ms, first_write ms); nothing if it is absent
/// or unreadable (a run without faults has none).
fn read(path: &Path) -> Vec<(String, Option<f64>, Option<f64>)> {
    let Ok(mut reader) = csv::Reader::from_path(path) else {
        return Vec::new();
    };
    let Ok(headers) = reader.headers().cloned() else {
        return Vec::new();
    };
    let column = |name: &str| headers.iter().position(|h| h == name);
    let (Some(kind), new_leader, first_write) = (
        column("fault"),
        column("new_leader_us"),
        column("first_write_us"),
    ) else {
        return Vec::new();
    };
    let ms = |record: &csv::StringRecord, i: Option<usize>| {
        record.get(i?)?.parse::<f64>().ok().map(|us| us / 1000.0)
    };
    reader
        .records()
        .filter_map(Result::ok)
        .map(|r| {
            (
                r.get(kind).unwrap_or_default().to_string(),
                ms(&r, new_leader),
                ms(&r, first_write),
            )
        })
        .collect()
}

/// (value, fraction of values at or below it), sorted.
pub(crate) fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .map(|(i, v)| (*v, (i + 1) as f64 / n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failover_csv_rows_become_a_cdf_per_figure() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("failover.csv");
        std::fs::write(
            &path,
            "fault,at_s,new_leader_us,first_write_us\n\
             kill-leader,1.0,300000,350000\n\
             kill-leader,3.0,100000,120000\n\
             pause-leader,5.0,,900000\n",
        )
        .unwrap();
        let rows = read(&path);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2], ("pause-leader".into(), None, Some(900.0)));
        assert_eq!(cdf(&[300.0, 100.0]), vec![(100.0, 0.5), (300.0, 1.0)]);
        assert!(read(&dir.path().join("none.csv")).is_empty());
    }

    #[test]
    fn a_target_with_several_points_gets_lines_per_swept_value() {
        let dir = tempfile::TempDir::new().unwrap();
        std::fs::write(
            dir.path().join("summary.csv"),
            "point,target,election_timeout,throughput_ops_s\na,raft,150-155,1\nb,raft,150-300,1\n",
        )
        .unwrap();
        for (point, us) in [("a", 400_000), ("b", 250_000)] {
            std::fs::create_dir(dir.path().join(point)).unwrap();
            std::fs::write(
                dir.path().join(point).join("failover.csv"),
                format!("fault,new_leader_us,first_write_us\nkill-leader,{us},{us}\n"),
            )
            .unwrap();
        }
        let table = Table::read(&dir.path().join("summary.csv")).unwrap();
        let point = |x: f64, text: &str, row: usize| super::super::groups::GroupPoint {
            x,
            x_text: text.into(),
            rows: vec![row],
        };
        let series = [Series {
            target: "raft".into(),
            key: String::new(),
            variant: 0,
            points: vec![point(0.0, "150-155", 0), point(1.0, "150-300", 1)],
        }];
        let chart = chart(dir.path(), &table, &series).unwrap();
        let labels: Vec<&str> = chart.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "raft (coordbench) 150-155: new leader (1 faults)",
                "raft (coordbench) 150-155: first write (1 faults)",
                "raft (coordbench) 150-300: new leader (1 faults)",
                "raft (coordbench) 150-300: first write (1 faults)",
            ]
        );
        assert_eq!(chart.lines[2].points, vec![(250.0, 1.0)]);
    }
}
