//! Automatic compaction, raft beside real etcd: a one-member etcd 3.6.16 and a one-member
//! raft, both started by the lab with `--auto-compaction-mode periodic
//! --auto-compaction-retention 1s`, are written to under their own leader's compaction
//! and must behave alike: an old revision becomes "required revision has been compacted"
//! (a Range's OutOfRange, a watch from it canceled with the compact revision) within a
//! few periods but no sooner than one period after it was written, while a revision
//! written within the last half period stays readable. And
//! `coordbench run` refuses the option on a target without history (zab) in one line.

mod common;
#[path = "common/output.rs"]
mod output;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{raft_options, within, START_BOUND};
use coordbench_lab::provision::etcd::{self, EtcdOptions};
use coordbench_lab::provision::{raft, AutoCompaction, Cluster, ClusterSpec, DiskKind};
use etcd_client::{Client, GetOptions, WatchOptions};
use output::describe;

/// The etcd release the engine answers as.
const ETCD_RELEASE: &str = "3.6.16";
/// The retention both run with: etcd samples every 100 ms and compacts every second.
const RETENTION: &str = "1s";
const PERIOD: Duration = Duration::from_secs(1);
/// Time for an old revision to be compacted: the first compaction comes one period after
/// start (to the revision at start), the next ones every period.
const COMPACTED_WITHIN: Duration = Duration::from_secs(8);
/// Between two puts.
const WRITE_EVERY: Duration = Duration::from_millis(20);
const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";

/// What a server did under compaction.
#[derive(Debug)]
struct Seen {
    /// The gRPC code and message of a Range at the first revision written.
    range: (tonic::Code, String),
    /// A watch from that revision: canceled, with a compact revision above it.
    watch_canceled_above: bool,
    /// From sending the first put until the Range at its revision failed.
    took: Duration,
}

fn spec(work: &std::path::Path) -> ClusterSpec {
    ClusterSpec {
        auto_compaction: AutoCompaction::parse("periodic", RETENTION).expect("a retention"),
        ..ClusterSpec::new(1, DiskKind::Tmpfs, Duration::from_secs(10), work.into())
    }
}

/// Writes one key every [`WRITE_EVERY`] until the first revision written is compacted;
/// meanwhile every revision whose put was sent under half a period ago stays readable.
async fn write_until_compacted(cluster: &Cluster) -> Seen {
    let mut client = Client::connect(cluster.endpoints(), None)
        .await
        .expect("connect");
    let put = |client: &mut Client| {
        let mut kv = client.kv_client();
        async move {
            let sent = Instant::now();
            let resp = kv.put("auto-compaction", "v", None).await.expect("put");
            (sent, resp.header().expect("a header").revision())
        }
    };
    let (start, first) = put(&mut client).await;
    let mut recent = Vec::new();
    loop {
        assert!(
            start.elapsed() < COMPACTED_WITHIN,
            "revision {first} not compacted within {COMPACTED_WITHIN:?}"
        );
        recent.push(put(&mut client).await);
        recent.retain(|(sent, _)| sent.elapsed() < Duration::from_millis(500));
        for &(_, rev) in &recent {
            let opts = GetOptions::new().with_revision(rev);
            if let Err(e) = client.get("auto-compaction", Some(opts)).await {
                panic!("revision {rev}, put under half a period ago, unreadable: {e}");
            }
        }
        let opts = GetOptions::new().with_revision(first);
        match client.get("auto-compaction", Some(opts)).await {
            Ok(_) => tokio::time::sleep(WRITE_EVERY).await,
            Err(etcd_client::Error::GRpcStatus(s)) => {
                return Seen {
                    range: (s.code(), s.message().to_string()),
                    watch_canceled_above: watch_canceled_above(&mut client, first).await,
                    took: start.elapsed(),
                };
            }
            Err(e) => panic!("range at revision {first}: {e}"),
        }
    }
}

/// Whether a watch from `rev` is canceled with a compact revision above it.
async fn watch_canceled_above(client: &mut Client, rev: i64) -> bool {
    let opts = WatchOptions::new().with_start_revision(rev);
    let mut stream = client
        .watch("auto-compaction", Some(opts))
        .await
        .expect("watch");
    loop {
        let resp = stream
            .message()
            .await
            .expect("watch stream")
            .expect("a watch response");
        if resp.canceled() {
            return resp.compact_revision() > rev;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_compacts_periodically_as_etcd_does() {
    let work = tempfile::tempdir().unwrap();
    let options = EtcdOptions {
        version: Some(ETCD_RELEASE.parse().unwrap()),
        ..Default::default()
    };
    let etcd_spec = spec(&work.path().join("etcd"));
    let raft_spec = spec(&work.path().join("raft"));
    let raft_options = raft_options();
    let (etcd, raft) = tokio::join!(
        within(
            START_BOUND,
            "starting etcd",
            etcd::start(&etcd_spec, &options)
        ),
        within(
            START_BOUND,
            "starting raft",
            raft::start(&raft_spec, &raft_options)
        ),
    );
    let (mut etcd, mut raft) = (etcd.expect("etcd starts"), raft.expect("raft starts"));
    for cluster in [&etcd, &raft] {
        let settings = &cluster.info().settings;
        assert!(
            settings.contains(&("auto-compaction-retention".into(), RETENTION.into())),
            "{settings:?}"
        );
    }
    let (on_etcd, on_raft) =
        tokio::join!(write_until_compacted(&etcd), write_until_compacted(&raft));
    etcd.stop();
    raft.stop();
    eprintln!("etcd: {on_etcd:?}\nraft: {on_raft:?}");
    let expected = (tonic::Code::OutOfRange, COMPACTED.to_string());
    assert_eq!(on_etcd.range, expected, "etcd");
    assert_eq!(on_raft.range, expected, "raft");
    assert!(on_etcd.watch_canceled_above, "etcd: {on_etcd:?}");
    assert!(on_raft.watch_canceled_above, "raft: {on_raft:?}");
    // The revision compacted to was sampled at least one period before the compaction.
    for (name, seen) in [("etcd", &on_etcd), ("raft", &on_raft)] {
        assert!(seen.took >= PERIOD, "{name} compacted early: {seen:?}");
    }
}

#[test]
fn zab_refuses_it_in_one_line() {
    let o = Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args([
            "run",
            "--target",
            "zab",
            "--workload",
            "kv-put",
            "--auto-compaction-retention",
            "5m",
        ])
        .output()
        .expect("run coordbench");
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("apply to etcd and raft"), "{stderr}");
}

#[test]
fn a_retention_that_cannot_be_meant_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let serve = [
        "serve",
        "raft",
        "--id=1",
        "--peers=1=127.0.0.1:1",
        "--clients=1=127.0.0.1:2",
        "--data-dir",
        data_dir,
        "--auto-compaction-mode=revision",
        "--auto-compaction-retention=5m",
    ];
    let run = [
        "run",
        "--target",
        "raft",
        "--auto-compaction-mode",
        "revision",
        "--auto-compaction-retention",
        "5m",
    ];
    for args in [&serve[..], &run[..]] {
        let o = Command::new(env!("CARGO_BIN_EXE_coordbench"))
            .args(args)
            .output()
            .expect("run coordbench");
        assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("\"5m\" is not a whole number of revisions"),
            "{stderr}"
        );
    }
}
