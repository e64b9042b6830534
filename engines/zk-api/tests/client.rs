//! The ZooKeeper protocol driven by the zookeeper-client crate (what coordbench's
//! ZooKeeper driver uses) against a real TCP server over a one-member replicator.

mod common;

use std::time::Duration;

use common::{four_letter, within, TestServer};
use zookeeper_client::{
    Acls, AddWatchMode, Client, CreateMode, CreateOptions, Error, EventType, MultiWriteError,
};

const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());

fn opts(mode: CreateMode) -> CreateOptions<'static> {
    mode.with_acls(Acls::anyone_all())
}

async fn start() -> TestServer {
    TestServer::start(common::fast_options()).await
}

fn mntr_value(reply: &str, key: &str) -> Option<i64> {
    reply.lines().find_map(|l| {
        let (k, v) = l.split_once('\t')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_all_modes() {
    let server = start().await;
    let zk = server.client(Duration::from_secs(2)).await;
    let session = zk.session_id().0;

    let (stat, _) = zk.create("/p", b"data", &PERSISTENT).await.unwrap();
    assert_eq!(
        (stat.version, stat.ephemeral_owner, stat.data_length),
        (0, 0, 4)
    );
    assert_eq!(stat.czxid, stat.mzxid);

    let (stat, _) = zk
        .create("/p/e", b"", &opts(CreateMode::Ephemeral))
        .await
        .unwrap();
    assert_eq!(stat.ephemeral_owner, session);

    let (_, seq) = zk
        .create("/p/s-", b"", &opts(CreateMode::PersistentSequential))
        .await
        .unwrap();
    assert_eq!(seq.into_i64(), 1, "numbered by the parent's cversion");
    let (stat, seq) = zk
        .create("/p/es-", b"", &opts(CreateMode::EphemeralSequential))
        .await
        .unwrap();
    assert_eq!((seq.into_i64(), stat.ephemeral_owner), (2, session));
    assert!(zk.check_stat("/p/es-0000000002").await.unwrap().is_some());

    let (stat, _) = zk
        .create("/c", b"", &opts(CreateMode::Container))
        .await
        .unwrap();
    // ZooKeeper stores a marker for containers and TTL nodes but shows clients 0
    // (tests/zk_differential.rs compares it with ZooKeeper 3.8).
    assert_eq!(
        stat.ephemeral_owner, 0,
        "a container's owner as clients see it"
    );
    let ttl = opts(CreateMode::Persistent).with_ttl(Duration::from_millis(300));
    let (stat, _) = zk.create("/t", b"", &ttl).await.unwrap();
    assert_eq!(
        stat.ephemeral_owner, 0,
        "a TTL node's owner as clients see it"
    );

    assert_eq!(
        zk.create("/p", b"", &PERSISTENT).await.unwrap_err(),
        Error::NodeExists
    );
    assert_eq!(
        zk.create("/no/such", b"", &PERSISTENT).await.unwrap_err(),
        Error::NoNode
    );
    assert_eq!(
        zk.create("/p/e/kid", b"", &PERSISTENT).await.unwrap_err(),
        Error::NoChildrenForEphemerals
    );
    let mut children = zk.list_children("/p").await.unwrap();
    children.sort();
    assert_eq!(children, ["e", "es-0000000002", "s-0000000001"]);

    // The container goes once it has had a child and is empty again; the TTL node once
    // its TTL passes unmodified. Both are the leader's periodic checks.
    zk.create("/c/x", b"", &PERSISTENT).await.unwrap();
    assert!(zk.check_stat("/c").await.unwrap().is_some());
    zk.delete("/c/x", None).await.unwrap();
    within("container and TTL node reaped", 10, async {
        while zk.check_stat("/c").await.unwrap().is_some()
            || zk.check_stat("/t").await.unwrap().is_some()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_versions_and_children() {
    let server = start().await;
    let zk = server.client(Duration::from_secs(2)).await;
    zk.create("/v", b"one", &PERSISTENT).await.unwrap();
    let (data, stat) = zk.get_data("/v").await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (b"one".as_slice(), 0));
    let stat = zk.set_data("/v", b"two", Some(0)).await.unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(
        zk.set_data("/v", b"x", Some(0)).await.unwrap_err(),
        Error::BadVersion
    );
    let stat = zk.set_data("/v", b"three", None).await.unwrap();
    assert_eq!(stat.version, 2);
    assert_eq!(zk.get_data("/v").await.unwrap().0, b"three");
    assert_eq!(zk.get_data("/nope").await.unwrap_err(), Error::NoNode);

    for name in ["b", "a", "c"] {
        zk.create(&format!("/v/{name}"), b"", &PERSISTENT)
            .await
            .unwrap();
    }
    let (children, stat) = zk.get_children("/v").await.unwrap();
    assert_eq!(children, ["a", "b", "c"]);
    assert_eq!((stat.num_children, stat.cversion), (3, 3));
    assert_eq!(zk.delete("/v", None).await.unwrap_err(), Error::NotEmpty);
    assert_eq!(
        zk.delete("/v/a", Some(7)).await.unwrap_err(),
        Error::BadVersion
    );
    zk.delete("/v/a", Some(0)).await.unwrap();
    assert_eq!(zk.count_descendants_number("/v").await.unwrap(), 2);
    assert_eq!(zk.get_acl("/v").await.unwrap().0.len(), 1);
    zk.sync("/v").await.unwrap();
    // The system nodes every ZooKeeper has.
    assert!(zk
        .list_children("/")
        .await
        .unwrap()
        .contains(&"zookeeper".to_string()));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_numbering_counts_creates() {
    let server = start().await;
    let zk = server.client(Duration::from_secs(2)).await;
    zk.create("/q", b"", &PERSISTENT).await.unwrap();
    let seq = opts(CreateMode::PersistentSequential);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(zk.create("/q/n-", b"", &seq).await.unwrap().1.into_i64());
    }
    assert_eq!(got, [0, 1, 2]);
    zk.delete("/q/n-0000000002", None).await.unwrap();
    assert_eq!(
        zk.create("/q/n-", b"", &seq).await.unwrap().1.into_i64(),
        3,
        "deletes do not reuse numbers"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_watches_fire_once() {
    let server = start().await;
    let zk = server.client(Duration::from_secs(2)).await;
    let other = server.client(Duration::from_secs(2)).await;

    // exists on a missing node: NodeCreated.
    let (stat, watcher) = zk.check_and_watch_stat("/w").await.unwrap();
    assert!(stat.is_none());
    other.create("/w", b"", &PERSISTENT).await.unwrap();
    let event = within("exists watch", 5, watcher.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (EventType::NodeCreated, "/w")
    );

    // Child watch: NodeChildrenChanged, once.
    let (_, _, watcher) = zk.get_and_watch_children("/w").await.unwrap();
    let (_, _, data_watcher) = zk.get_and_watch_data("/w").await.unwrap();
    let mntr = four_letter(server.addr(), "mntr").await;
    assert_eq!(mntr_value(&mntr, "zk_watch_count"), Some(2));
    other.create("/w/kid", b"", &PERSISTENT).await.unwrap();
    let event = within("child watch", 5, watcher.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (EventType::NodeChildrenChanged, "/w")
    );
    other.create("/w/kid2", b"", &PERSISTENT).await.unwrap();
    // The data watch is still there; the child watch fired and is gone from the server.
    let mntr = four_letter(server.addr(), "mntr").await;
    assert_eq!(mntr_value(&mntr, "zk_watch_count"), Some(1));
    other.set_data("/w", b"x", None).await.unwrap();
    let event = within("data watch", 5, data_watcher.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (EventType::NodeDataChanged, "/w")
    );
    let mntr = four_letter(server.addr(), "mntr").await;
    assert_eq!(mntr_value(&mntr, "zk_watch_count"), Some(0));
    assert!(mntr_value(&mntr, "zk_packets_received").unwrap() > 5);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_recursive_watch() {
    let server = start().await;
    let zk = server.client(Duration::from_secs(2)).await;
    let other = server.client(Duration::from_secs(2)).await;
    zk.create("/r", b"", &PERSISTENT).await.unwrap();
    let mut watcher = zk
        .watch("/r", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    other.create("/r/a", b"", &PERSISTENT).await.unwrap();
    other.create("/r/a/b", b"", &PERSISTENT).await.unwrap();
    other.set_data("/r/a", b"x", None).await.unwrap();
    other.delete("/r/a/b", None).await.unwrap();
    other.create("/elsewhere", b"", &PERSISTENT).await.unwrap();
    other.set_data("/r", b"y", None).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let e = within("recursive event", 5, watcher.changed()).await;
        seen.push((e.event_type, e.path));
    }
    let expected = [
        (EventType::NodeCreated, "/r/a"),
        (EventType::NodeCreated, "/r/a/b"),
        (EventType::NodeDataChanged, "/r/a"),
        (EventType::NodeDeleted, "/r/a/b"),
        (EventType::NodeDataChanged, "/r"),
    ];
    let seen: Vec<(EventType, &str)> = seen.iter().map(|(t, p)| (*t, p.as_str())).collect();
    assert_eq!(
        seen, expected,
        "in zxid order, no child events, nothing outside /r"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_is_atomic() {
    let server = start().await;
    let zk = server.client(Duration::from_secs(2)).await;
    zk.create("/m", b"", &PERSISTENT).await.unwrap();
    let mut w = zk.new_multi_writer();
    w.add_create("/m/a", b"", &PERSISTENT).unwrap();
    w.add_set_data("/m", b"x", Some(0)).unwrap();
    w.add_check_version("/m", 5).unwrap();
    match w.commit().await {
        Err(MultiWriteError::OperationFailed { index, source }) => {
            assert_eq!((index, source), (2, Error::BadVersion))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        zk.check_stat("/m/a").await.unwrap().is_none(),
        "nothing applied"
    );
    assert_eq!(zk.get_data("/m").await.unwrap().1.version, 0);

    let mut w = zk.new_multi_writer();
    w.add_create("/m/a", b"", &PERSISTENT).unwrap();
    w.add_create("/m/s-", b"", &opts(CreateMode::PersistentSequential))
        .unwrap();
    w.add_set_data("/m", b"x", Some(0)).unwrap();
    w.add_check_version("/m", 1).unwrap();
    w.add_delete("/m/a", None).unwrap();
    let results = w.commit().await.unwrap();
    assert_eq!(results.len(), 5);
    let created = format!("{:?}", results[1]);
    assert!(created.contains("/m/s-0000000001"), "{created}");
    assert_eq!(zk.list_children("/m").await.unwrap(), ["s-0000000001"]);
    assert_eq!(zk.get_data("/m").await.unwrap().1.version, 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_deletes_ephemerals() {
    let server = start().await;
    let watcher_client = server.client(Duration::from_secs(2)).await;
    let doomed = within(
        "connect",
        5,
        Client::connector()
            .with_session_timeout(Duration::from_millis(600))
            .with_detached()
            .connect(&server.endpoint()),
    )
    .await
    .unwrap();
    doomed
        .create("/eph", b"", &opts(CreateMode::Ephemeral))
        .await
        .unwrap();
    let info = doomed.session().clone();
    let (_, watcher) = watcher_client.check_and_watch_stat("/eph").await.unwrap();
    // A detached client drops its connection without closeSession: pings stop.
    drop(doomed);
    let event = within("expiry deletes the ephemeral", 10, watcher.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (EventType::NodeDeleted, "/eph")
    );
    let again = Client::connector()
        .with_session(info)
        .connect(&server.endpoint())
        .await;
    assert_eq!(again.err(), Some(Error::SessionExpired));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_keeps_the_session() {
    let server = start().await;
    let first = within(
        "connect",
        5,
        Client::connector()
            .with_session_timeout(Duration::from_millis(1500))
            .with_detached()
            .connect(&server.endpoint()),
    )
    .await
    .unwrap();
    first
        .create("/mine", b"", &opts(CreateMode::Ephemeral))
        .await
        .unwrap();
    let info = first.session().clone();
    let id = first.session_id();
    drop(first);
    // Stay away for longer than a touch interval, shorter than the timeout.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = within(
        "reconnect",
        5,
        Client::connector()
            .with_session(info)
            .connect(&server.endpoint()),
    )
    .await
    .unwrap();
    assert_eq!(second.session_id(), id);
    // Live well past the original timeout: pings on the new connection renew it.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let stat = second
        .check_stat("/mine")
        .await
        .unwrap()
        .expect("ephemeral kept");
    assert_eq!(stat.ephemeral_owner, id.0);
    // A clean close ends the session at once.
    drop(second);
    let zk = server.client(Duration::from_secs(2)).await;
    within("closeSession deletes the ephemeral", 5, async {
        while zk.check_stat("/mine").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    server.stop().await;
}
