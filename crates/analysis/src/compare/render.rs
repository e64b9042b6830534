//! A comparison as text: an aligned table for terminals, markdown for pull-request
//! comments and reports, JSON for machines. All three carry the same figures, the method
//! and alpha, and (with thresholds) one ✓/✗ line per threshold and point.

use std::fmt::Write as _;

use super::checks::{Check, CheckOutcome};
use super::distribution::{trim, Distribution, Percentile};
use super::figures::Scale;
use super::thresholds::signed_percent;
use super::verdict::Judged;
use super::{Comparison, PointComparison};
use coordbench_results::format::format_us;
use coordbench_results::tails;

/// Aligned columns for a terminal.
pub fn table(c: &Comparison, checks: Option<&[Check]>) -> String {
    render(c, checks, Style::Table)
}

/// GitHub-flavoured markdown.
pub fn markdown(c: &Comparison, checks: Option<&[Check]>) -> String {
    render(c, checks, Style::Markdown)
}

/// The comparison (and checks) as one JSON document.
pub fn json(c: &Comparison, checks: Option<&[Check]>) -> String {
    let doc = serde_json::json!({ "comparison": c, "thresholds": checks });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

#[derive(Clone, Copy, PartialEq)]
enum Style {
    Table,
    Markdown,
}

fn render(c: &Comparison, checks: Option<&[Check]>, style: Style) -> String {
    let mut out = String::new();
    let heading = |out: &mut String, text: &str| match style {
        Style::Markdown => {
            let _ = writeln!(out, "\n### {text}\n");
        }
        Style::Table => {
            let _ = writeln!(out, "\n{text}");
        }
    };
    let _ = writeln!(out, "{}", header(c));
    if let Some(checks) = checks {
        heading(&mut out, "thresholds");
        out.push_str(&check_lines(checks, style));
    }
    for point in &c.points {
        heading(
            &mut out,
            &format!(
                "{} ({} vs {} repeats)",
                point.label,
                point.base_dirs.len(),
                point.cand_dirs.len()
            ),
        );
        out.push_str(&grid(&figure_rows(point), style));
        for line in &point.noisy {
            let _ = writeln!(
                out,
                "{}noisy: {line}",
                if style == Style::Markdown { "\n" } else { "  " }
            );
        }
        if let Some(distribution) = &point.distribution {
            let _ = writeln!(
                out,
                "{}",
                distribution_heading(distribution, style == Style::Markdown)
            );
            out.push_str(&grid(&distribution_rows(&distribution.percentiles), style));
        }
    }
    for (side, labels) in [("baseline", &c.only_base), ("candidate", &c.only_cand)] {
        if !labels.is_empty() {
            let _ = writeln!(out, "\nonly the {side} measured: {}", labels.join("; "));
        }
    }
    out
}

fn header(c: &Comparison) -> String {
    let side = |s: &super::SideInfo| {
        let mut text = format!("{} ({} runs", s.paths.join(", "), s.runs);
        if !s.incomplete.is_empty() {
            text.push_str(&format!(", {} incomplete left out", s.incomplete.len()));
        }
        text + ")"
    };
    let mut text = format!(
        "baseline:  {}\ncandidate: {}\nmethod:    {}; alpha {}, each CI at >= {:.0}%; no verdict below {} repeats per side",
        side(&c.base),
        side(&c.cand),
        c.method,
        c.alpha,
        (1.0 - c.alpha) * 100.0,
        c.min_repeats
    );
    if c.differences.is_empty() {
        text.push_str("\ndiffers:   nothing in the runs' configuration (an A/A comparison)");
    } else {
        let diffs: Vec<String> = c
            .differences
            .iter()
            .map(|d| format!("{} {} -> {}", d.field, shown(&d.base), shown(&d.cand)))
            .collect();
        text.push_str(&format!("\ndiffers:   {}", diffs.join("; ")));
    }
    text
}

fn shown(v: &str) -> &str {
    if v.is_empty() {
        "(unset)"
    } else {
        v
    }
}

fn check_lines(checks: &[Check], style: Style) -> String {
    let mut out = String::new();
    for check in checks {
        let mark = match check.outcome {
            CheckOutcome::Passed => "✓",
            CheckOutcome::Breached => "✗",
            CheckOutcome::NoVerdict => "?",
        };
        let bullet = if style == Style::Markdown { "- " } else { "  " };
        let _ = writeln!(
            out,
            "{bullet}{mark} {} — {}: {} ({})",
            check.threshold, check.point, check.detail, check.test
        );
    }
    out
}

fn figure_rows(point: &PointComparison) -> Vec<Vec<String>> {
    let mut rows = vec![header_row("figure")];
    for j in &point.figures {
        rows.push(vec![
            j.figure.clone(),
            value(&j.figure, j.base_median),
            value(&j.figure, j.cand_median),
            change(j),
            interval(j),
            p_value(j),
            j.verdict.text(),
        ]);
    }
    rows
}

/// The distribution table's heading: each side's sample size, and the percentiles left
/// out because a side cannot support them.
fn distribution_heading(d: &Distribution, markdown: bool) -> String {
    let mut text = format!(
        "latency distribution (merged latency.hlog of each side; baseline {}, candidate {}",
        tails::n_label(d.base_n),
        tails::n_label(d.cand_n)
    );
    if !d.withheld.is_empty() {
        let names: Vec<String> = d
            .withheld
            .iter()
            .map(|p| format!("p{}", trim(*p)))
            .collect();
        text.push_str(&format!(
            "; {} withheld: fewer than {} operations lie beyond them",
            names.join(", "),
            tails::MIN_BEYOND
        ));
    }
    text.push(')');
    if markdown {
        let mut chars = text.chars();
        let first = chars.next().map(|c| c.to_ascii_uppercase()).unwrap_or(' ');
        format!("\n{first}{}:\n", chars.as_str())
    } else {
        format!("  {text}:")
    }
}

fn distribution_rows(rows: &[Percentile]) -> Vec<Vec<String>> {
    let mut out = vec![header_row("percentile")];
    for p in rows {
        let merged = if p.base_us > 0 {
            signed_percent(p.cand_us as f64 / p.base_us as f64 - 1.0)
        } else {
            "-".into()
        };
        let label = if p.percentile >= 100.0 {
            "max".to_string()
        } else {
            format!("p{}", trim(p.percentile))
        };
        out.push(vec![
            label,
            format_us(p.base_us),
            format_us(p.cand_us),
            merged,
            interval(&p.judged),
            p_value(&p.judged),
            p.judged.verdict.text(),
        ]);
    }
    out
}

/// The columns of both tables, after the first.
fn header_row(first: &str) -> Vec<String> {
    [
        first,
        "baseline",
        "candidate",
        "change",
        "CI",
        "p",
        "verdict",
    ]
    .iter()
    .map(|t| t.to_string())
    .collect()
}

/// Change as a percentage for ratios, as a signed difference for counts.
fn change(j: &Judged) -> String {
    match (j.scale, j.ratio()) {
        (Scale::Ratio, Some(r)) => signed_percent(r - 1.0),
        _ => format!("{:+}", j.cand_median - j.base_median),
    }
}

fn interval(j: &Judged) -> String {
    let Some(i) = &j.interval else {
        return "-".into();
    };
    match j.scale {
        Scale::Ratio => format!(
            "[{}, {}]",
            signed_percent(i.low - 1.0),
            signed_percent(i.high - 1.0)
        ),
        Scale::Shift => format!("[{:+}, {:+}]", i.low, i.high),
    }
}

fn p_value(j: &Judged) -> String {
    j.p_value.map_or("-".into(), |p| format!("{p:.3}"))
}

/// A figure's value in its unit: latencies as µs/ms/s, everything else to 4 digits.
fn value(figure: &str, v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if figure.ends_with("_us") {
        return format_us(v.round() as u64);
    }
    if v.abs() >= 1000.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// Rows as aligned columns (first row the header) or a markdown table.
fn grid(rows: &[Vec<String>], style: Style) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let padded: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        match style {
            Style::Table => {
                let _ = writeln!(out, "  {}", padded.join("  ").trim_end());
            }
            Style::Markdown => {
                let _ = writeln!(out, "| {} |", padded.join(" | "));
                if i == 0 {
                    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w.max(&3))).collect();
                    let _ = writeln!(
                        out,
                        "|{}|",
                        rule.iter()
                            .map(|r| format!(" {r} "))
                            .collect::<Vec<_>>()
                            .join("|")
                    );
                }
            }
        }
    }
    out
}
