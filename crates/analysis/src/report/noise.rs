//! The report's noise badges ([`coordbench_results::noise`]): a point whose generator
//! waited for a CPU beyond the threshold in some repeat, or whose repeats' throughput
//! differs beyond it.

use std::path::Path;

use coordbench_results::noise;

use super::table::Table;

/// The largest share of its window any run of `rows` waited for a CPU, when over the
/// threshold (from each run's run.json `generator.runqueue_wait_s` and `results.window_s`).
pub fn cpu_wait(dir: &Path, table: &Table, rows: &[usize]) -> Option<f64> {
    rows.iter()
        .filter_map(|&r| {
            let run = table.run_dir(dir, r)?.join("run.json");
            let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(run).ok()?).ok()?;
            let wait = meta.get("generator")?.get("runqueue_wait_s")?.as_f64()?;
            let window = meta.get("results")?.get("window_s")?.as_f64()?;
            noise::cpu_wait(wait, window)
        })
        .reduce(f64::max)
}

/// largest / smallest throughput of the repeats `rows`, when over the threshold.
pub fn repeats_vary(table: &Table, rows: &[usize]) -> Option<f64> {
    let values: Vec<f64> = rows
        .iter()
        .filter_map(|&r| table.rows[r].num("throughput_ops_s"))
        .collect();
    noise::repeat_spread(&values)
}

/// The badges of a point, as its table cell shows them: ` ⚠ CPU wait 88%`, ` ⚠ repeats ×1.35`.
pub fn badges(dir: &Path, table: &Table, rows: &[usize]) -> String {
    let mut s = String::new();
    if let Some(share) = cpu_wait(dir, table, rows) {
        s.push_str(&format!(" ⚠ CPU wait {:.0}%", share * 100.0));
    }
    if let Some(ratio) = repeats_vary(table, rows) {
        if ratio.is_finite() {
            s.push_str(&format!(" ⚠ repeats ×{ratio:.2}"));
        } else {
            s.push_str(" ⚠ repeats ×∞");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn badges_name_the_cpu_wait_and_the_repeats_spread() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("summary.csv"),
            "point,target,throughput_ops_s\na,raft,100\nb,raft,150\nc,raft,110\n",
        )
        .unwrap();
        for (point, wait) in [("a", 0.1), ("b", 0.9), ("c", 0.0)] {
            std::fs::create_dir(dir.path().join(point)).unwrap();
            let run = serde_json::json!({"generator": {"runqueue_wait_s": wait}, "results": {"window_s": 10.0}});
            std::fs::write(dir.path().join(point).join("run.json"), run.to_string()).unwrap();
        }
        let table = Table::read(&dir.path().join("summary.csv")).unwrap();
        assert_eq!(badges(dir.path(), &table, &[0, 2]), "");
        assert_eq!(
            badges(dir.path(), &table, &[0, 1]),
            " ⚠ CPU wait 9% ⚠ repeats ×1.50"
        );
    }
}
