//! report.html as a reader sees it: the quickstart's sweep (workloads/quickstart.toml
//! --quick, its windows shortened) on real raft and zab members, then its report.html
//! rendered by headless Chromium (Debian's chromium-headless-shell, installed by
//! scripts/install-deps.sh). A copy of the page carries a probe script that, once the page
//! has loaded, writes what the browser laid out into the DOM, which `--dump-dom` prints:
//! every chart drawn at a visible size with its footer (workload, clients, members,
//! versions, repeats), every image loaded, the header block naming each server's version,
//! the window and the repeats, the figures table before the first chart, and no link to a
//! file that neither the report nor this repository has.

#[path = "common/output.rs"]
mod output;

use std::path::{Path, PathBuf};
use std::process::Command;

use output::describe;
use serde_json::Value;

/// Where report links to the project's own files point (the report's REPO_URL).
const REPO_PREFIX: &str = "https://github.com/coordbench/coordbench/blob/main/";

/// Runs after the load event; everything it reports is from the browser's own layout.
const PROBE: &str = r#"<script>
addEventListener('load', () => {
  const size = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  const order = (a, b) => a && b && (a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0;
  const headings = [...document.querySelectorAll('h2')];
  const figuresHeading = headings.find(h => h.textContent.trim() === 'Figures');
  const figuresTable = figuresHeading && figuresHeading.nextElementSibling;
  const firstChart = document.querySelector('figure');
  const headerTable = document.querySelector('table');
  const out = {
    charts: [...document.querySelectorAll('figure')].map(f => {
      const svg = f.querySelector('svg');
      return { size: svg ? size(svg) : [0, 0], text: svg ? svg.textContent.replace(/\s+/g, ' ') : '' };
    }),
    images: [...document.images].map(i => ({ src: i.getAttribute('src'), loaded: i.complete && i.naturalWidth > 0 })),
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    header: headerTable ? [...headerTable.rows].map(r => [...r.cells].map(c => c.textContent.trim())) : [],
    figures_table_first: !!figuresTable && figuresTable.tagName === 'TABLE' && order(figuresTable, firstChart),
  };
  const pre = document.createElement('pre');
  pre.id = 'layout-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"#;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Debian's headless shell, or a full chromium where that is what is installed.
fn chromium() -> PathBuf {
    ["chromium-headless-shell", "chromium"]
        .iter()
        .find_map(|name| which(name))
        .expect("Chromium is missing: scripts/install-deps.sh installs chromium-headless-shell")
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
}

/// The quickstart spec with 1 s windows and 2 repeats: the same report, in a test's time.
fn quickstart_spec(dir: &Path) -> PathBuf {
    let spec = std::fs::read_to_string(repo().join("workloads/quickstart.toml")).unwrap();
    let short = spec
        .replace("repeats = 3", "repeats = 2")
        .replace("duration = \"4s\"", "duration = \"1s\"");
    assert_ne!(
        short, spec,
        "the quickstart spec's repeats and window lines moved"
    );
    let path = dir.join("quickstart.toml");
    std::fs::write(&path, short).unwrap();
    path
}

/// What Chromium laid out for `report.html` in `dir`.
fn layout(dir: &Path) -> Value {
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let page = dir.join("probe.html");
    std::fs::write(&page, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args([
            "--window-size=1100,2000",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("start Chromium");
    assert!(out.status.success(), "{}", describe(&out));
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom.find("<pre id=\"layout-probe\">").unwrap_or_else(|| {
        panic!(
            "the probe did not run after load; Chromium printed:\n{}",
            describe(&out)
        )
    });
    let json = &dom[start + "<pre id=\"layout-probe\">".len()..];
    let json = &json[..json.find("</pre>").expect("probe's end")];
    // A dumped text node escapes only these.
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("probe's JSON: {e}: {json}"))
}

/// A link the report holds must reach something: an anchor of the page, a file beside the
/// report, or a file of this repository under the project's address.
fn dead_link(dir: &Path, ids: &[&str], href: &str) -> Option<String> {
    let found = if let Some(id) = href.strip_prefix('#') {
        ids.contains(&id)
    } else if let Some(path) = href.strip_prefix(REPO_PREFIX) {
        let path = path.split('#').next().unwrap_or(path);
        repo().join(path).exists()
    } else if href.contains("://") || href.starts_with("mailto:") {
        false
    } else {
        dir.join(href.split('#').next().unwrap_or(href)).exists()
    };
    (!found).then(|| href.to_string())
}

fn header_value<'a>(header: &'a Value, what: &str) -> &'a str {
    header
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row[0] == what)
        .and_then(|row| row[1].as_str())
        .unwrap_or_else(|| panic!("no {what:?} row in the header block: {header}"))
}

#[test]
fn the_quickstart_report_renders_in_chromium_with_its_context_charts_and_live_links() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = quickstart_spec(tmp.path());
    let out = tmp.path().join("sweep");
    let sweep = Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args(["sweep", spec.to_str().unwrap(), "--quick", "--out"])
        .arg(&out)
        .output()
        .expect("run coordbench sweep");
    assert!(sweep.status.success(), "{}", describe(&sweep));

    let page = layout(&out);
    let header = &page["header"];
    let servers = header_value(header, "Servers");
    for engine in [
        "raft (coordbench) 3.5.0-coordbench",
        "zab (coordbench) 3.8.0-coordbench",
    ] {
        assert!(servers.contains(engine), "Servers: {servers}");
    }
    assert_eq!(header_value(header, "Window"), "1 s; warm-up 1 s");
    assert_eq!(header_value(header, "Repeats per point"), "2");
    assert_eq!(header_value(header, "Clients"), "16");
    let recipe = header_value(header, "Recipe");
    assert!(
        recipe.contains("herd-free (") && recipe.contains("raft: etcd-mutex"),
        "the header ties herd-free to each target's recipe: {recipe}"
    );
    assert_eq!(page["figures_table_first"], true, "{page}");

    let charts = page["charts"].as_array().unwrap();
    assert!(charts.len() >= 4, "{page}");
    for chart in charts {
        let (w, h) = (
            chart["size"][0].as_f64().unwrap(),
            chart["size"][1].as_f64().unwrap(),
        );
        assert!(w > 300.0 && h > 200.0, "a chart drawn at {w}×{h}: {chart}");
        let text = chart["text"].as_str().unwrap();
        for part in [
            "lock",
            "16 clients",
            "3 members",
            "3.5.0-coordbench",
            "3.8.0-coordbench",
            "2 repeats",
        ] {
            assert!(
                text.contains(part),
                "a chart's footer lacks {part:?}: {text}"
            );
        }
    }
    for image in page["images"].as_array().unwrap() {
        assert_eq!(image["loaded"], true, "an image did not load: {image}");
    }
    let ids: Vec<&str> = page["ids"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let links: Vec<&str> = page["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        links.iter().any(|l| l.starts_with(REPO_PREFIX)),
        "the report links its definitions: {links:?}"
    );
    let dead: Vec<String> = links
        .iter()
        .filter_map(|l| dead_link(&out, &ids, l))
        .collect();
    assert!(dead.is_empty(), "dead links in report.html: {dead:?}");
}
