//! Honest tails end to end: a real `coordbench run --target zab` (three `coordbench serve
//! zab` processes) of the naive lock recipe whose waiters outlast a 50 ms operation
//! timeout, then `coordbench report` of its directory. The console counts the timeouts at
//! their limit and withholds the percentiles the sample cannot support (at least 10
//! operations beyond a percentile); summary.csv and run.json count the timeouts; the
//! report's table marks percentiles that are timeouts and its CDF footer says how many
//! timeouts were left undrawn.

#[path = "common/output.rs"]
mod output;

use std::process::Command;

use coordbench_results::tails;
use output::describe;

fn coordbench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args(args)
        .output()
        .expect("run coordbench")
}

/// The line of `text` whose first word is `label`.
fn row<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(label))
        .unwrap_or_else(|| panic!("no {label} row in:\n{text}"))
}

#[test]
fn timeouts_are_counted_and_unsupported_tails_withheld_on_the_console_and_in_the_report() {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().to_str().expect("utf-8 path");
    // 16 clients queue on one naive lock held 10 ms: a waiter waits ~150 ms, past 50 ms.
    let run = coordbench(&[
        "run",
        "--target",
        "zab",
        "--workload",
        "lock",
        "--recipe",
        "naive",
        "--clients",
        "16",
        "--duration",
        "5s",
        "--op-timeout",
        "50ms",
        "--disk",
        "tmpfs",
        "--quiet",
        "--out",
        dir,
    ]);
    assert!(run.status.success(), "{}", describe(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("run.json")).unwrap()).unwrap();
    let results = &record["results"];
    let timeouts = results["timeouts"].as_u64().expect("results.timeouts");
    assert!(timeouts > 0, "no operation timed out: {results}");
    assert_eq!(
        results["errors_by_kind"]["timeout"].as_u64(),
        Some(timeouts)
    );
    let n = results["latency"]["count"].as_u64().unwrap();

    // Console: the errors row names the timeouts and their limit.
    let plural = if timeouts == 1 { "timeout" } else { "timeouts" };
    assert!(
        row(&stdout, "errors").ends_with(&format!("({timeouts} {plural} at --op-timeout 50ms)")),
        "{stdout}"
    );
    assert!(
        row(&stdout, "p50").ends_with(&tails::n_label(n)),
        "{stdout}"
    );
    for (label, p) in [("p99", 0.99), ("p99.9", 0.999)] {
        let line = row(&stdout, label);
        let withheld = line.contains(tails::WITHHELD);
        assert_eq!(withheld, !tails::supported(n, p), "n={n}: {line}");
        if withheld {
            assert!(line.contains(&format!("needs {}", tails::thousands(tails::min_ops(p)))));
        }
    }
    // A few hundred lock acquisitions a second at most: p99.9 is never supported here.
    assert!(
        n < 10_000 && row(&stdout, "p99.9").contains(tails::WITHHELD),
        "{stdout}"
    );

    // summary.csv: the new column, beside errors.
    let summary = std::fs::read_to_string(out.path().join("summary.csv")).unwrap();
    let mut lines = summary.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let values: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header
        .iter()
        .position(|c| *c == "timeouts")
        .expect("timeouts column");
    assert_eq!(values[at], timeouts.to_string());

    // The report: the timeouts in the figures table, and in the CDF's footer.
    let report = coordbench(&["report", dir]);
    assert!(report.status.success(), "{}", describe(&report));
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    let figures = md.split("## Figures").nth(1).expect("figures section");
    let zab_row = figures
        .lines()
        .find(|l| l.starts_with("| zab"))
        .unwrap_or_else(|| panic!("{figures}"));
    assert!(
        zab_row.contains(&format!("| {} |", tails::thousands(timeouts))),
        "{zab_row}"
    );
    let svg = std::fs::read_to_string(out.path().join("charts/cdf-zab.svg")).unwrap();
    assert!(
        svg.contains(&format!(
            "{} {plural} at the 50 ms limit",
            tails::thousands(timeouts)
        )),
        "the CDF's footer does not count the timeouts"
    );
    assert!(
        svg.contains("not drawn"),
        "the CDF's footer does not say so"
    );

    // report.html: the header block leads, and no link points at a file it does not have.
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    let header = html
        .find("<td>Servers</td>")
        .expect("header block in report.html");
    assert!(
        header < html.find("<h2>Figures</h2>").expect("figures"),
        "header first"
    );
    assert!(
        html.contains("zab (coordbench) 3.8.0-coordbench"),
        "server version"
    );
    for link in html.split("href=\"").skip(1) {
        let target = &link[..link.find('"').unwrap()];
        assert!(
            target.starts_with("https://") || out.path().join(target).is_file(),
            "dead link in report.html: {target}"
        );
    }
}
