//! The built-in Zab engine as a target: `coordbench run --target zab` starts three
//! `coordbench serve zab` processes (readiness by ruok/srvr, like a real ensemble) and runs
//! the lock workload through the ZooKeeper driver with both recipes, with no violation, and
//! mntr scraped from every member.

use std::time::{Duration, Instant};

fn cli_lock_run(recipe: Option<&str>) {
    let out = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_coordbench"));
    cmd.args(["run", "--target", "zab", "--cluster-size", "3"])
        .args(["--workload", "lock", "--clients", "16", "--duration", "5s"])
        .args(["--disk", "tmpfs", "--quiet", "--out"])
        .arg(out.path());
    if let Some(r) = recipe {
        cmd.args(["--recipe", r]);
    }
    let run = cmd.output().expect("run coordbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "coordbench exited with {}: {stderr}",
        run.status
    );
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t.elapsed()
    );
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("run.json")).expect("run.json"),
    )
    .expect("json");
    assert_eq!(run["complete"], true);
    assert_eq!(run["config"]["recipe"], recipe.unwrap_or("zk-recipe"));
    assert_eq!(run["results"]["violations"], 0, "{}", run["results"]);
    assert!(
        run["results"]["ops"].as_u64().is_some_and(|n| n > 0),
        "{}",
        run["results"]
    );
    let delta = run["server_counters"]["delta"]
        .as_object()
        .expect("server counters scraped by mntr");
    assert_eq!(delta.len(), 3, "one entry per member: {delta:?}");
}

#[test]
fn cli_lock_run_on_three_members_with_the_zk_recipe() {
    cli_lock_run(None);
}

#[test]
fn cli_lock_run_on_three_members_with_the_naive_recipe() {
    cli_lock_run(Some("naive"));
}
