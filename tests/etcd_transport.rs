//! The etcd driver's HTTP/2 transport (drivers/src/etcd/transport) against real
//! `coordbench serve raft` members on 127.0.0.1: calls are spread over every endpoint; when
//! the leader is SIGKILLed its endpoint goes down, no call is sent to it and writes go on
//! through the others, and once the member is restarted the transport redials it and
//! sends it calls again; a listener that never speaks HTTP/2 or a closed port fails the
//! connect within its timeout with a one-line error naming the endpoint, and, beside a
//! live member, is left out while the member serves every call.

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{closed_port, start_target, within, TargetKind};
use coordbench_drivers::etcd::transport::{Dialing, EndpointView, Transport};
use etcd_client::Client;
use futures::future::join_all;

/// Bound on a state change the test waits for (a new leader, a redialled member).
const CHANGE_BOUND: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

fn dialing(connect_timeout: Duration) -> Dialing {
    Dialing {
        connect_timeout,
        keepalive_interval: Duration::from_secs(10),
        keepalive_timeout: Duration::from_secs(5),
        tls: None,
    }
}

async fn connect(endpoints: &[String]) -> (Transport, Client) {
    let transport = within(
        Duration::from_secs(10),
        "connecting the transport",
        Transport::connect(endpoints, dialing(Duration::from_secs(2))),
    )
    .await
    .unwrap_or_else(|e| panic!("connecting to {endpoints:?}: {e}"));
    let client = transport.etcd_client().await.expect("etcd client");
    (transport, client)
}

/// `n` puts, 32 at a time, each to its own key; returns how many were acknowledged.
async fn puts(client: &Client, prefix: &str, n: usize) -> usize {
    let mut acked = 0;
    for batch in (0..n).collect::<Vec<_>>().chunks(32) {
        let sent = batch.iter().map(|i| {
            let mut c = client.clone();
            let key = format!("/transport/{prefix}/{i}");
            async move { c.put(key, "v", None).await.is_ok() }
        });
        acked += join_all(sent).await.into_iter().filter(|ok| *ok).count();
    }
    acked
}

fn calls(views: &[EndpointView]) -> Vec<u64> {
    views.iter().map(|v| v.calls).collect()
}

/// Waits until `done` holds for the transport's view, within [`CHANGE_BOUND`].
async fn until(transport: &Transport, what: &str, done: impl Fn(&[EndpointView]) -> bool) {
    let started = Instant::now();
    while !done(&transport.endpoints()) {
        assert!(
            started.elapsed() < CHANGE_BOUND,
            "{what}: not within {CHANGE_BOUND:?}: {:?}",
            transport.endpoints()
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The leader's member index, as member `i` reports it (member ids are 1..N in order).
async fn leader(client: &Client) -> usize {
    let started = Instant::now();
    loop {
        let status = tokio::time::timeout(Duration::from_secs(1), client.clone().status()).await;
        if let Ok(Ok(s)) = status {
            if s.leader() > 0 {
                return usize::try_from(s.leader()).expect("member id") - 1;
            }
        }
        assert!(started.elapsed() < CHANGE_BOUND, "no leader reported");
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balances_calls_over_every_endpoint() {
    let target = start_target(TargetKind::Raft, 3).await;
    let (transport, client) = connect(&target.endpoints()).await;
    assert!(transport.endpoints().iter().all(|v| v.up));
    let before = calls(&transport.endpoints());
    assert_eq!(puts(&client, "balance", 600).await, 600);
    let after = calls(&transport.endpoints());
    let sent: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(sent.iter().sum::<u64>(), 600, "{sent:?}");
    // Equal shares would be 200 each; a member slower for a while takes fewer.
    for (v, n) in transport.endpoints().iter().zip(&sent) {
        assert!(*n >= 100, "{} got {n} of 600 calls: {sent:?}", v.address);
    }
    drop((client, transport));
    target.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_kill_goes_around_the_dead_endpoint_and_redials_it_after_restart() {
    let mut target = start_target(TargetKind::Raft, 3).await;
    let (transport, client) = connect(&target.endpoints()).await;
    let killed = leader(&client).await;
    target.cluster.kill_member(killed).expect("kill the leader");
    until(&transport, "the killed member's endpoint goes down", |v| {
        !v[killed].up && v.iter().filter(|e| e.up).count() == 2
    })
    .await;

    // Writes go on through the survivors once they elect a leader; none goes to the dead.
    let started = Instant::now();
    while puts(&client, "elect", 8).await < 8 {
        assert!(started.elapsed() < CHANGE_BOUND, "writes did not resume");
        tokio::time::sleep(POLL).await;
    }
    let dead_calls = transport.endpoints()[killed].calls;
    assert_eq!(puts(&client, "survivors", 300).await, 300);
    assert_eq!(transport.endpoints()[killed].calls, dead_calls);

    target.cluster.restart_member(killed).expect("restart");
    until(&transport, "the restarted member is redialled", |v| {
        v.iter().all(|e| e.up)
    })
    .await;
    let before = transport.endpoints()[killed].calls;
    assert_eq!(puts(&client, "back", 600).await, 600);
    let back = transport.endpoints()[killed].calls - before;
    assert!(back >= 100, "the restarted member got {back} of 600 calls");
    drop((client, transport));
    target.stop();
}

/// Connecting must fail within the timeout (plus slack) in one line naming the endpoint.
async fn assert_connect_fails(endpoint: String, timeout: Duration) {
    let started = Instant::now();
    let result = within(
        timeout * 4,
        "connect",
        Transport::connect(std::slice::from_ref(&endpoint), dialing(timeout)),
    )
    .await;
    let elapsed = started.elapsed();
    let Err(e) = result else {
        panic!("connecting to {endpoint} succeeded");
    };
    let msg = e.to_string();
    assert!(
        elapsed <= timeout + Duration::from_secs(1),
        "took {elapsed:?}: {msg}"
    );
    assert!(!msg.contains('\n'), "multi-line: {msg:?}");
    assert!(
        msg.contains(endpoint.trim_start_matches("http://")),
        "{msg:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_timeout_and_refusal_fail_in_one_line() {
    // Accepts TCP connections (the kernel completes the handshake) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    assert_connect_fails(format!("127.0.0.1:{port}"), Duration::from_secs(1)).await;
    assert_connect_fails(
        format!("http://127.0.0.1:{}", closed_port()),
        Duration::from_secs(1),
    )
    .await;
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_endpoint_beside_a_live_member_gets_no_calls() {
    let target = start_target(TargetKind::Raft, 1).await;
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_url = format!(
        "http://127.0.0.1:{}",
        silent.local_addr().expect("addr").port()
    );
    let endpoints = vec![silent_url, target.endpoints()[0].clone()];
    let (transport, client) = connect(&endpoints).await;
    assert_eq!(puts(&client, "beside", 200).await, 200);
    let views = transport.endpoints();
    assert!(!views[0].up && views[1].up, "{views:?}");
    assert_eq!(calls(&views), vec![0, 200], "{views:?}");
    drop((client, transport, silent));
    target.stop();
}
