//! kv-put --create-keys (the ZooKeeper paper's Table 2 creates) through the `coordbench`
//! binary against running zab and raft clusters (real `coordbench serve` processes on
//! 127.0.0.1, attached with --endpoints so the keys can be counted afterwards): every
//! acknowledged create left a key of its own, and nothing was preloaded.

mod common;

use std::path::Path;
use std::time::Duration;

use common::TargetKind;

/// One short run, with room for a loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(60);
const CLIENTS: u64 = 4;

/// Runs `kv-put --create-keys` against `endpoints`; returns (ops, errors) of its window.
fn create_run(target: &str, endpoints: &[String], out: &Path) -> (u64, u64) {
    let endpoints = endpoints.join(",");
    let clients = CLIENTS.to_string();
    let argv = [
        "run",
        "--target",
        target,
        "--endpoints",
        &endpoints,
        "--workload",
        "kv-put",
        "--create-keys",
        "--workers",
        &clients,
        "--warmup",
        "0s",
        "--duration",
        "2s",
        "--quiet",
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    let (status, stderr) = common::run_coordbench(&argv, out.parent().expect("parent"), RUN_BOUND);
    assert!(status.success(), "{target}: {status:?}\n{stderr}");
    let run = common::run_json(out);
    assert_eq!(run["config"]["create_keys"], true, "{run}");
    let row = common::summary_row(&out.join("summary.csv"));
    assert_eq!(row["create_keys"], "true");
    let num = |c: &str| {
        row[c]
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{c}: {row:?}"))
    };
    (num("ops"), num("errors"))
}

/// Every acknowledged create is a key; at most one create per client was still in flight
/// when the window closed (created, not counted).
fn assert_keys_match(target: &str, keys: u64, ops: u64, errors: u64) {
    assert_eq!(errors, 0, "{target}");
    assert!(ops > 0, "{target}: no creates");
    assert!(
        (ops..=ops + CLIENTS).contains(&keys),
        "{target}: {keys} keys for {ops} acknowledged creates"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zab_creates_a_node_per_acknowledged_write() {
    let target = common::start_target(TargetKind::Zab, 3).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (ops, errors) = create_run("zab", &target.endpoints(), &dir.path().join("run"));
    let zk = zookeeper_client::Client::connector()
        .connect(&target.endpoints().join(","))
        .await
        .expect("connect");
    let created = zk
        .list_children("/coordbench/kv/new")
        .await
        .expect("children");
    assert!(
        zk.check_stat("/coordbench/kv/00000000")
            .await
            .expect("stat")
            .is_none(),
        "nothing preloaded"
    );
    assert_keys_match("zab", created.len() as u64, ops, errors);
    drop(zk);
    target.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_creates_a_key_per_acknowledged_write() {
    let target = common::start_target(TargetKind::Raft, 3).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (ops, errors) = create_run("raft", &target.endpoints(), &dir.path().join("run"));
    let mut etcd = etcd_client::Client::connect(target.endpoints(), None)
        .await
        .expect("connect");
    let count = |prefix: &'static str| {
        let options = etcd_client::GetOptions::new()
            .with_prefix()
            .with_count_only();
        (prefix, options)
    };
    let (prefix, options) = count("/coordbench/kv/new/");
    let created = etcd
        .get(prefix, Some(options))
        .await
        .expect("count")
        .count();
    let (prefix, options) = count("/coordbench/kv/0");
    let preloaded = etcd
        .get(prefix, Some(options))
        .await
        .expect("count")
        .count();
    assert_eq!(preloaded, 0, "nothing preloaded");
    assert_keys_match("raft", created as u64, ops, errors);
    target.stop();
}
