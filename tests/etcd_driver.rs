//! The etcd driver against real etcd (Debian's etcd-server, /usr/bin/etcd) on 127.0.0.1:
//! key-value reads and writes from every member, the kv-put and lock workloads through the
//! runner on 1 and 3 members, mutual exclusion and fencing tokens of both lock recipes
//! (etcd-mutex and naive), lock handover when a holder's lease expires, the herd effect
//! seen in the per-client notification counters, leader election, service discovery and
//! value watches (tests/common/recipes.rs), and a clear, bounded error for an
//! unreachable endpoint. Every test starts its own cluster and checks that no etcd process
//! is left behind. The bodies live in tests/common/conformance.rs so other targets can run
//! them too.

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::recipes::{self, Delivery};
use common::{closed_port, conformance, start_target, within, TargetKind};
use coordbench_drivers::etcd::{EtcdConfig, EtcdCoordinator};
use coordbench_drivers::DriverError;

const ETCD: TargetKind = TargetKind::Etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_on_one_member() {
    conformance::kv_round_trip_and_put_workload(ETCD, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_on_three_members() {
    conformance::kv_round_trip_and_put_workload(ETCD, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_workload_is_safe_on_one_member() {
    conformance::lock_workload_is_safe(ETCD, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_workload_is_safe_on_three_members() {
    conformance::lock_workload_is_safe(ETCD, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_excludes_until_release() {
    conformance::lock_excludes_until_release(ETCD, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_holder_hands_over_on_lease_expiry() {
    conformance::abandoned_holder_hands_over_on_expiry(ETCD, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_holders_keep_their_sessions_and_a_frozen_one_expires() {
    conformance::idle_holders_keep_their_sessions_and_a_frozen_one_expires(ETCD, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_of_many_sessions_share_their_connection() {
    conformance::watchers_of_many_sessions_share_their_connection(ETCD, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_notifies_herd_only_with_naive() {
    conformance::release_notifies_herd_only_with_naive(ETCD, 1).await;
}

/// Leader election (both recipes, herd counters), service discovery with lease expiry, a
/// value watch that sees every version, and 500 value watches over 4 sessions
/// (tests/common/recipes.rs), all on one single-member cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_discovery_and_value_watches() {
    let target = start_target(ETCD, 1).await;
    let slack = Duration::from_millis(1500);
    let c = target.coordinator.clone();
    recipes::all(c, ETCD.min_ttl(), slack, Delivery::EveryVersion).await;
    target.stop();
}

/// Connecting must fail with `Unreachable` within the connect timeout (plus slack), with a
/// one-line message that names the endpoint.
async fn assert_unreachable(endpoint: String) {
    let config = EtcdConfig {
        endpoints: vec![endpoint.clone()],
        conns: 4,
        connect_timeout: Duration::from_secs(5),
        security: Default::default(),
    };
    let started = Instant::now();
    let result = within(
        Duration::from_secs(30),
        "connect",
        EtcdCoordinator::connect(&config),
    )
    .await;
    let elapsed = started.elapsed();
    let err = match result {
        Ok(_) => panic!("connecting to {endpoint} succeeded"),
        Err(e) => e,
    };
    assert!(matches!(err, DriverError::Unreachable { .. }), "{err:?}");
    assert_eq!(err.kind(), "unreachable");
    assert!(
        elapsed <= Duration::from_secs(6),
        "took {elapsed:?} to report {err}"
    );
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "multi-line: {msg:?}");
    assert!(msg.contains(&endpoint), "{msg:?} does not name {endpoint}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_port_is_unreachable() {
    assert_unreachable(format!("127.0.0.1:{}", closed_port())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_listener_is_unreachable_within_the_timeout() {
    // Accepts TCP connections (the kernel completes the handshake) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    assert_unreachable(format!("127.0.0.1:{port}")).await;
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_replays_history_with_prev_kv() {
    conformance::watch_replays_history_with_prev_kv(ETCD, 3).await;
}
