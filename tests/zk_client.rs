//! The ZooKeeper driver's own client (drivers/src/zookeeper/client) against real servers:
//! a 3-server ZooKeeper ensemble and a 3-member zab cluster, as processes on 127.0.0.1.
//!
//! - A session outlives the server it is connected to: killed under it, the session resumes
//!   on another server with the same id, its ephemeral node still there, and a data watch
//!   set before the kill fires for a write made meanwhile (re-registered with SetWatches).
//! - A reply far larger than the client's read buffer (3,000 children of 100-byte names)
//!   arrives whole, and paths under a chroot read as the client names them.

mod common;

use std::time::Duration;

use common::{start_target, within, TargetKind};
use coordbench_drivers::zookeeper::client::{
    Client, CreateMode, Error, EventType, Options, SessionState,
};
use coordbench_lab::provision::zookeeper::{self, ZkOptions};
use coordbench_lab::provision::{Cluster, ClusterSpec, DiskKind};
use coordbench_zk_proto::proto::{WireAcl, PERMS_ALL};

/// Bound on a session's failover and on a watch firing after it.
const FAILOVER_BOUND: Duration = Duration::from_secs(30);
/// Children of the wide node, and the length of each name.
const WIDE: usize = 3000;
const NAME_LEN: usize = 100;

fn open_acl() -> Vec<WireAcl> {
    vec![WireAcl {
        perms: PERMS_ALL,
        scheme: Some("world".into()),
        id: Some("anyone".into()),
    }]
}

fn options() -> Options {
    Options {
        session_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(5),
        ..Options::default()
    }
}

/// Retries `f` while the connection is lost (a server electing a leader closes its
/// client connections), within [`FAILOVER_BOUND`].
async fn through_failover<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    within(FAILOVER_BOUND, what, async {
        loop {
            match f().await {
                Ok(v) => return v,
                Err(Error::ConnectionLoss) => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(e) => panic!("{what}: {e}"),
            }
        }
    })
    .await
}

/// Kills the server session `a` is connected to and checks the session resumes elsewhere
/// with its ephemeral node and its watch.
async fn a_session_outlives_its_server(cluster: &mut Cluster) {
    let endpoints = cluster.endpoints();
    let a = Client::connect(&endpoints.join(","), options())
        .await
        .expect("session a");
    let victim = endpoints
        .iter()
        .position(|e| *e == a.server())
        .expect("a's server");
    let others: Vec<String> = endpoints
        .iter()
        .filter(|e| **e != a.server())
        .cloned()
        .collect();
    let b = Client::connect(&others.join(","), options())
        .await
        .expect("session b");
    a.create("/resume", b"v0", CreateMode::Persistent, &open_acl())
        .await
        .expect("create");
    a.create("/resume-eph", b"", CreateMode::Ephemeral, &open_acl())
        .await
        .expect("ephemeral");
    let (data, _, watcher) = a.get_and_watch_data("/resume").await.expect("watch");
    assert_eq!(data, b"v0");
    let id = a.session_id();

    cluster.kill_member(victim).expect("kill a's server");
    through_failover("the write while a resumes", || {
        b.set_data("/resume", b"v1", None)
    })
    .await;
    let event = within(FAILOVER_BOUND, "a's watch firing", watcher.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (EventType::NodeDataChanged, "/resume")
    );
    let (data, _) = through_failover("a's read after resuming", || a.get_data("/resume")).await;
    assert_eq!(data, b"v1");
    assert_eq!((a.session_id(), a.state()), (id, SessionState::Connected));
    assert_ne!(a.server(), endpoints[victim], "a resumed on another server");
    let eph = b.exists("/resume-eph").await.expect("exists");
    assert_eq!(
        eph.map(|s| s.ephemeral_owner),
        Some(id),
        "the ephemeral outlived the move"
    );
}

/// A reply of about 300 KB, and a chroot's paths.
async fn wide_replies_and_chroots(endpoint: &str) {
    let root = Client::connect(endpoint, options())
        .await
        .expect("root session");
    root.mkdir("/chrooted/wide", &open_acl())
        .await
        .expect("mkdir");
    let chrooted = Client::connect(&format!("{endpoint}/chrooted"), options())
        .await
        .expect("chrooted session");
    let names: Vec<String> = (0..WIDE)
        .map(|i| format!("{i:0>width$}", width = NAME_LEN))
        .collect();
    let chrooted = &chrooted;
    for chunk in names.chunks(200) {
        let creates = chunk.iter().map(|n| {
            let path = format!("/wide/{n}");
            let acl = open_acl();
            async move {
                chrooted
                    .create(&path, b"", CreateMode::Persistent, &acl)
                    .await
            }
        });
        for created in futures::future::join_all(creates).await {
            let (path, _) = created.expect("create a child");
            assert!(
                path.starts_with("/wide/"),
                "{path} is named without the chroot"
            );
        }
    }
    let mut children = chrooted
        .children("/wide")
        .await
        .expect("list the wide node")
        .to_vec();
    children.sort();
    assert_eq!(children, names);
    let seen = root
        .children("/chrooted/wide")
        .await
        .expect("list from the root");
    assert_eq!(seen.len(), WIDE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zab_sessions_fail_over_and_read_wide_replies() {
    let mut target = start_target(TargetKind::Zab, 3).await;
    wide_replies_and_chroots(&target.endpoints()[2]).await;
    a_session_outlives_its_server(&mut target.cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_sessions_fail_over_and_read_wide_replies() {
    let work = tempfile::tempdir().expect("tempdir");
    let spec = ClusterSpec {
        size: 3,
        disk: DiskKind::Tmpfs,
        ttl: Duration::from_secs(10),
        base_port: None,
        work_dir: work.path().to_path_buf(),
        sync_delay: None,
        net_delay: None,
        net_delay_clients: false,
        snapshot_every: None,
        auto_compaction: None,
    };
    let mut cluster = within(
        Duration::from_secs(70),
        "starting ZooKeeper",
        zookeeper::start(&spec, &ZkOptions::default()),
    )
    .await
    .expect("start ZooKeeper");
    wide_replies_and_chroots(&cluster.endpoints()[2]).await;
    a_session_outlives_its_server(&mut cluster).await;
    cluster.stop();
}
