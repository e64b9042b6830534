//! What is written outside the Rust code, held to the code: docs/cli.md is the `--help` of
//! the commands whose options the README points to, generated from the binary (the test
//! fails when it differs from what the binary prints now, and rewrites it with
//! `COORDBENCH_UPDATE_DOCS=1`, so the option reference is never a second, hand-kept copy);
//! the notebooks' list of sweep axes and their target colours are the tool's.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");

/// The commands documented, in order.
const COMMANDS: &[&[&str]] = &[
    &[],
    &["run"],
    &["capacity"],
    &["sweep"],
    &["gate"],
    &["merge"],
    &["install"],
    &["serve", "raft"],
    &["serve", "zab"],
];

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--help")
        .env_remove("COLUMNS")
        .output()
        .expect("coordbench runs");
    assert!(out.status.success(), "coordbench {args:?} --help failed");
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

/// The whole of docs/cli.md as the binary describes itself.
fn generated() -> String {
    let mut doc = String::from(
        "# Command-line reference\n\n\
         Generated from `coordbench … --help` by `tests/in_step.rs`; do not edit by hand. After \
         changing an option, regenerate it with\n\
         `COORDBENCH_UPDATE_DOCS=1 cargo test --test in_step`. `coordbench report --help`, \
         `compare --help` and `simulate --help` describe the analysis commands.\n\n",
    );
    for args in COMMANDS {
        let name = if args.is_empty() {
            "coordbench".to_string()
        } else {
            format!("coordbench {}", args.join(" "))
        };
        doc.push_str(&format!(
            "## `{name}`\n\n```text\n{}```\n\n",
            help(args).trim_end().to_string() + "\n"
        ));
    }
    doc.trim_end().to_string() + "\n"
}

#[test]
fn docs_cli_md_is_the_binarys_own_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let now = generated();
    if std::env::var_os("COORDBENCH_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &now).expect("write docs/cli.md");
        return;
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    if written != now {
        let line = written
            .lines()
            .zip(now.lines())
            .position(|(a, b)| a != b)
            .map_or(written.lines().count().min(now.lines().count()), |i| i);
        panic!(
            "docs/cli.md differs from the binary's --help from line {}: regenerate it with \
             COORDBENCH_UPDATE_DOCS=1 cargo test --test in_step",
            line + 1
        );
    }
}

/// The double-quoted strings of `notebooks/resultdir.py` between `start` and the next `end`.
fn python_strings(start: &str, end: char) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("notebooks/resultdir.py");
    let text = std::fs::read_to_string(&path).expect("notebooks/resultdir.py");
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start} in resultdir.py"));
    let body = &text[from + start.len()..];
    let body = &body[..body.find(end).expect("end of the literal")];
    body.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_notebooks_know_every_sweep_axis_in_the_tools_order() {
    let tool: Vec<&str> = coordbench_results::axis::Axis::ALL
        .iter()
        .map(|a| a.name())
        .collect();
    assert_eq!(python_strings("\nAXES = [", ']'), tool);
}

#[test]
fn the_notebooks_colour_every_target_as_the_report_does() {
    use clap::ValueEnum;
    let pairs = python_strings("\nTARGET_COLOURS = {", '}');
    let colours: std::collections::BTreeMap<&str, &str> = pairs
        .chunks(2)
        .map(|p| (p[0].as_str(), p[1].as_str()))
        .collect();
    for target in coordbench_results::kinds::TargetKind::value_variants() {
        let name = coordbench_results::kinds::value_name(*target);
        let c = coordbench_analysis::report::chart::target_color(&name);
        let want = format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2);
        assert_eq!(
            colours.get(name.as_str()).copied(),
            Some(want.as_str()),
            "{name}"
        );
    }
}
