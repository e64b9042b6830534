//! summary.csv read by column name: a sweep's (axis columns first) or any file whose rows
//! are `coordbench run` summary rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ReportError;
use coordbench_results::axis::{HERD_FREE, HERD_FREE_RECIPES};

/// The column [`Table::name_herd_free_recipes`] keeps each row's recipe in, as run.
pub const RECIPE_AS_RUN: &str = "recipe_as_run";

/// One row: column → value as written.
#[derive(Debug, Clone, Default)]
pub struct Row(pub BTreeMap<String, String>);

impl Row {
    pub fn get(&self, column: &str) -> Option<&str> {
        self.0
            .get(column)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn num(&self, column: &str) -> Option<f64> {
        self.get(column)?.parse().ok()
    }

    /// The run's latency sample size: its successful operations plus its timeouts (which
    /// its latency histogram holds at the timeout; a summary from before the `timeouts`
    /// column counts its successes alone).
    pub fn latency_n(&self) -> u64 {
        let count = |c: &str| self.num(c).unwrap_or(0.0) as u64;
        count("ops") + count("timeouts")
    }

    /// Rows without a `complete` column count as complete.
    pub fn complete(&self) -> bool {
        self.get("complete") != Some("false")
    }
}

#[derive(Debug, Clone)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
}

impl Table {
    pub fn read(path: &Path) -> Result<Table, ReportError> {
        let fail = |e: csv::Error| ReportError::Read(format!("{}: {e}", path.display()));
        let mut reader = csv::Reader::from_path(path).map_err(fail)?;
        let columns: Vec<String> = reader
            .headers()
            .map_err(fail)?
            .iter()
            .map(String::from)
            .collect();
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(fail)?;
            rows.push(Row(columns
                .iter()
                .cloned()
                .zip(record.iter().map(String::from))
                .collect()));
        }
        for needed in ["target", "throughput_ops_s"] {
            if !columns.iter().any(|c| c == needed) {
                return Err(ReportError::Read(format!(
                    "{}: no `{needed}` column (expected a coordbench summary.csv)",
                    path.display()
                )));
            }
        }
        Ok(Table { columns, rows })
    }

    /// Renames every family's herd-free recipe (`etcd-mutex`, `zk-recipe`, `mutex`) to
    /// `herd-free` in the `recipe` column, so that targets of different API families that
    /// each ran their own herd-free recipe share a point; the name as run stays in
    /// [`RECIPE_AS_RUN`], which legends and the header show, as the console does.
    pub fn name_herd_free_recipes(&mut self) {
        let names = HERD_FREE_RECIPES;
        for row in &mut self.rows {
            let Some(recipe) = row.0.get("recipe").cloned() else {
                continue;
            };
            row.0.insert(RECIPE_AS_RUN.into(), recipe.clone());
            if names.contains(&recipe.as_str()) {
                row.0.insert("recipe".into(), HERD_FREE.to_string());
            }
        }
        if self.has("recipe") && !self.has(RECIPE_AS_RUN) {
            self.columns.push(RECIPE_AS_RUN.into());
        }
    }

    pub fn has(&self, column: &str) -> bool {
        self.columns.iter().any(|c| c == column)
    }

    /// The run directory of `row` in the report directory `dir`: a sweep's summary.csv
    /// names each point's directory in its `point` column; a run's own summary.csv has one
    /// row and no such column, and the run directory is `dir` itself. Other tables (rows put
    /// together by hand) have no run directories.
    pub fn run_dir(&self, dir: &Path, row: usize) -> Option<PathBuf> {
        match self.rows[row].get("point") {
            Some(point) => Some(dir.join(point)),
            None if !self.has("point") && self.rows.len() == 1 => Some(dir.to_path_buf()),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn herd_free_recipes_of_every_family_share_one_name() {
        let row = |recipe: &str| Row([("recipe".to_string(), recipe.to_string())].into());
        let mut table = Table {
            columns: vec!["recipe".into()],
            rows: vec![
                row("etcd-mutex"),
                row("zk-recipe"),
                row("naive"),
                row("mutex"),
            ],
        };
        table.name_herd_free_recipes();
        let names: Vec<_> = table
            .rows
            .iter()
            .map(|r| r.get("recipe").unwrap())
            .collect();
        assert_eq!(names, ["herd-free", "herd-free", "naive", "herd-free"]);
        let as_run: Vec<_> = table
            .rows
            .iter()
            .map(|r| r.get(RECIPE_AS_RUN).unwrap())
            .collect();
        assert_eq!(as_run, ["etcd-mutex", "zk-recipe", "naive", "mutex"]);
    }
}
