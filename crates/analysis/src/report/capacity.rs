//! Capacity in a report: the latency–throughput curve (p50, p99 and p99.9 against achieved
//! throughput, one colour per target) from the probes of capacity searches or from an
//! open-loop rate sweep, with the objective's line and each target's max rate marked; the
//! max rate at the objective per target and configuration; and what N× the load would
//! need ([`super::planning`]).

use std::fmt::Write as _;
use std::path::Path;

use super::chart::{number, target_color, Line, LineChart, XScale};
use super::planning::{self, Planning};
use super::state_cost::costs;
use super::table::Table;
use crate::slo::Slo;

/// One window: achieved throughput and its percentiles (ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub throughput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
}

/// One target's (or configuration's) curve.
#[derive(Debug, Clone)]
pub struct Curve {
    pub target: String,
    pub label: String,
    pub points: Vec<CurvePoint>,
    pub max_rate: Option<f64>,
    /// The latency objective, ms, and how it reads (`p99<20ms`).
    pub slo: Option<(f64, String)>,
}

/// The curves of a report directory: a capacity search's probes per row that has a
/// capacity.json, else one curve per target of an open-loop rate sweep.
pub fn curves(dir: &Path, table: &Table, rows: &[usize]) -> Vec<Curve> {
    let searched: Vec<Curve> = rows
        .iter()
        .filter_map(|&r| search_curve(&table.run_dir(dir, r)?.join("capacity.json")))
        .collect();
    // A rate sweep offers several rates; a sweep at one rate has no curve.
    let rates: std::collections::BTreeSet<&str> = rows
        .iter()
        .filter_map(|&r| table.rows[r].get("rate"))
        .collect();
    if !searched.is_empty() || rates.len() < 2 {
        return searched;
    }
    let mut swept: Vec<Curve> = Vec::new();
    for &r in rows {
        let row = &table.rows[r];
        let ms = |c: &str| row.num(c).map(|v| v / 1000.0);
        let (Some(t), Some(p50), Some(p99), Some(p999)) = (
            row.num("throughput_ops_s"),
            ms("p50_us"),
            ms("p99_us"),
            ms("p999_us"),
        ) else {
            continue;
        };
        // Tails the run cannot support are not drawn (NaN is left out of the lines).
        let n = row.latency_n();
        let (p99, p999) = (drawable(n, 0.99, p99), drawable(n, 0.999, p999));
        if row.get("mode") != Some("open") {
            continue;
        }
        let target = row.get("target").unwrap_or("?").to_string();
        let point = CurvePoint {
            throughput: t,
            p50_ms: p50,
            p99_ms: p99,
            p999_ms: p999,
        };
        match swept.iter_mut().find(|c| c.target == target) {
            Some(c) => c.points.push(point),
            None => swept.push(Curve {
                label: target.clone(),
                target,
                points: vec![point],
                max_rate: None,
                slo: None,
            }),
        }
    }
    swept.retain(|c| c.points.len() > 1);
    swept
}

/// `ms` when `n` operations support percentile `p`, else NaN (not drawn).
fn drawable(n: u64, p: f64, ms: f64) -> f64 {
    if coordbench_results::tails::supported(n, p) {
        ms
    } else {
        f64::NAN
    }
}

/// The probes of one capacity.json as a curve.
fn search_curve(path: &Path) -> Option<Curve> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    let target = v.get("target")?.as_str()?.to_string();
    let ms = |p: &serde_json::Value, k: &str| {
        Some(p.pointer(&format!("/figures/{k}"))?.as_f64()? / 1000.0)
    };
    let mut points: Vec<CurvePoint> = v
        .get("probes")?
        .as_array()?
        .iter()
        .filter_map(|p| {
            // The probe's successful operations: a lower bound of its latency sample.
            let n = p
                .pointer("/figures/ops")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            Some(CurvePoint {
                throughput: p.get("throughput_ops_s")?.as_f64()?,
                p50_ms: ms(p, "p50_us")?,
                p99_ms: drawable(n, 0.99, ms(p, "p99_us")?),
                p999_ms: ms(p, "p999_us").map_or(f64::NAN, |v| drawable(n, 0.999, v)),
            })
        })
        .collect();
    points.sort_by(|a, b| a.throughput.total_cmp(&b.throughput));
    let slo = v.get("slos")?.as_array()?.iter().find_map(|s| {
        let text = s.as_str()?;
        let bound = Slo::parse(text).ok()?.latency_bound()?;
        Some((bound.as_secs_f64() * 1000.0, text.to_string()))
    });
    let dir = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let label = match dir.as_deref() {
        Some(d) if d.starts_with(&target) => d.trim_end_matches("-r1").to_string(),
        _ => target.clone(),
    };
    Some(Curve {
        target,
        label,
        points,
        max_rate: v.get("max_rate_ops_s").and_then(serde_json::Value::as_f64),
        slo,
    })
}

/// The hockey stick: every curve's percentiles, the objective and each max rate.
pub fn chart(curves: &[Curve]) -> Option<LineChart> {
    let top_x = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.throughput))
        .fold(0.0, f64::max);
    if curves.is_empty() || top_x <= 0.0 {
        return None;
    }
    let slo = curves.iter().find_map(|c| c.slo.clone());
    let top_y = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.p999_ms.max(p.p99_ms)))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    // Past a few times the objective the curve is a wall: keep the knee readable.
    let y_top = slo
        .as_ref()
        .map_or(top_y * 1.1, |(ms, _)| (top_y * 1.1).min(ms * 4.0));
    let mut lines = Vec::new();
    for c in curves {
        let color = target_color(&c.target);
        for (name, pick, dashed, markers) in [
            (
                "p50",
                (|p: &CurvePoint| p.p50_ms) as fn(&CurvePoint) -> f64,
                false,
                true,
            ),
            ("p99", |p: &CurvePoint| p.p99_ms, true, true),
            ("p99.9", |p: &CurvePoint| p.p999_ms, true, false),
        ] {
            let points: Vec<(f64, f64)> = c
                .points
                .iter()
                .map(|p| (p.throughput, pick(p)))
                .filter(|p| p.1.is_finite())
                .collect();
            lines.push(Line {
                label: format!("{} {name}", c.label),
                color,
                dashed,
                markers,
                points,
                bars: Vec::new(),
            });
        }
        if let Some(rate) = c.max_rate {
            lines.push(Line {
                label: format!("{} max rate {}/s", c.label, number(rate.round())),
                color,
                dashed: true,
                markers: false,
                points: vec![(rate, 0.0), (rate, y_top)],
                bars: Vec::new(),
            });
        }
    }
    if let Some((ms, text)) = &slo {
        lines.push(Line {
            label: format!("objective {text}"),
            color: plotters::style::RGBColor(90, 90, 90),
            dashed: true,
            markers: false,
            points: vec![(0.0, *ms), (top_x, *ms)],
            bars: Vec::new(),
        });
    }
    Some(LineChart {
        title: "Latency against achieved throughput".into(),
        x_label: "achieved throughput (ops/s)".into(),
        y_label: "latency (ms)".into(),
        x_scale: XScale::Linear,
        y_range: Some((0.0, y_top)),
        lines,
        notes: Vec::new(),
    })
}

/// Max rate per target and configuration, and the N× paragraph; empty without a
/// `max_rate_ops_s` column.
pub fn section(table: &Table, rows: &[usize], planning: &Planning) -> String {
    if !table.has("max_rate_ops_s") {
        return String::new();
    }
    let mut s = String::from(
        "| point | target | cluster size | disk | objective | max rate | limited by | p99 at it (ms) | windows |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    // Searches only: a state sweep's rows in the same table have no objective.
    for &r in rows.iter().filter(|&&r| table.rows[r].get("slo").is_some()) {
        let row = &table.rows[r];
        let cell = |c: &str| row.get(c).unwrap_or("–").to_string();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell("point"),
            cell("target"),
            cell("cluster_size"),
            cell("disk"),
            cell("slo"),
            row.num("max_rate_ops_s")
                .map_or("none".into(), |v| number(v.round())),
            cell("limited_by"),
            row.num("p99_us")
                .map_or("–".into(), |v| format!("{:.2}", v / 1000.0)),
            row.get("probes").map_or(0, |p| p.split(';').count()),
        );
    }
    s.push('\n');
    s.push_str(&planning::paragraph(
        table,
        rows,
        &costs(table, rows),
        planning,
    ));
    s
}
