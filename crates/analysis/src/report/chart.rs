//! Line charts drawn with plotters, once as SVG and once as PNG from the same description:
//! labelled axes with units, a legend, one fixed colour per target, and a footer of notes
//! (what ran, and what the chart leaves out, such as timed-out operations). On a
//! categorical x axis (targets, recipes, ...) nothing joins the points: each series is a dot
//! per category, set side by side, with the repeats' min–max whisker; lines are for numeric
//! axes only.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::font::FAMILY;
use super::ReportError;

/// How x values are placed.
#[derive(Debug, Clone, PartialEq)]
pub enum XScale {
    Linear,
    /// Powers of two evenly spaced (waiters 1, 2, 4, ...).
    Log2,
    Log10,
    /// Percentiles as fractions (0.5 … 0.9999) placed at log10(1 / (1 − p)), HdrHistogram's
    /// percentile-spectrum axis: 90%, 99%, 99.9% and 99.99% evenly spaced, so tails show.
    Percentile,
    /// Names evenly spaced in this order; x values are indices.
    Categories(Vec<String>),
}

impl XScale {
    /// Log2 or Log10 when the values span more than a factor 16 (and are positive).
    pub fn for_values(values: &[f64]) -> XScale {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !(min > 0.0 && max / min >= 16.0) {
            return XScale::Linear;
        }
        if values.iter().all(|v| v.log2().fract() == 0.0) {
            XScale::Log2
        } else {
            XScale::Log10
        }
    }

    fn place(&self, x: f64) -> f64 {
        match self {
            XScale::Linear | XScale::Categories(_) => x,
            XScale::Log2 => x.log2(),
            XScale::Log10 => x.log10(),
            XScale::Percentile => (1.0 / (1.0 - x)).log10(),
        }
    }

    fn label(&self, placed: f64, integers: bool) -> String {
        let whole = (placed - placed.round()).abs() < 1e-6;
        match self {
            // Counts (members, clients) have no tick between two values.
            XScale::Linear if integers && !whole => String::new(),
            XScale::Linear => number(placed),
            XScale::Log2 if !whole => String::new(),
            XScale::Log2 => number(placed.exp2()),
            // Decades only: 0.1, 1, 10, 100.
            XScale::Log10 if !whole => String::new(),
            XScale::Log10 => number(10f64.powf(placed)),
            XScale::Percentile if !whole || placed < 0.5 => String::new(),
            XScale::Percentile => format!("{}%", trim(100.0 - 100.0 / 10f64.powf(placed), 2)),
            XScale::Categories(names) => {
                let i = placed.round();
                if (placed - i).abs() > 1e-6 || i < 0.0 {
                    return String::new();
                }
                names.get(i as usize).cloned().unwrap_or_default()
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    pub color: RGBColor,
    pub dashed: bool,
    pub markers: bool,
    pub points: Vec<(f64, f64)>,
    /// Spread drawn as a vertical bar at x from low to high (the min and max of repeats).
    pub bars: Vec<Bar>,
}

/// The spread of one point: x (unplaced), the lowest and highest value, and the point's
/// own value (the mean) between them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub x: f64,
    pub low: f64,
    pub mid: f64,
    pub high: f64,
}

#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: XScale,
    /// `None`: from 0 to the largest value plus headroom.
    pub y_range: Option<(f64, f64)>,
    pub lines: Vec<Line>,
    /// Footer lines under the plot: context (workload, clients, versions, repeats) and
    /// what is not drawn (timeouts, withheld tails).
    pub notes: Vec<String>,
}

const SIZE: (u32, u32) = (960, 600);
/// Height of one footer line, px.
const NOTE_HEIGHT: u32 = 22;
/// Type sizes, px at [`SIZE`]: legible on the PNG at its own size.
const TITLE_PX: u32 = 24;
const AXIS_PX: u32 = 18;
const TICK_PX: u32 = 16;
const NOTE_PX: u32 = 15;
/// Characters of a footer line at [`NOTE_PX`] that fit across [`SIZE`]; longer notes wrap.
const NOTE_CHARS: usize = 112;

/// The colour of a target, the same on every chart.
pub fn target_color(target: &str) -> RGBColor {
    match target {
        "etcd" => RGBColor(31, 119, 180),
        "zookeeper" => RGBColor(255, 127, 14),
        "raft" => RGBColor(44, 160, 44),
        "zab" => RGBColor(214, 39, 40),
        "null" => RGBColor(127, 127, 127),
        "redis" => RGBColor(140, 86, 75),
        "postgres" => RGBColor(148, 103, 189),
        other => {
            const MORE: [RGBColor; 4] = [
                RGBColor(148, 103, 189),
                RGBColor(140, 86, 75),
                RGBColor(227, 119, 194),
                RGBColor(23, 190, 207),
            ];
            MORE[other.bytes().map(usize::from).sum::<usize>() % MORE.len()]
        }
    }
}

/// How a target is named in legends, titles and tables: coordbench's own engines say so,
/// `raft (coordbench)`, `zab (coordbench)`; other targets by their name.
pub fn target_name(target: &str) -> String {
    match target {
        "raft" | "zab" => format!("{target} (coordbench)"),
        other => other.to_string(),
    }
}

/// `color` darker (t = 0) to lighter (t = 1): lines of one target told apart.
pub fn shade(color: RGBColor, t: f64) -> RGBColor {
    let mix = |c: u8| {
        let c = c as f64;
        let v = if t < 0.5 {
            c * (0.6 + 0.8 * t)
        } else {
            c + (255.0 - c) * (t - 0.5) * 1.1
        };
        v.clamp(0.0, 255.0) as u8
    };
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

/// Writes `dir/<stem>.svg` and `dir/<stem>.png`.
pub fn render(chart: &LineChart, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, ReportError> {
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    let fail = |path: &Path, e: String| ReportError::Draw(format!("{}: {e}", path.display()));
    draw(SVGBackend::new(&svg, SIZE).into_drawing_area(), chart).map_err(|e| fail(&svg, e))?;
    draw(BitMapBackend::new(&png, SIZE).into_drawing_area(), chart).map_err(|e| fail(&png, e))?;
    Ok(vec![svg, png])
}

fn draw<DB: DrawingBackend>(
    whole: DrawingArea<DB, Shift>,
    chart: &LineChart,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let root = draw_footer(whole, &chart.notes)?;
    let categories = matches!(chart.x_scale, XScale::Categories(_));
    let count = chart.lines.len();
    let placed: Vec<Vec<(f64, f64)>> = chart
        .lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            l.points
                .iter()
                .map(|(x, y)| (chart.x_scale.place(*x) + dodge(categories, i, count), *y))
                .collect()
        })
        .collect();
    let ((x0, x1), (y0, y1)) = ranges(chart, &placed);

    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, (FAMILY, TITLE_PX))
        .margin(18)
        .x_label_area_size(55)
        .y_label_area_size(85)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    let x_labels = match &chart.x_scale {
        XScale::Categories(names) => names.len().max(1) * 2 + 1,
        XScale::Linear => 10,
        // Enough candidate ticks that whole powers are among them.
        XScale::Log2 | XScale::Log10 | XScale::Percentile => 20,
    };
    let integers = chart
        .lines
        .iter()
        .flat_map(|l| &l.points)
        .all(|(x, _)| x.fract() == 0.0);
    ctx.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .axis_desc_style((FAMILY, AXIS_PX))
        .label_style((FAMILY, TICK_PX))
        .max_light_lines(1)
        .light_line_style(RGBColor(238, 238, 238))
        .x_labels(x_labels)
        .x_label_formatter(&|v| chart.x_scale.label(*v, integers))
        .y_label_formatter(&|v| number(*v))
        .draw()
        .map_err(e)?;

    for (i, (line, points)) in chart.lines.iter().zip(&placed).enumerate() {
        let style = ShapeStyle::from(&line.color).stroke_width(2);
        if categories {
            // Dots only: nothing lies between two categories.
            ctx.draw_series(points.iter().map(|p| Circle::new(*p, 6, style.filled())))
                .map_err(e)?
                .label(&line.label)
                .legend(move |(x, y)| Circle::new((x + 11, y), 6, style.filled()));
        } else if line.dashed {
            ctx.draw_series(DashedLineSeries::new(points.clone(), 9, 5, style))
                .map_err(e)?
                .label(&line.label)
                .legend(move |(x, y)| {
                    DashedPathElement::new(vec![(x, y), (x + 22, y)], 6, 4, style)
                });
        } else {
            ctx.draw_series(LineSeries::new(points.clone(), style))
                .map_err(e)?
                .label(&line.label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], style));
        }
        if line.markers && !categories {
            ctx.draw_series(points.iter().map(|p| Circle::new(*p, 4, style.filled())))
                .map_err(e)?;
        }
        let bar_style = ShapeStyle::from(&line.color).stroke_width(2);
        let shift = dodge(categories, i, count);
        ctx.draw_series(line.bars.iter().map(|b| {
            let x = chart.x_scale.place(b.x) + shift;
            ErrorBar::new_vertical(x, b.low, b.mid, b.high, bar_style, 12)
        }))
        .map_err(e)?;
    }
    ctx.configure_series_labels()
        .position(legend_position(&placed))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FAMILY, TICK_PX))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// Fills the canvas, writes the footer notes (wrapped) at its bottom, and returns the area
/// above them for the plot.
fn draw_footer<DB: DrawingBackend>(
    whole: DrawingArea<DB, Shift>,
    notes: &[String],
) -> Result<DrawingArea<DB, Shift>, String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    whole.fill(&WHITE).map_err(e)?;
    let lines: Vec<String> = notes.iter().flat_map(|n| wrap(n, NOTE_CHARS)).collect();
    let footer = NOTE_HEIGHT * lines.len() as u32;
    let (root, area) = whole.split_vertically(SIZE.1 - footer - if footer > 0 { 6 } else { 0 });
    for (i, note) in lines.iter().enumerate() {
        area.draw(&Text::new(
            note.clone(),
            (18, i as i32 * NOTE_HEIGHT as i32),
            (FAMILY, NOTE_PX).into_font().color(&RGBColor(60, 60, 60)),
        ))
        .map_err(e)?;
    }
    Ok(root)
}

/// The plot's x and y ranges for the `placed` points of `chart`.
fn ranges(chart: &LineChart, placed: &[Vec<(f64, f64)>]) -> ((f64, f64), (f64, f64)) {
    let xs = placed.iter().flatten().map(|p| p.0);
    let (mut x0, mut x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    let pad = if x1 > x0 { (x1 - x0) * 0.05 } else { 0.5 };
    let x = match &chart.x_scale {
        XScale::Categories(names) => (-0.5, names.len() as f64 - 0.5),
        // p50 up to p99.99 or the highest percentile drawn, with room for the end labels
        // (p50 is placed at 0.3, p99.99 at 4).
        XScale::Percentile => (0.2, (x1.max(1.0) + 0.25).min(4.25)),
        _ => (x0 - pad, x1 + pad),
    };
    let y = chart.y_range.unwrap_or_else(|| {
        let bars = chart.lines.iter().flat_map(|l| &l.bars).map(|b| b.high);
        let max = placed
            .iter()
            .flatten()
            .map(|p| p.1)
            .chain(bars)
            .fold(0.0, f64::max);
        (0.0, if max > 0.0 { max * 1.2 } else { 1.0 })
    });
    (x, y)
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word stays
/// whole on its own line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let line = lines.last_mut().expect("never empty");
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(format!("  {word}"));
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

/// Where series `i` of `count` sits within its category: side by side, centred on it, so
/// the dots and whiskers of several series at one category do not cover each other.
fn dodge(categories: bool, i: usize, count: usize) -> f64 {
    if !categories || count < 2 {
        return 0.0;
    }
    let width = 0.6 / count as f64;
    (i as f64 - (count - 1) as f64 / 2.0) * width
}

/// Falling lines leave the upper right corner empty, rising ones the upper left.
fn legend_position(lines: &[Vec<(f64, f64)>]) -> SeriesLabelPosition {
    let (mut first, mut last) = (0.0, 0.0);
    for l in lines {
        if let (Some(a), Some(b)) = (l.first(), l.last()) {
            first += a.1;
            last += b.1;
        }
    }
    if last > first {
        SeriesLabelPosition::UpperLeft
    } else {
        SeriesLabelPosition::UpperRight
    }
}

/// A figure as a reader takes it in: 12k, 350, 3.5, 0.25 (three significant digits).
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6, 2))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3, 1))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        let decimals = (2.0 - a.log10().floor()).max(0.0) as usize;
        trim(v, decimals)
    }
}

fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footers_wrap_at_spaces_and_categories_sit_side_by_side() {
        assert_eq!(wrap("a bb ccc", 4), ["a bb", "  ccc"]);
        assert_eq!(wrap("short", 112), ["short"]);
        assert_eq!(dodge(false, 1, 3), 0.0);
        assert_eq!(dodge(true, 0, 1), 0.0);
        assert!((dodge(true, 0, 2) + 0.15).abs() < 1e-9 && (dodge(true, 1, 2) - 0.15).abs() < 1e-9);
    }
}
