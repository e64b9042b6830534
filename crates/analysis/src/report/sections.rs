//! report.md's text around the charts: the header (what ran, where, when), the table of
//! figures per point, and the published figures beside ours.

use std::fmt::Write as _;
use std::path::Path;

use super::chart::number;
use super::chart::target_name;
use super::context::Context;
use super::document::Document;
use super::groups::{mean, Series, XAxis, XKind};
use super::noise;
use super::sample;
use super::table::Table;
use coordbench_results::tails;

/// Where the report's links to the project's documents point: files a report names
/// (docs/reference.md, RESULTS.md) are not in its directory, so they link to the project.
pub const REPO_URL: &str = "https://github.com/coordbench/coordbench/blob/main";

/// A markdown link to `path` in the project: `[docs/reference.md](https://…/docs/reference.md)`.
pub fn repo_link(path: &str) -> String {
    format!("[{path}]({REPO_URL}/{path})")
}

/// The report, built section by section: the header, the figures, then the charts and
/// the sections after them.
pub struct Sections<'a> {
    table: &'a Table,
    /// The report's directory, where its runs are.
    dir: std::path::PathBuf,
    /// The report's name (the sweep's, or the directory).
    pub name: String,
    header: String,
    figures: String,
    charts: Document,
    tail: String,
}

impl<'a> Sections<'a> {
    pub fn new(
        dir: &Path,
        meta: Option<&serde_json::Value>,
        table: &'a Table,
        rows: &[usize],
        context: &Context,
    ) -> Self {
        let name = meta
            .and_then(|m| m.get("name")?.as_str().map(String::from))
            .unwrap_or_else(|| dir.display().to_string());
        let mut text = format!("# coordbench report: {name}\n\n");
        if let Some(m) = meta {
            if let Some(d) = m.get("description").and_then(|d| d.as_str()) {
                let _ = writeln!(text, "{d}\n");
            }
            // A sweep names its spec; a single run has none.
            if let Some(spec) = m.get("spec_file").and_then(|s| s.as_str()) {
                let quick = m.get("quick").and_then(|q| q.as_bool()).unwrap_or(false);
                let _ = writeln!(
                    text,
                    "Spec: `{spec}`{}. Started {}, finished {}.\n",
                    if quick { " (--quick)" } else { "" },
                    m.get("started_at").and_then(|s| s.as_str()).unwrap_or("?"),
                    m.get("finished_at").and_then(|s| s.as_str()).unwrap_or("?"),
                );
            }
        }
        text.push_str(&context.markdown());
        let _ = writeln!(
            text,
            "{} of {} runs complete; incomplete runs are left out of the charts and figures. \
             Points repeated more than once show the mean of their repeats, with whiskers from \
             the lowest to the highest repeat. A percentile is shown only where at least 10 \
             operations lie beyond it; timed-out operations are counted, not drawn. \
             Definitions of every figure: {}; published figures and their sources: {}.\n",
            rows.len(),
            table.rows.len(),
            repo_link("docs/reference.md"),
            repo_link("docs/published-figures.md"),
        );
        Sections {
            table,
            dir: dir.to_path_buf(),
            name,
            header: text,
            figures: String::new(),
            charts: Document::default(),
            tail: String::new(),
        }
    }

    pub fn chart(&mut self, title: &str, stem: &str) {
        self.charts.chart(title, stem);
    }

    pub fn figures(&mut self, x: &XAxis, series: &[Series]) {
        let extra: Vec<(&str, &str, f64)> = [
            ("notifications_per_release", "notifications / release", 1.0),
            ("requests_per_release", "requests / release", 1.0),
            ("sync_p99_us", "sync p99 (ms)", 1e-3),
            ("server_peak_rss_mb", "server peak RSS (MB)", 1.0),
            ("server_cpu_us_per_op", "server CPU (µs / op)", 1.0),
            ("client_cpu_us_per_op", "generator CPU (µs / op)", 1.0),
        ]
        .into_iter()
        // Only columns some charted row has a value in.
        .filter(|(c, _, _)| {
            series
                .iter()
                .flat_map(|s| &s.points)
                .flat_map(|p| &p.rows)
                .any(|&r| self.table.rows[r].get(c).is_some())
        })
        .collect();
        // Nothing but the target varies: the x column would repeat it.
        let x_column = !matches!(x.kind, XKind::Target);
        let mut s = String::from("| target | series |");
        if x_column {
            let _ = write!(s, " {} |", x.label);
        }
        s.push_str(" runs | throughput (ops/s) | n | p50 (ms) | p99 (ms) | errors | timeouts |");
        let mut rule = "|---|---|---|---|---|---|---|---|---|".to_string();
        if x_column {
            rule.push_str("---|");
        }
        for (_, title, _) in &extra {
            let _ = write!(s, " {title} |");
            rule.push_str("---|");
        }
        let _ = writeln!(s, "\n{rule}");
        let mut any_saturated = false;
        let mut any_noisy = false;
        for se in series {
            for p in &se.points {
                let p_rows = p.rows.clone();
                let m = |c: &str, scale: f64| {
                    mean(self.table, &p.rows, c).map_or("–".into(), |v| number(v * scale))
                };
                // A percentile is shown only where every repeat supports it.
                let pct = |c: &str, p: f64| {
                    if !sample::rows_support(self.table, &p_rows, p) {
                        tails::WITHHELD.into()
                    } else if sample::rows_at_timeout(self.table, &p_rows, p) {
                        "timeout".into()
                    } else {
                        m(c, 1e-3)
                    }
                };
                let saturated = p
                    .rows
                    .iter()
                    .any(|&r| self.table.rows[r].get("generator_saturated") == Some("true"));
                any_saturated |= saturated;
                let mut badge = if saturated { " ⚠ saturated" } else { "" }.to_string();
                let noisy = noise::badges(&self.dir, self.table, &p.rows);
                any_noisy |= !noisy.is_empty();
                badge.push_str(&noisy);
                let _ = write!(
                    s,
                    "| {}{} | {} |",
                    target_name(&se.target),
                    if x_column { "" } else { badge.as_str() },
                    if se.key.is_empty() { "–" } else { &se.key },
                );
                if x_column {
                    let _ = write!(s, " {}{badge} |", p.x_text);
                }
                let _ = write!(
                    s,
                    " {} | {} | {} | {} | {} | {} | {} |",
                    p.rows.len(),
                    m("throughput_ops_s", 1.0),
                    sample::n_range(self.table, &p.rows),
                    pct("p50_us", 0.5),
                    pct("p99_us", 0.99),
                    m("errors", 1.0),
                    tails::thousands(sample::timeouts(self.table, &p.rows)),
                );
                for (c, _, scale) in &extra {
                    let _ = write!(s, " {} |", m(c, *scale));
                }
                s.push('\n');
            }
        }
        s.push_str(&badge_notes(any_saturated, any_noisy));
        self.figures = format!("## Figures\n\n{s}\n");
    }

    /// A section of its own (nothing when `body` is empty).
    pub fn section(&mut self, title: &str, body: &str) {
        if !body.is_empty() {
            let _ = writeln!(self.tail, "## {title}\n\n{body}");
        }
    }

    pub fn published(&mut self, sections: &str) {
        if !sections.is_empty() {
            let _ = writeln!(self.tail, "## Published figures beside ours\n\n{sections}");
        }
    }

    /// The whole report: header, figures, charts, then the other sections.
    pub fn finish(self) -> Document {
        let mut doc = Document::default();
        doc.text(self.header);
        doc.text(self.figures);
        doc.text("## Charts\n\n");
        doc.extend(self.charts);
        doc.text(self.tail);
        doc
    }
}

/// What the figures table's badges mean, for those it shows.
fn badge_notes(saturated: bool, noisy: bool) -> String {
    let mut s = String::new();
    if saturated {
        let _ = writeln!(
            s,
            "\n⚠ saturated: the load generator of at least one run of the point was \
             saturated or starved of CPU (`generator_saturated` in summary.csv, {}), \
             so its figures understate the target.",
            repo_link("docs/reference.md")
        );
    }
    if noisy {
        let _ = writeln!(
            s,
            "\n⚠ CPU wait: the load generator of a run of the point waited for a CPU more than \
             {:.0}% of its window (run.json `generator.runqueue_wait_s`), so its latencies \
             include that wait. ⚠ repeats ×R: the point's repeats differ in throughput by more \
             than ×{} (largest / smallest). Either way the point is noisy: compare it with care.",
            coordbench_results::noise::CPU_WAIT_SHARE * 100.0,
            coordbench_results::noise::REPEAT_SPREAD
        );
    }
    s
}
