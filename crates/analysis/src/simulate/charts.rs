//! The election-time CDFs: one chart per timeout range with the Raft paper's stated points
//! beside the simulated line, and one with every range (log time axis), drawn by the
//! report's chart code (SVG and PNG).

use std::path::{Path, PathBuf};

use plotters::style::RGBColor;

use crate::report::chart::{render, shade, target_color, Line, LineChart, XScale};
use crate::report::failover::cdf;
use crate::report::published::RAFT_FIGURE16;
use crate::report::ReportError;

use super::timeouts::TimeoutRange;

const PAPER: RGBColor = RGBColor(0, 0, 0);

/// The paper's points for `range`, each a marker of its own.
fn paper_lines(range: &TimeoutRange) -> Vec<Line> {
    RAFT_FIGURE16
        .iter()
        .filter(|p| p.min_ms == range.min_ms && p.max_ms == range.max_ms)
        .map(|p| Line {
            label: format!("Raft paper, Fig. 16, {range} ms: {}", p.what),
            color: PAPER,
            dashed: false,
            markers: true,
            points: vec![(p.at_ms, p.fraction)],
            bars: Vec::new(),
        })
        .collect()
}

fn chart(title: String, x_scale: XScale, lines: Vec<Line>) -> LineChart {
    LineChart {
        title,
        x_label: "time without a leader after the crash (ms)".into(),
        y_label: "fraction of trials at or below".into(),
        x_scale,
        y_range: Some((0.0, 1.02)),
        lines,
        notes: Vec::new(),
    }
}

/// Writes `cdf-<range>.{svg,png}` per line and `cdf-all.{svg,png}` into `dir`.
/// `lines` holds each range's sorted election times in ms.
pub fn write(
    dir: &Path,
    core: &str,
    members: u64,
    lines: &[(TimeoutRange, Vec<f64>)],
) -> Result<Vec<PathBuf>, ReportError> {
    let mut files = Vec::new();
    let mut all = Vec::new();
    for (i, (range, ms)) in lines.iter().enumerate() {
        let t = if lines.len() > 1 {
            i as f64 / (lines.len() - 1) as f64
        } else {
            0.0
        };
        let simulated = Line {
            label: format!("{core} simulated, {range} ms ({} trials)", ms.len()),
            color: shade(target_color(core), t),
            dashed: false,
            markers: false,
            points: cdf(ms),
            bars: Vec::new(),
        };
        all.push(simulated.clone());
        let mut own = vec![simulated];
        own.extend(paper_lines(range));
        let title = format!(
            "Election time after a leader crash: {core}, {members} members, timeouts {range} ms"
        );
        files.extend(render(
            &chart(title, XScale::Linear, own),
            dir,
            &format!("cdf-{range}"),
        )?);
    }
    all.extend(lines.iter().flat_map(|(range, _)| paper_lines(range)));
    let title = format!("Election time after a leader crash: {core}, {members} members");
    files.extend(render(&chart(title, XScale::Log10, all), dir, "cdf-all")?);
    Ok(files)
}
