//! Leases across a change of leader, on three Raft members in one process (clients talk to
//! a follower, which forwards keep-alives to the leader): a lease kept alive survives the
//! change, and one nobody renews is revoked no earlier than its TTL after its grant and,
//! since the leader checkpointed its remaining TTL, not a whole TTL after the change.

mod common;

use std::time::Duration;

use common::{fast_options, watching, within, Kind, TestServer, LEASE_TIMING};
use etcd_client::{EventType, PutOptions};
use tokio::time::Instant;

/// Renewal cadence of the kept lease.
const EVERY: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_across_a_leader_change() {
    let server = TestServer::start(Kind::Raft, fast_options()).await;
    let mut c = server.client().await;
    let kept = c.lease_grant(2, None).await.expect("grant").id();
    let idle = c.lease_grant(6, None).await.expect("grant").id();
    let granted = Instant::now();
    for (key, lease) in [("kept", kept), ("idle", idle)] {
        let leased = PutOptions::new().with_lease(lease);
        c.put(key, "v", Some(leased)).await.expect("put");
    }
    let mut w = watching(&mut c, "idle").await;
    let (mut keeper, mut answers) = c.lease_keep_alive(kept).await.expect("keep-alive");
    let mut change = None;
    let revoked = within("the idle lease's revocation", 20, async {
        loop {
            tokio::select! {
                m = w.message() => {
                    let m = m.expect("watch").expect("event");
                    assert_eq!(m.events()[0].event_type(), EventType::Delete);
                    break granted.elapsed();
                }
                () = tokio::time::sleep(EVERY) => {
                    keeper.keep_alive().await.expect("send");
                    let a = answers.message().await.expect("answer").expect("answer");
                    assert_eq!(a.ttl(), 2, "kept alive (after {:?})", granted.elapsed());
                }
            }
            if change.is_none() && granted.elapsed() >= Duration::from_millis(3_500) {
                let (old, new) = server.isolate_leader().await;
                let left = c.lease_time_to_live(idle, None).await.expect("ttl").ttl();
                eprintln!(
                    "leader {old} -> {new} at {:?}: idle has {left} s",
                    granted.elapsed()
                );
                // Resumed from its checkpoint (at most an interval old) plus the extension,
                // not from its full 6 s.
                assert!((1..=4).contains(&left), "idle lease has {left} s left");
                change = Some(old);
            }
        }
    })
    .await;
    let extension = Duration::from_millis(LEASE_TIMING.promote_extension_ms);
    let interval = Duration::from_millis(LEASE_TIMING.checkpoint_interval_ms);
    // An election (up to 600 ms), the lease tick (100 ms) and commits: 1 s.
    let bound = Duration::from_secs(6) + interval + extension + Duration::from_secs(1);
    eprintln!("idle lease revoked after {revoked:?}");
    assert!(
        revoked >= Duration::from_secs(6) && revoked <= bound,
        "idle lease (6 s) revoked after {revoked:?}, expected 6 s to {bound:?}"
    );
    let kv = c.get("kept", None).await.expect("get");
    assert_eq!(kv.kvs().len(), 1, "the kept lease's key is still there");
    let left = c.lease_time_to_live(kept, None).await.expect("ttl").ttl();
    assert!((0..=2).contains(&left), "kept lease has {left} s left");
    if let Some(old) = change {
        server.reconnect(old);
    }
    server.stop().await;
}
