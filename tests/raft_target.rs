//! The built-in Raft engine as a target: N `coordbench serve raft` processes on 127.0.0.1
//! (started by `provision::raft::start`, data on tmpfs) pass the very test bodies real etcd
//! passes in tests/etcd_driver.rs, through the same etcd driver: key-value reads and writes
//! from every member, the kv-put and lock workloads (both recipes) through the runner on 1
//! and 3 members, mutual exclusion and fencing tokens, handover when a holder's lease
//! expires, the herd effect, watches from a past revision with previous values, and the
//! election, discovery and value-watch bodies of tests/common/recipes.rs. Every
//! test starts its own cluster and checks that no member process is left behind.

mod common;

use std::time::Duration;

use common::recipes::{self, Delivery};
use common::{conformance, start_target, TargetKind};

const RAFT: TargetKind = TargetKind::Raft;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_on_one_member() {
    conformance::kv_round_trip_and_put_workload(RAFT, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_on_three_members() {
    conformance::kv_round_trip_and_put_workload(RAFT, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_workload_is_safe_on_one_member() {
    conformance::lock_workload_is_safe(RAFT, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_workload_is_safe_on_three_members() {
    conformance::lock_workload_is_safe(RAFT, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_excludes_until_release() {
    conformance::lock_excludes_until_release(RAFT, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_holder_hands_over_on_lease_expiry() {
    conformance::abandoned_holder_hands_over_on_expiry(RAFT, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_holders_keep_their_sessions_and_a_frozen_one_expires() {
    conformance::idle_holders_keep_their_sessions_and_a_frozen_one_expires(RAFT, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_of_many_sessions_share_their_connection() {
    conformance::watchers_of_many_sessions_share_their_connection(RAFT, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_notifies_herd_only_with_naive() {
    conformance::release_notifies_herd_only_with_naive(RAFT, 3).await;
}

/// Leader election (both recipes, herd counters), service discovery with lease expiry, a
/// value watch that sees every version, and 500 value watches over 4 sessions
/// (tests/common/recipes.rs), all on one 3-member cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_discovery_and_value_watches() {
    let target = start_target(RAFT, 3).await;
    let slack = Duration::from_millis(1500);
    let c = target.coordinator.clone();
    recipes::all(c, RAFT.min_ttl(), slack, Delivery::EveryVersion).await;
    target.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_replays_history_with_prev_kv_on_one_member() {
    conformance::watch_replays_history_with_prev_kv(RAFT, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_replays_history_with_prev_kv_on_three_members() {
    conformance::watch_replays_history_with_prev_kv(RAFT, 3).await;
}

/// run.json's target settings (the cluster info) name the members' snapshot cadence: the
/// serve default of --snapshot-every and the log fraction of the cadence rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_info_records_the_snapshot_cadence() {
    let target = start_target(RAFT, 1).await;
    let settings = &target.cluster.info().settings;
    let setting = |key: &str| {
        settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        setting("snapshot-every-entries"),
        Some(coordbench_serve::RAFT_SNAPSHOT_EVERY.to_string())
    );
    assert_eq!(
        setting("snapshot-min-log-fraction"),
        Some(format!("1/{}", coordbench_node::SNAPSHOT_LOG_FRACTION))
    );
    target.stop();
}
