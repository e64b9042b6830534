//! PostgreSQL as a lock target, against a real server coordbench starts (Debian's
//! postgresql; without it the tests are skipped, but fail when `CI` is set): advisory locks
//! and lease rows keep mutual exclusion with strictly increasing tokens, a crashed holder's
//! advisory lock passes on at once (its connection ends) and its lease at the TTL, and
//! `coordbench run` attaches to a server it did not start.

mod common;

use std::sync::Arc;
use std::time::Duration;

use coordbench_drivers::postgres::{PgConfig, PgCoordinator};
use coordbench_drivers::{Coordinator, LockRecipe};
use coordbench_lab::provision::{postgres, Cluster, ClusterSpec, DiskKind};

/// Whether the server binaries are here (under CI they must be).
fn installed() -> bool {
    let found = postgres::resolve_bin_dir().map(|bin| bin.join("postgres"));
    let path = found.map_or("/usr/lib/postgresql/<version>/bin/postgres".into(), |p| {
        p.display().to_string()
    });
    coordbench_sim::tools::installed(&path)
}

async fn start(work: &std::path::Path) -> (Cluster, Arc<dyn Coordinator>) {
    let spec = ClusterSpec::new(1, DiskKind::Tmpfs, Duration::from_secs(2), work.into());
    let cluster = common::within(
        common::START_BOUND,
        "starting postgres",
        postgres::start(&spec),
    )
    .await
    .expect("postgres starts");
    let config = PgConfig {
        endpoints: cluster.endpoints(),
        connect_timeout: common::CONNECT_TIMEOUT,
    };
    let coordinator = PgCoordinator::connect(&config).await.expect("connect");
    (cluster, Arc::new(coordinator))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_recipes_exclude_and_hand_out_increasing_tokens() {
    if !installed() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (cluster, coordinator) = start(work.path()).await;
    for recipe in [LockRecipe::Advisory, LockRecipe::LeaseRow] {
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
async fn a_crashed_holder_frees_an_advisory_lock_at_once_and_a_lease_at_its_ttl() {
    if !installed() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (_cluster, coordinator) = start(work.path()).await;
    let ttl = Duration::from_secs(1);
    let advisory = common::standalone::handover_after_crash(
        Arc::clone(&coordinator),
        LockRecipe::Advisory,
        ttl,
    )
    .await;
    assert!(advisory < ttl / 2, "advisory: {advisory:?}");
    let lease = common::standalone::handover_after_crash(
        Arc::clone(&coordinator),
        LockRecipe::LeaseRow,
        ttl,
    )
    .await;
    assert!(
        lease >= ttl / 2 && lease < ttl + Duration::from_millis(500),
        "lease-row: {lease:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordbench_run_attaches_to_a_server_it_did_not_start() {
    if !installed() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (cluster, _) = start(work.path()).await;
    let out = work.path().join("out");
    let mut args = common::lock_run_args("postgres", &out, &["--recipe", "lease-row"]);
    args.retain(|a| !matches!(a.as_str(), "--disk" | "tmpfs" | "--cluster-size" | "1"));
    args.extend(["--endpoints".to_string(), cluster.endpoints().join(",")]);
    let argv: Vec<&str> = std::iter::once("run")
        .chain(args.iter().map(String::as_str))
        .collect();
    let (status, stderr) = common::run_coordbench(&argv, work.path(), Duration::from_secs(60));
    assert!(status.success(), "{stderr}");
    let row = common::summary_row(&out.join("summary.csv"));
    assert_eq!(row["violations"], "0", "{row:?}");
    assert_eq!(row["recipe"], "lease-row", "{row:?}");
    assert_eq!(common::run_json(&out)["cluster"]["provisioned"], false);
}
