//! The report as a list of blocks (markdown text and charts), written twice: report.md, which
//! links each chart's PNG and SVG under `charts/`, and report.html, one self-contained file
//! for sharing, with the markdown rendered by pulldown-cmark and every chart's SVG inline.

use std::fmt::Write as _;
use std::path::Path;

use pulldown_cmark::{html, Options, Parser};

use super::ReportError;

#[derive(Debug, Clone)]
enum Block {
    Markdown(String),
    /// A chart written as `charts/<stem>.{svg,png}`.
    Chart {
        title: String,
        stem: String,
    },
}

#[derive(Debug, Clone, Default)]
pub struct Document {
    blocks: Vec<Block>,
}

impl Document {
    /// Appends markdown text (whole paragraphs, tables or headings).
    pub fn text(&mut self, markdown: impl Into<String>) {
        self.blocks.push(Block::Markdown(markdown.into()));
    }

    /// Appends a chart under a heading of its title.
    pub fn chart(&mut self, title: &str, stem: &str) {
        self.blocks.push(Block::Chart {
            title: title.into(),
            stem: stem.into(),
        });
    }

    /// Appends every block of `other`.
    pub fn extend(&mut self, other: Document) {
        self.blocks.extend(other.blocks);
    }

    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        for block in &self.blocks {
            match block {
                Block::Markdown(text) => out.push_str(text),
                Block::Chart { title, stem } => {
                    let _ = writeln!(
                        out,
                        "### {title}\n\n![{title}](charts/{stem}.png)\n\n[SVG](charts/{stem}.svg)\n"
                    );
                }
            }
        }
        out
    }

    /// One HTML file: the markdown rendered, each chart's SVG from `charts_dir` inline.
    pub fn to_html(&self, title: &str, charts_dir: &Path) -> Result<String, ReportError> {
        let mut body = String::new();
        for block in &self.blocks {
            match block {
                Block::Markdown(text) => {
                    html::push_html(&mut body, Parser::new_ext(text, Options::ENABLE_TABLES))
                }
                Block::Chart { title, stem } => {
                    let path = charts_dir.join(format!("{stem}.svg"));
                    let svg = std::fs::read_to_string(&path)
                        .map_err(|e| ReportError::Read(format!("{}: {e}", path.display())))?;
                    let _ = write!(
                        body,
                        "<h3>{}</h3>\n<figure>{}</figure>\n",
                        escape(title),
                        without_xml_declaration(&svg)
                    );
                }
            }
        }
        Ok(format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
            escape(title)
        ))
    }
}

/// Readable tables and charts that shrink to the window, nothing fetched from elsewhere.
const STYLE: &str = "body{font-family:'DejaVu Sans',Verdana,sans-serif;max-width:1000px;\
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}\
table{border-collapse:collapse;font-size:0.85em;margin:1em 0;display:block;overflow-x:auto}\
th,td{border:1px solid #ccc;padding:0.25em 0.5em;text-align:right}\
th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}\
figure{margin:0 0 2em 0}figure svg{max-width:100%;height:auto}\
code{background:#f4f4f4;padding:0 0.2em}";

/// An inline `<svg>` element must not carry the file's `<?xml ...?>` line.
fn without_xml_declaration(svg: &str) -> &str {
    let trimmed = svg.trim_start();
    if trimmed.starts_with("<?xml") {
        trimmed
            .find("?>")
            .map_or(trimmed, |end| trimmed[end + 2..].trim_start())
    } else {
        trimmed
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_inlines_chart_svgs_and_renders_tables() {
        let dir = tempfile::TempDir::new().unwrap();
        std::fs::write(
            dir.path().join("t.svg"),
            "<?xml version=\"1.0\"?>\n<svg width=\"10\"><text>x</text></svg>\n",
        )
        .unwrap();
        let mut doc = Document::default();
        doc.text("# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n");
        doc.chart("A & B", "t");
        let md = doc.to_markdown();
        assert!(md.contains("![A & B](charts/t.png)"), "{md}");
        let html = doc.to_html("r", dir.path()).unwrap();
        assert!(
            html.contains("<table>") && html.contains("<td>2</td>"),
            "{html}"
        );
        assert!(html.contains("<figure><svg width=\"10\">"), "{html}");
        assert!(html.contains("<h3>A &amp; B</h3>"), "{html}");
        assert!(!html.contains("<?xml") && !html.contains("t.png"), "{html}");
    }

    #[test]
    fn a_missing_chart_file_is_an_error() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut doc = Document::default();
        doc.chart("gone", "gone");
        let e = doc.to_html("r", dir.path()).unwrap_err().to_string();
        assert!(e.contains("gone.svg"), "{e}");
    }
}
