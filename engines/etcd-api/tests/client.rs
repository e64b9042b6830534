//! The etcd API driven by etcd-client (the crate coordbench's etcd driver uses) against a
//! real gRPC server on 127.0.0.1 over a one-member in-process replicator.

#[macro_use]
mod common;

use std::time::Duration;

use common::{fast_options, watching, within, Kind, TestServer};
use coordbench_etcd_api::ServeOptions;
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, Error, EventType, GetOptions, LockOptions,
    PutOptions, ResignOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use tonic::Code;

fn status(e: Error) -> (Code, String) {
    match e {
        Error::GRpcStatus(s) => (s.code(), s.message().to_string()),
        other => panic!("expected a gRPC status, got {other:?}"),
    }
}

async fn value(c: &mut Client, key: &str) -> Option<String> {
    let r = c.get(key, None).await.expect("get");
    r.kvs()
        .first()
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
}

async fn put_get_range_delete(kind: Kind) {
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let mut c = server.client().await;
    for (k, v) in [("p/a", "1"), ("p/b", "2"), ("p/c", "3"), ("q", "x")] {
        c.put(k, v, None).await.expect("put");
    }
    let r = c
        .get("p/", Some(GetOptions::new().with_prefix().with_limit(2)))
        .await
        .expect("range");
    let keys: Vec<&[u8]> = r.kvs().iter().map(|kv| kv.key()).collect();
    assert_eq!(keys, vec![b"p/a".as_slice(), b"p/b"]);
    assert!(r.more());
    assert_eq!(r.count(), 3);
    let header = r.header().expect("header");
    assert_eq!(header.revision(), 5);
    assert_eq!(header.member_id(), server.member_id());
    assert_ne!(header.cluster_id(), 0);
    assert!(header.raft_term() >= 1);

    let r = c
        .put("p/a", "10", Some(PutOptions::new().with_prev_key()))
        .await
        .expect("put");
    assert_eq!(r.prev_key().map(|kv| kv.value()), Some(b"1".as_slice()));
    let r = c
        .get("p/a", Some(GetOptions::new().with_serializable()))
        .await
        .expect("get");
    assert_eq!((r.kvs()[0].version(), r.kvs()[0].create_revision()), (2, 2));
    let old = c
        .get("p/a", Some(GetOptions::new().with_revision(2)))
        .await
        .expect("old");
    assert_eq!(old.kvs()[0].value(), b"1");

    let r = c
        .delete("p/b", Some(DeleteOptions::new().with_prev_key()))
        .await
        .expect("delete");
    assert_eq!(r.deleted(), 1);
    assert_eq!(r.prev_kvs()[0].value(), b"2");
    let r = c
        .delete("p/", Some(DeleteOptions::new().with_prefix()))
        .await
        .expect("delete prefix");
    assert_eq!(r.deleted(), 2);
    assert_eq!(value(&mut c, "q").await.as_deref(), Some("x"));
    assert_eq!(value(&mut c, "p/a").await, None);

    let (code, msg) = status(c.put("", "v", None).await.expect_err("empty key"));
    assert_eq!(
        (code, msg.as_str()),
        (Code::InvalidArgument, "etcdserver: key is not provided")
    );
    let big = vec![b'x'; 1600 * 1024];
    let (code, msg) = status(c.put("big", big, None).await.expect_err("too large"));
    assert_eq!(
        (code, msg.as_str()),
        (Code::InvalidArgument, "etcdserver: request is too large")
    );
    server.stop().await;
}

async fn txn_with_compares(kind: Kind) {
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let mut c = server.client().await;
    c.put("k", "v1", None).await.expect("put");
    let txn = Txn::new()
        .when([
            Compare::value("k", CompareOp::Equal, "v1"),
            Compare::version("k", CompareOp::Equal, 1),
        ])
        .and_then([TxnOp::put("k", "v2", None), TxnOp::put("other", "o", None)])
        .or_else([TxnOp::get("k", None)]);
    let r = c.txn(txn.clone()).await.expect("txn");
    assert!(r.succeeded());
    assert_eq!(
        r.header().expect("header").revision(),
        3,
        "a txn is one revision"
    );
    let r = c.txn(txn).await.expect("txn");
    assert!(!r.succeeded());
    match &r.op_responses()[..] {
        [TxnOpResponse::Get(g)] => assert_eq!(g.kvs()[0].value(), b"v2"),
        other => panic!("unexpected responses {other:?}"),
    }
    // Read-only txn (served without the log); mod revision compare.
    let r = c
        .txn(
            Txn::new()
                .when([Compare::mod_revision("k", CompareOp::Greater, 2)])
                .and_then([TxnOp::get("other", None)]),
        )
        .await
        .expect("read-only txn");
    assert!(r.succeeded());
    assert_eq!(r.header().expect("header").revision(), 3);
    let dup = Txn::new().and_then([TxnOp::put("d", "1", None), TxnOp::put("d", "2", None)]);
    let (code, msg) = status(c.txn(dup).await.expect_err("duplicate key"));
    assert_eq!(
        (code, msg.as_str()),
        (
            Code::InvalidArgument,
            "etcdserver: duplicate key given in txn request"
        )
    );
    server.stop().await;
}

async fn watch_replay_live_prev_kv_cancel(kind: Kind) {
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let mut c = server.client().await;
    let first = c
        .put("w", "1", None)
        .await
        .expect("put")
        .header()
        .expect("h")
        .revision();
    c.put("w", "2", None).await.expect("put");
    c.put("unrelated", "x", None).await.expect("put");
    let opts = WatchOptions::new()
        .with_start_revision(first)
        .with_prev_key();
    let mut stream = within("watch", 5, c.watch("w", Some(opts)))
        .await
        .expect("watch");
    let created = within("created", 5, stream.message())
        .await
        .expect("msg")
        .expect("created");
    assert!(created.created());
    let id = created.watch_id();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let m = within("replay", 5, stream.message())
            .await
            .expect("msg")
            .expect("event");
        for ev in m.events() {
            let kv = ev.kv().expect("kv");
            seen.push((kv.mod_revision(), ev.prev_kv().map(|p| p.value().to_vec())));
        }
    }
    assert_eq!(seen, vec![(first, None), (first + 1, Some(b"1".to_vec()))]);
    c.delete("w", None).await.expect("delete");
    let m = within("live delete", 5, stream.message())
        .await
        .expect("msg")
        .expect("event");
    assert_eq!(m.events()[0].event_type(), EventType::Delete);
    assert_eq!(
        m.events()[0].prev_kv().map(|p| p.value()),
        Some(b"2".as_slice())
    );

    // A second watcher on the same stream, with a client-chosen id and a prefix.
    stream
        .watch(
            "pre/",
            Some(WatchOptions::new().with_prefix().with_watch_id(42)),
        )
        .await
        .expect("second watch");
    let m = within("created 42", 5, stream.message())
        .await
        .expect("msg")
        .expect("created");
    assert!(m.created() && m.watch_id() == 42);
    c.put("pre/x", "1", None).await.expect("put");
    let m = within("event 42", 5, stream.message())
        .await
        .expect("msg")
        .expect("event");
    assert_eq!(m.watch_id(), 42);
    stream.cancel(id).await.expect("cancel");
    let m = within("canceled", 5, stream.message())
        .await
        .expect("msg")
        .expect("canceled");
    assert!(m.canceled() && m.watch_id() == id);
    stream.request_progress().await.expect("progress");
    let m = within("progress", 5, stream.message())
        .await
        .expect("msg")
        .expect("progress");
    assert_eq!(m.watch_id(), -1);
    assert_eq!(m.header().expect("h").revision(), first + 4);
    // Graceful shutdown with the stream still open.
    within("shutdown", 10, server.stop()).await;
}

async fn compaction_errors(kind: Kind) {
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let mut c = server.client().await;
    for i in 0..5 {
        c.put("c", i.to_string(), None).await.expect("put");
    }
    c.compact(4, None).await.expect("compact");
    let (code, msg) = status(
        c.get("c", Some(GetOptions::new().with_revision(2)))
            .await
            .expect_err("compacted"),
    );
    assert_eq!(
        (code, msg.as_str()),
        (
            Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted"
        )
    );
    let (code, _) = status(
        c.get("c", Some(GetOptions::new().with_revision(100)))
            .await
            .expect_err("future"),
    );
    assert_eq!(code, Code::OutOfRange);
    assert_eq!(
        c.get("c", Some(GetOptions::new().with_revision(4)))
            .await
            .expect("ok")
            .kvs()[0]
            .value(),
        b"2"
    );
    let mut w = c
        .watch("c", Some(WatchOptions::new().with_start_revision(2)))
        .await
        .expect("watch");
    let created = within("created", 5, w.message())
        .await
        .expect("msg")
        .expect("created");
    assert!(created.created());
    let canceled = within("canceled", 5, w.message())
        .await
        .expect("msg")
        .expect("canceled");
    assert!(canceled.canceled());
    assert_eq!(canceled.compact_revision(), 4);
    server.stop().await;
}

async fn lease_grant_keep_alive_revoke(kind: Kind) {
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let mut c = server.client().await;
    let short = c.lease_grant(1, None).await.expect("grant");
    assert_eq!(short.ttl(), 2, "raised to the 2 s minimum");
    let lease = c.lease_grant(30, None).await.expect("grant");
    assert_eq!(lease.ttl(), 30);
    let id = lease.id();
    assert_ne!(id, 0);
    c.put("leased", "v", Some(PutOptions::new().with_lease(id)))
        .await
        .expect("put");
    let ttl = c
        .lease_time_to_live(
            id,
            Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
        )
        .await
        .expect("ttl");
    assert_eq!(ttl.granted_ttl(), 30);
    assert!(ttl.ttl() > 25 && ttl.ttl() <= 30);
    assert_eq!(ttl.keys(), [b"leased".to_vec()]);
    let (mut keeper, mut answers) = c.lease_keep_alive(id).await.expect("keep-alive");
    keeper.keep_alive().await.expect("send");
    let a = within("keep-alive answer", 5, answers.message())
        .await
        .expect("msg")
        .expect("answer");
    assert_eq!((a.id(), a.ttl()), (id, 30));
    let ids: Vec<i64> = c
        .leases()
        .await
        .expect("leases")
        .leases()
        .iter()
        .map(|l| l.id())
        .collect();
    assert!(ids.contains(&id) && ids.contains(&short.id()));
    c.lease_revoke(id).await.expect("revoke");
    assert_eq!(
        value(&mut c, "leased").await,
        None,
        "revoke deletes attached keys"
    );
    keeper.keep_alive().await.expect("send");
    let a = within("keep-alive answer", 5, answers.message())
        .await
        .expect("msg")
        .expect("answer");
    assert_eq!(a.ttl(), 0, "a revoked lease answers TTL 0");
    assert_eq!(c.lease_time_to_live(id, None).await.expect("ttl").ttl(), -1);
    let (code, msg) = status(c.lease_revoke(id).await.expect_err("gone"));
    assert_eq!(
        (code, msg.as_str()),
        (Code::NotFound, "etcdserver: requested lease not found")
    );
    let (code, _) = status(
        c.put("k", "v", Some(PutOptions::new().with_lease(id)))
            .await
            .expect_err("no lease"),
    );
    assert_eq!(code, Code::NotFound);
    server.stop().await;
}

async fn lease_expires_on_the_leader_clock(kind: Kind) {
    let server = TestServer::start(kind, fast_options()).await;
    let mut c = server.client().await;
    let kept = c.lease_grant(1, None).await.expect("grant").id();
    let expiring = c.lease_grant(1, None).await.expect("grant").id();
    c.put("kept", "v", Some(PutOptions::new().with_lease(kept)))
        .await
        .expect("put");
    c.put("gone", "v", Some(PutOptions::new().with_lease(expiring)))
        .await
        .expect("put");
    let mut w = watching(&mut c, "gone").await;
    let (mut keeper, mut answers) = c.lease_keep_alive(kept).await.expect("keep-alive");
    let started = tokio::time::Instant::now();
    let delete = within("expiry", 10, async {
        loop {
            tokio::select! {
                m = w.message() => break m.expect("msg").expect("event"),
                () = tokio::time::sleep(Duration::from_millis(300)) => {
                    keeper.keep_alive().await.expect("send");
                    answers.message().await.expect("answer");
                }
            }
        }
    })
    .await;
    assert_eq!(delete.events()[0].event_type(), EventType::Delete);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "expired too early: {waited:?}"
    );
    assert_eq!(value(&mut c, "gone").await, None);
    assert_eq!(
        value(&mut c, "kept").await.as_deref(),
        Some("v"),
        "kept alive"
    );
    assert_eq!(
        c.lease_time_to_live(expiring, None)
            .await
            .expect("ttl")
            .ttl(),
        -1
    );
    server.stop().await;
}

async fn lock_contention_between_two_clients(kind: Kind) {
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let mut a = server.client().await;
    let mut b = server.client().await;
    let la = a.lease_grant(30, None).await.expect("grant").id();
    let lb = b.lease_grant(30, None).await.expect("grant").id();
    let held = a
        .lock("mylock", Some(LockOptions::new().with_lease(la)))
        .await
        .expect("lock");
    assert_eq!(held.key(), format!("mylock/{la:x}").as_bytes());
    let waiter = tokio::spawn(async move {
        let r = b
            .lock("mylock", Some(LockOptions::new().with_lease(lb)))
            .await
            .expect("lock b");
        (r.key().to_vec(), b)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "b must wait while a holds the lock");
    a.unlock(held.key()).await.expect("unlock");
    let (key_b, mut b) = within("b acquires", 5, waiter).await.expect("task");
    assert_eq!(key_b, format!("mylock/{lb:x}").into_bytes());
    // A third contender whose lease is revoked while it waits gets the session error.
    let lc = a.lease_grant(30, None).await.expect("grant").id();
    let mut c = server.client().await;
    let third = tokio::spawn(async move {
        c.lock("mylock", Some(LockOptions::new().with_lease(lc)))
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.lease_revoke(lc).await.expect("revoke");
    b.unlock(key_b).await.expect("unlock b");
    let err = within("third fails", 5, third)
        .await
        .expect("task")
        .expect_err("expired");
    assert_eq!(
        status(err),
        (Code::Unknown, "mutex: session is expired".to_string())
    );
    server.stop().await;
}

async fn election_campaign_leader_observe_resign(kind: Kind) {
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let mut a = server.client().await;
    let mut b = server.client().await;
    let la = a.lease_grant(30, None).await.expect("grant").id();
    let lb = b.lease_grant(30, None).await.expect("grant").id();
    let (code, msg) = status(a.leader("elect").await.expect_err("no leader yet"));
    assert_eq!((code, msg.as_str()), (Code::Unknown, "election: no leader"));
    let mut observer = server.client().await;
    let mut observed = observer.observe("elect").await.expect("observe");
    let won = a.campaign("elect", "v1", la).await.expect("campaign");
    let leader_key = won.leader().expect("leader key").clone();
    assert_eq!(leader_key.key(), format!("elect/{la:x}").as_bytes());
    let o = within("observe v1", 5, observed.message())
        .await
        .expect("msg")
        .expect("leader");
    assert_eq!(o.kv().expect("kv").value(), b"v1");
    let second = tokio::spawn(async move { b.campaign("elect", "v2", lb).await.map(|r| (r, b)) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "b waits while a leads");
    a.proclaim(
        "v1b",
        Some(etcd_client::ProclaimOptions::new().with_leader(leader_key.clone())),
    )
    .await
    .expect("proclaim");
    let o = within("observe v1b", 5, observed.message())
        .await
        .expect("msg")
        .expect("leader");
    assert_eq!(o.kv().expect("kv").value(), b"v1b");
    assert_eq!(
        a.leader("elect")
            .await
            .expect("leader")
            .kv()
            .expect("kv")
            .value(),
        b"v1b"
    );
    a.resign(Some(ResignOptions::new().with_leader(leader_key.clone())))
        .await
        .expect("resign");
    let (won_b, _b) = within("b elected", 5, second)
        .await
        .expect("task")
        .expect("campaign b");
    assert_eq!(won_b.leader().expect("key").lease(), lb);
    let o = within("observe v2", 5, observed.message())
        .await
        .expect("msg")
        .expect("leader");
    assert_eq!(o.kv().expect("kv").value(), b"v2");
    let err = a
        .proclaim(
            "late",
            Some(etcd_client::ProclaimOptions::new().with_leader(leader_key)),
        )
        .await
        .expect_err("resigned");
    assert_eq!(
        status(err),
        (Code::Unknown, "election: not leader".to_string())
    );
    server.stop().await;
}

async fn status_members_and_lost_leader(kind: Kind) {
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let mut c = server.client().await;
    c.put("k", "v", None).await.expect("put");
    let s = c.status().await.expect("status");
    assert_eq!(s.version(), "3.5.0-coordbench");
    assert_eq!(Some(s.leader()), server.leader_id());
    assert!(s.raft_applied_index() >= 1 && s.raft_applied_index() <= s.raft_index());
    assert!(s.db_size() > 0);
    let m = c.member_list().await.expect("members");
    assert_eq!(m.members().len(), server.members());
    let me = server.target();
    assert!(m
        .members()
        .iter()
        .any(|x| x.id() == me.id && x.name() == me.name));
    let (code, _) = status(c.defragment().await.expect_err("unimplemented"));
    assert_eq!(code, Code::Unimplemented);

    server.lose_leader(true).await;
    let (code, msg) = status(c.put("k", "w", None).await.expect_err("no leader"));
    assert_eq!(
        (code, msg.as_str()),
        (Code::Unavailable, "etcdserver: no leader")
    );
    let (code, _) = status(c.get("k", None).await.expect_err("linearizable read"));
    assert_eq!(code, Code::Unavailable);
    let r = c
        .get("k", Some(GetOptions::new().with_serializable()))
        .await
        .expect("local read");
    assert_eq!(r.kvs()[0].value(), b"v");
    server.lose_leader(false).await;
    // Clients retry "no leader" errors; once the member follows a leader again, it works.
    within("a retried write succeeds", 10, async {
        while c.put("k", "w", None).await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    server.stop().await;
}

async fn slow_watcher_catches_up_from_history(kind: Kind) {
    let options = ServeOptions {
        watch_buffer: 2,
        ..ServeOptions::default()
    };
    let server = TestServer::start(kind, options).await;
    let mut c = server.client().await;
    let mut w = c.watch("slow", None).await.expect("watch");
    let created = within("created", 5, w.message())
        .await
        .expect("msg")
        .expect("created");
    let id = created.watch_id();
    // Write more than the HTTP/2 windows and the stream's queue hold (about 90 of these
    // 100 KB events) while nobody reads; 8 concurrent writers let Raft pipeline them.
    let value = vec![b'v'; 100 * 1024];
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (mut c, value) = (c.clone(), value.clone());
        writers.spawn(async move {
            let mut revisions = Vec::new();
            for _ in 0..16 {
                let r = c.put("slow", value.clone(), None).await.expect("put");
                revisions.push(r.header().expect("h").revision());
            }
            revisions
        });
    }
    let mut written = within("writes", 30, async {
        let mut all = Vec::new();
        while let Some(r) = writers.join_next().await {
            all.extend(r.expect("writer"));
        }
        all
    })
    .await;
    written.sort_unstable();
    // The watcher was set aside while nobody read; reading now, it still gets every write,
    // once, in order: what was queued, then the history it missed, then live events.
    let mut seen = Vec::new();
    within("every write arrives", 30, async {
        while seen.len() < written.len() {
            let m = w.message().await.expect("msg").expect("response");
            assert!(!m.canceled(), "canceled: {}", m.cancel_reason());
            assert_eq!(m.watch_id(), id);
            seen.extend(
                m.events()
                    .iter()
                    .map(|e| e.kv().expect("kv").mod_revision()),
            );
        }
    })
    .await;
    assert_eq!(seen, written);
    // And it is live again.
    let next = c.put("slow", "after", None).await.expect("put");
    let m = within("live", 5, w.message())
        .await
        .expect("msg")
        .expect("event");
    assert_eq!(
        m.events()[0].kv().expect("kv").mod_revision(),
        next.header().expect("h").revision()
    );
    // An unread stream would hold a graceful shutdown until its grace period: close it.
    drop(w);
    server.stop().await;
}

async fn watch_filters_and_progress_notify(kind: Kind) {
    let options = ServeOptions {
        watch_progress_interval: Duration::from_millis(200),
        ..ServeOptions::default()
    };
    let server = TestServer::start(kind, options).await;
    let mut c = server.client().await;
    let opts = WatchOptions::new()
        .with_filters([etcd_client::WatchFilterType::NoPut])
        .with_progress_notify();
    let mut w = c.watch("f", Some(opts)).await.expect("watch");
    let id = within("created", 5, w.message())
        .await
        .expect("msg")
        .expect("created")
        .watch_id();
    let rev = c
        .put("f", "1", None)
        .await
        .expect("put")
        .header()
        .expect("h")
        .revision();
    c.delete("f", None).await.expect("delete");
    let m = within("delete only", 5, w.message())
        .await
        .expect("msg")
        .expect("event");
    assert_eq!(m.events().len(), 1);
    assert_eq!(
        m.events()[0].event_type(),
        EventType::Delete,
        "NoPut filters the put"
    );
    let m = within("progress notification", 5, w.message())
        .await
        .expect("msg")
        .expect("progress");
    assert_eq!((m.watch_id(), m.events().len()), (id, 0));
    assert_eq!(m.header().expect("h").revision(), rev + 1);
    server.stop().await;
}

on_both_backends!(
    put_get_range_delete,
    txn_with_compares,
    watch_replay_live_prev_kv_cancel,
    compaction_errors,
    lease_grant_keep_alive_revoke,
    lease_expires_on_the_leader_clock,
    lock_contention_between_two_clients,
    election_campaign_leader_observe_resign,
    status_members_and_lost_leader,
    slow_watcher_catches_up_from_history,
    watch_filters_and_progress_notify,
);
