//! The sweep's summary.csv: one row per point and repeat. Leading columns name the point
//! (`point`, `repeat`, `target`, then one column per swept axis); the run's own summary.csv
//! columns follow, except those the leading columns already hold.
//!
//! Rows are copied from each point's summary.csv by column name, so columns added to runs
//! later appear here without change; points written by different builds are joined on the
//! union of their columns.

use std::path::Path;

use anyhow::Context;
use coordbench_results::files;

use crate::sweep::plan::Point;

/// A run's column of summary.csv beyond the leading ones: (name, value).
type Column = (String, String);

/// Writes `dir/summary.csv` from the points that have results; returns the rows written.
pub fn write(dir: &Path, points: &[Point]) -> anyhow::Result<usize> {
    let mut leading = vec!["point".to_string(), "repeat".into(), "target".into()];
    if let Some(first) = points.first() {
        leading.extend(first.axes.iter().map(|(a, _)| a.name().to_string()));
    }
    let mut run_columns: Vec<String> = Vec::new();
    let mut rows: Vec<(Vec<String>, Vec<Column>)> = Vec::new();
    for point in points {
        let path = point.dir.join("summary.csv");
        if !path.exists() {
            continue;
        }
        let mut reader =
            csv::Reader::from_path(&path).with_context(|| format!("reading {}", path.display()))?;
        let headers = reader
            .headers()
            .with_context(|| format!("reading {}", path.display()))?
            .clone();
        for record in reader.records() {
            let record = record.with_context(|| format!("reading {}", path.display()))?;
            let mut values = Vec::new();
            for (name, value) in headers.iter().zip(record.iter()) {
                if leading.iter().any(|l| l == name) {
                    continue;
                }
                if !run_columns.iter().any(|c| c == name) {
                    run_columns.push(name.to_string());
                }
                values.push((name.to_string(), value.to_string()));
            }
            let mut lead = vec![
                point.name.clone(),
                point.repeat.to_string(),
                point.target.clone(),
            ];
            lead.extend(point.axes.iter().map(|(_, v)| v.clone()));
            rows.push((lead, values));
        }
    }
    let header = leading.iter().chain(run_columns.iter());
    let records = rows.iter().map(|(lead, values)| {
        let rest = run_columns.iter().map(|c| {
            values
                .iter()
                .find(|(name, _)| name == c)
                .map_or("", |(_, v)| v.as_str())
        });
        lead.iter().map(String::as_str).chain(rest)
    });
    files::write_csv_table(&dir.join("summary.csv"), header, records)?;
    Ok(rows.len())
}
