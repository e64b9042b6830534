//! Three Raft members in one process over TCP on 127.0.0.1 with real files (tmpfs when
//! available): elections, proposals on the leader and on followers, follower reads, leader
//! crash and fail-over, restart and catch-up (also through a snapshot), whole-cluster
//! restart. The harness and scenarios are shared with the Zab tests (`common::cluster`).

mod common;

use common::cluster;
use common::Engine;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicates_proposals_and_reads_from_any_member() {
    cluster::replicates_and_reads(Engine::Raft, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_leader_crash_and_restarted_member_catches_up() {
    cluster::survives_leader_crash(Engine::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_cluster_restarts_from_its_logs() {
    cluster::whole_cluster_restarts(Engine::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_sync_stalls_keeps_leading() {
    cluster::slow_leader_sync_keeps_leadership(Engine::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_catches_up_through_a_snapshot_above_the_frame_limit() {
    cluster::catches_up_through_a_snapshot_above_the_frame_limit(Engine::Raft).await;
}
