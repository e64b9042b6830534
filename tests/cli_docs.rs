//! docs/cli.md is the `--help` of the commands whose options the README points to,
//! generated from the binary: this test fails when it differs from what the binary prints
//! now, and rewrites it with `COORDBENCH_UPDATE_DOCS=1` (so the option reference is never a
//! second, hand-kept copy).

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
         Generated from `coordbench … --help` by `tests/cli_docs.rs`; do not edit by hand. After \
         changing an option, regenerate it with\n\
         `COORDBENCH_UPDATE_DOCS=1 cargo test --test cli_docs`. `coordbench report --help`, \
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
             COORDBENCH_UPDATE_DOCS=1 cargo test --test cli_docs",
            line + 1
        );
    }
}
