//! Three Zab members in one process, over the in-process network on memory disks and over
//! TCP on real files: election, proposals on the leader and on followers (outputs are the
//! zxids), follower sync reads, 1000 concurrent proposals, leader crash and fail-over,
//! restart and catch-up through a snapshot, whole-cluster restart. The harness and
//! scenarios are shared with the Raft tests (`common::cluster`).

mod common;

use common::cluster;
use common::Engine;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inproc_replicates_proposals_and_sync_reads() {
    cluster::replicates_and_reads(Engine::Zab, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_replicates_proposals_and_sync_reads() {
    cluster::replicates_and_reads(Engine::Zab, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_leader_crash_and_restarted_member_catches_up() {
    cluster::survives_leader_crash(Engine::Zab).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_cluster_restarts_from_its_logs() {
    cluster::whole_cluster_restarts(Engine::Zab).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_sync_stalls_keeps_leading() {
    cluster::slow_leader_sync_keeps_leadership(Engine::Zab).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_catches_up_through_a_snapshot_above_the_frame_limit() {
    cluster::catches_up_through_a_snapshot_above_the_frame_limit(Engine::Zab).await;
}
