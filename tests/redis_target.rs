//! Redis as a lock target, against real `redis-server` instances coordbench starts
//! (Debian's redis-server; without it the tests are skipped, but fail when `CI` is set):
//! every recipe keeps mutual exclusion with strictly increasing tokens, a crashed holder's
//! lock passes on within its TTL, and `coordbench run` attaches to instances it did not
//! start.

mod common;

use std::sync::Arc;
use std::time::Duration;

use coordbench_drivers::redis::{RedisConfig, RedisCoordinator};
use coordbench_drivers::{Coordinator, LockRecipe};
use coordbench_lab::provision::{redis, Cluster, ClusterSpec, DiskKind};

const REDIS: &str = "/usr/bin/redis-server";

async fn start(size: usize, work: &std::path::Path) -> (Cluster, Arc<dyn Coordinator>) {
    let spec = ClusterSpec::new(size, DiskKind::Tmpfs, Duration::from_secs(2), work.into());
    let cluster = common::within(common::START_BOUND, "starting redis", redis::start(&spec))
        .await
        .expect("redis instances start");
    let config = RedisConfig {
        endpoints: cluster.endpoints(),
        connect_timeout: common::CONNECT_TIMEOUT,
    };
    let coordinator = RedisCoordinator::connect(&config).await.expect("connect");
    (cluster, Arc::new(coordinator))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recipe_excludes_and_hands_out_increasing_tokens() {
    if !coordbench_sim::tools::installed(REDIS) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (cluster, coordinator) = start(3, work.path()).await;
    for recipe in [
        LockRecipe::SetNx,
        LockRecipe::SetNxNotify,
        LockRecipe::Redlock,
    ] {
        let seen = common::standalone::no_overlaps_and_increasing_tokens(
            Arc::clone(&coordinator),
            recipe,
            4,
            15,
        )
        .await;
        assert_eq!(seen, 60, "{recipe:?}");
    }
    let pids: Vec<u32> = cluster.member_pids().into_iter().map(|(_, p)| p).collect();
    drop(cluster);
    common::assert_gone(&pids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holders_lock_passes_on_at_its_ttl() {
    if !coordbench_sim::tools::installed(REDIS) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (_cluster, coordinator) = start(3, work.path()).await;
    let ttl = Duration::from_secs(1);
    for recipe in [LockRecipe::SetNx, LockRecipe::Redlock] {
        let waited =
            common::standalone::handover_after_crash(Arc::clone(&coordinator), recipe, ttl).await;
        // Nobody releases it: the key expires at the TTL (within the poll backoff).
        assert!(
            waited >= ttl / 2 && waited < ttl + Duration::from_millis(500),
            "{recipe:?}: {waited:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordbench_run_attaches_to_instances_it_did_not_start() {
    if !coordbench_sim::tools::installed(REDIS) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (cluster, _) = start(3, work.path()).await;
    let out = work.path().join("out");
    let endpoints = cluster.endpoints().join(",");
    let mut args = common::lock_run_args("redis", &out, &["--recipe", "redlock"]);
    // Attached: no cluster size, disk or start of our own.
    args.retain(|a| !matches!(a.as_str(), "--disk" | "tmpfs" | "--cluster-size" | "1"));
    args.extend(["--endpoints".to_string(), endpoints]);
    let argv: Vec<&str> = std::iter::once("run")
        .chain(args.iter().map(String::as_str))
        .collect();
    let (status, stderr) = common::run_coordbench(&argv, work.path(), Duration::from_secs(60));
    assert!(status.success(), "{stderr}");
    let row = common::summary_row(&out.join("summary.csv"));
    assert_eq!(row["violations"], "0", "{row:?}");
    assert_eq!(row["recipe"], "redlock", "{row:?}");
    let run = common::run_json(&out);
    assert_eq!(run["cluster"]["provisioned"], false, "{run}");
}

#[test]
fn instance_kills_and_pauses_keep_redlock_safe_and_heal() {
    if !coordbench_sim::tools::installed(REDIS) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let mut args = common::lock_run_args("redis", &out, &["--recipe", "redlock", "--ttl", "1s"]);
    args.retain(|a| !matches!(a.as_str(), "--cluster-size" | "1"));
    let at = args
        .iter()
        .position(|a| a == "--duration")
        .expect("--duration");
    args[at + 1] = "6s".into();
    args.extend(
        [
            "--cluster-size",
            "3",
            "--fault",
            "pause-random,kill-random",
            "--fault-every",
            "2s",
            "--fault-duration",
            "500ms",
        ]
        .map(String::from),
    );
    let argv: Vec<&str> = std::iter::once("run")
        .chain(args.iter().map(String::as_str))
        .collect();
    let (status, stderr) = common::run_coordbench(&argv, work.path(), Duration::from_secs(90));
    assert!(status.success(), "{stderr}");
    let row = common::summary_row(&out.join("summary.csv"));
    assert_eq!(row["violations"], "0", "{row:?}");
    let faults = &common::run_json(&out)["faults"];
    assert!(faults["faults"].as_u64() >= Some(2), "{faults}");
    assert_eq!(faults["unrecovered"], 0, "{faults}");
}
