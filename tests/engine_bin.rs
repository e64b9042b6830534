//! `coordbench run --engine-bin PATH`: the built-in engines' members start from another
//! coordbench binary (here the built one, through a symlink elsewhere, so the run can only
//! have found it through the option), and run.json records it; a path that is not an
//! executable is refused before anything starts, exit 2, in one line naming it.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("coordbench runs")
}

#[path = "common/output.rs"]
mod output;
use output::describe;

#[test]
fn raft_members_start_from_the_engine_bin_and_run_json_records_it() {
    let tmp = TempDir::new().unwrap();
    let other = tmp.path().join("v2").join("coordbench");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(BIN, &other).unwrap();
    let other = other.to_str().unwrap();
    let out = tmp.path().join("run");
    let o = run(&[
        "--target",
        "raft",
        "--cluster-size",
        "1",
        "--engine-bin",
        other,
        "--workload",
        "kv-put",
        "--duration",
        "1s",
        "--disk",
        "tmpfs",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", describe(&o));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["complete"], true, "{record}");
    assert_eq!(record["config"]["engine_bin"], other);
    assert_eq!(record["cluster"]["binary"], other);
    assert!(record["results"]["ops"].as_u64().unwrap() > 0, "{record}");
}

#[test]
fn an_engine_bin_that_is_not_an_executable_exits_2_in_one_line_naming_it() {
    let tmp = TempDir::new().unwrap();
    let not_executable = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    for (target, path) in [("raft", "/nonexistent"), ("zab", not_executable)] {
        let out = tmp.path().join(target);
        let o = run(&[
            "--target",
            target,
            "--engine-bin",
            path,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(stderr.lines().count(), 1, "{}", describe(&o));
        assert!(
            stderr.starts_with("error: ") && stderr.contains(path),
            "{stderr}"
        );
        assert!(
            !Path::new(&out).exists(),
            "nothing starts: {}",
            out.display()
        );
    }
}
