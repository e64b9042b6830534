//! What a reader needs to trust a report before its first figure: the header block at the
//! top of report.md and report.html (server versions of every target, coordbench's version
//! and commit, the machine, disk, cluster size, clients, window and warm-up, repeats,
//! operations per run, date) and the same in one line under every chart, so a chart copied
//! out of the report still says what it shows.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::chart::target_name;
use super::table::{Table, RECIPE_AS_RUN};
use coordbench_results::tails;

/// The header block and the charts' footer line of one report.
#[derive(Debug, Clone)]
pub struct Context {
    /// (what, value) rows of the header block.
    pub rows: Vec<(String, String)>,
    /// The line every chart carries under it.
    pub footer: String,
}

impl Context {
    /// From the report directory's run.json (`meta`: a sweep's or a run's), the complete
    /// `rows` of its summary.csv, each run's own run.json, and the repeats per point
    /// (fewest, most).
    pub fn new(
        dir: &Path,
        meta: Option<&Value>,
        table: &Table,
        rows: &[usize],
        repeats: (usize, usize),
    ) -> Context {
        let runs: Vec<Value> = rows
            .iter()
            .filter_map(|&r| table.run_dir(dir, r))
            .filter_map(|d| serde_json::from_slice(&std::fs::read(d.join("run.json")).ok()?).ok())
            .collect();
        let config = |key: &str| -> Vec<String> {
            distinct(
                runs.iter()
                    .filter_map(|r| r.get("config")?.get(key))
                    .map(text),
            )
        };
        let column = |c: &str| {
            distinct(
                rows.iter()
                    .filter_map(|&r| table.rows[r].get(c))
                    .map(String::from),
            )
        };
        let env = meta
            .and_then(|m| m.get("environment"))
            .or_else(|| runs.first().and_then(|r| r.get("environment")));
        let versions = versions(table, rows, true);
        let workloads = column("workload");
        let recipes = column("recipe");
        let clients = column("clients");
        let sizes = column("cluster_size");
        let window = config("duration_s");
        let warmup = config("warmup_s");
        let ops: Vec<u64> = rows.iter().map(|&r| table.rows[r].latency_n()).collect();
        let repeats_text = range_text(repeats.0 as u64, repeats.1 as u64);
        let mut out = Vec::new();
        let mut add = |what: &str, value: String| {
            if !value.is_empty() {
                out.push((what.to_string(), value));
            }
        };
        add("Workload", workloads.join(", "));
        add("Recipe", recipes_as_run(table, rows).join(", "));
        add("Servers", versions.join("; "));
        add("coordbench", coordbench_version(env));
        add("Machine", machine(env));
        add("Disk", column("disk").join(", "));
        add("Cluster size", sizes.join(", "));
        add("Clients", clients.join(", "));
        add("Window", window_text(&window, &warmup));
        add("Repeats per point", repeats_text.clone());
        add(
            "Operations per run",
            match (ops.iter().min(), ops.iter().max()) {
                (Some(lo), Some(hi)) => format!("{} (timeouts included)", range_text(*lo, *hi)),
                _ => String::new(),
            },
        );
        add("Date", date(meta, &runs));
        let versions_short = self::versions(table, rows, false);
        let footer = [
            [workloads.join(", "), recipes.join(", ")]
                .join(" ")
                .trim()
                .to_string(),
            list("clients", &clients),
            list("members", &sizes),
            versions_short.join(", "),
            format!(
                "{repeats_text} repeat{}",
                if repeats.1 == 1 { "" } else { "s" }
            ),
        ]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" · ");
        Context { rows: out, footer }
    }

    /// The header block as a markdown table.
    pub fn markdown(&self) -> String {
        let mut s = String::from("| | |\n|---|---|\n");
        for (what, value) in &self.rows {
            let _ = writeln!(s, "| {what} | {} |", value.replace('|', "\\|"));
        }
        s.push('\n');
        s
    }
}

/// The recipes as the report's points name them, each shared name followed by what each
/// target ran under it, so that the header ties the charts' `herd-free` to the console's
/// names: `herd-free (raft: etcd-mutex, zab: zk-recipe), naive`.
fn recipes_as_run(table: &Table, rows: &[usize]) -> Vec<String> {
    let named = |r: usize| table.rows[r].get("recipe").map(String::from);
    let points = distinct(rows.iter().filter_map(|&r| named(r)));
    points
        .into_iter()
        .map(|name| {
            let ran = distinct(rows.iter().filter_map(|&r| {
                let row = &table.rows[r];
                let as_run = row.get(RECIPE_AS_RUN)?;
                let target = row.get("target")?;
                let renamed = row.get("recipe")? == name && as_run != name;
                renamed.then(|| format!("{target}: {as_run}"))
            }));
            match ran.is_empty() {
                true => name,
                false => format!("{name} ({})", ran.join(", ")),
            }
        })
        .collect()
}

/// Each target with its server version and, with `source`, where it came from:
/// `zab (coordbench) 3.8.0-coordbench`, `etcd 3.6.16 (Debian package)`.
fn versions(table: &Table, rows: &[usize], source: bool) -> Vec<String> {
    distinct(rows.iter().filter_map(|&r| {
        let row = &table.rows[r];
        let target = row.get("target")?;
        let mut s = target_name(target);
        if let Some(v) = row.get("server_version") {
            let _ = write!(s, " {v}");
        }
        if let Some(from) = row.get("server_source").filter(|_| source) {
            let _ = write!(s, " ({from})");
        }
        Some(s)
    }))
}

fn coordbench_version(env: Option<&Value>) -> String {
    let Some(env) = env else {
        return String::new();
    };
    let field = |k: &str| {
        env.get(k)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    format!(
        "{}, commit {}",
        field("coordbench_version"),
        field("git_commit")
    )
}

fn machine(env: Option<&Value>) -> String {
    let Some(env) = env else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(cpu) = env.get("cpu_model").and_then(Value::as_str) {
        parts.push(cpu.to_string());
    }
    if let Some(cores) = env.get("cores").and_then(Value::as_u64) {
        parts.push(format!("{cores} cores"));
    }
    if let Some(bytes) = env.get("memory_bytes").and_then(Value::as_u64) {
        parts.push(format!("{} GiB memory", bytes >> 30));
    }
    if let Some(os) = env.get("os").and_then(Value::as_str) {
        parts.push(os.to_string());
    }
    if let Some(kernel) = env.get("kernel").and_then(Value::as_str) {
        parts.push(format!("kernel {kernel}"));
    }
    parts.join(", ")
}

/// `5 s window, 1 s warm-up`; several values listed.
fn window_text(window: &[String], warmup: &[String]) -> String {
    if window.is_empty() {
        return String::new();
    }
    let secs = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s} s"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut s = secs(window);
    if !warmup.is_empty() {
        let _ = write!(s, "; warm-up {}", secs(warmup));
    }
    s
}

/// When it ran: the sweep's (or run's) start, else the first run's.
fn date(meta: Option<&Value>, runs: &[Value]) -> String {
    meta.and_then(|m| m.get("started_at"))
        .or_else(|| runs.first()?.get("started_at"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// `16 clients`, `clients 2, 4, 8`; empty when none.
fn list(what: &str, values: &[String]) -> String {
    match values {
        [] => String::new(),
        [one] => format!("{one} {what}"),
        many => format!("{what} {}", many.join(", ")),
    }
}

/// `3`, or `2–3`, with thousands separators.
fn range_text(lo: u64, hi: u64) -> String {
    if lo == hi {
        tails::thousands(lo)
    } else {
        format!("{}–{}", tails::thousands(lo), tails::thousands(hi))
    }
}

/// A JSON scalar as text: `5.0` as `5`.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// `values` in first-seen order without repeats, empty ones left out.
fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !v.is_empty() && !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, summary: &str, run: Value) {
        std::fs::write(dir.join("summary.csv"), summary).unwrap();
        std::fs::write(dir.join("run.json"), run.to_string()).unwrap();
    }

    #[test]
    fn a_single_runs_header_names_versions_machine_window_and_size() {
        let dir = tempfile::tempdir().unwrap();
        let run = serde_json::json!({
            "started_at": "2026-12-06T02:03:47Z",
            "environment": {"cpu_model": "AMD EPYC", "cores": 2, "memory_bytes": 25276194816u64,
                            "os": "Linux", "kernel": "6.1", "coordbench_version": "0.1.0",
                            "git_commit": "720b8addd433"},
            "config": {"duration_s": 5.0, "warmup_s": 1.0},
        });
        write(
            dir.path(),
            "target,workload,recipe,cluster_size,clients,disk,ops,timeouts,throughput_ops_s,server_version,server_source,complete\n\
             zab,lock,naive,3,16,tmpfs,210,1396,42.0,3.8.0-coordbench,,true\n",
            run.clone(),
        );
        let table = Table::read(&dir.path().join("summary.csv")).unwrap();
        let c = Context::new(dir.path(), Some(&run), &table, &[0], (1, 1));
        let md = c.markdown();
        for expected in [
            "| Servers | zab (coordbench) 3.8.0-coordbench |",
            "| coordbench | 0.1.0, commit 720b8addd433 |",
            "| Machine | AMD EPYC, 2 cores, 23 GiB memory, Linux, kernel 6.1 |",
            "| Disk | tmpfs |",
            "| Cluster size | 3 |",
            "| Clients | 16 |",
            "| Window | 5 s; warm-up 1 s |",
            "| Repeats per point | 1 |",
            "| Operations per run | 1,606 (timeouts included) |",
            "| Date | 2026-12-06T02:03:47Z |",
        ] {
            assert!(md.contains(expected), "{expected} not in:\n{md}");
        }
        assert_eq!(
            c.footer,
            "lock naive · 16 clients · 3 members · zab (coordbench) 3.8.0-coordbench · 1 repeat"
        );
    }

    #[test]
    fn what_varies_is_listed_and_ranges_are_spans() {
        assert_eq!(list("clients", &["2".into(), "4".into()]), "clients 2, 4");
        assert_eq!(list("clients", &[]), "");
        assert_eq!(range_text(980, 1_606), "980–1,606");
        assert_eq!(text(&serde_json::json!(5.0)), "5");
        assert_eq!(text(&serde_json::json!(0.5)), "0.5");
    }
}
