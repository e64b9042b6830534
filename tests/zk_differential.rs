//! zab against real ZooKeeper, reply by reply: each test starts a one-member ZooKeeper
//! 3.8.0 (Debian's: the release zab speaks and names in `srvr`; 3.9 answers some requests
//! differently, see RESULTS.md; extended types enabled for TTL nodes, `envi` whitelisted) and a
//! one-member zab, sends both the same requests from the zk-api crate's raw client
//! (tests/common/zk_differential.rs: null and empty data, null ACL ids, every create mode,
//! versions, multi with a failing op, error codes, then seeded random sequences) and
//! fails on the first reply that differs once zxids, sessions and times are normalised.
//! ZooKeeper is the control: the same bodies assert what ZooKeeper answers, so a changed
//! expectation shows on ZooKeeper first.
//!
//! Replay one random sequence: `ZK_DIFF_SEED=<seed> cargo test --test zk_differential random`;
//! run more: `ZK_DIFF_SEED=4..40` (a range, on one pair of servers).
//! Compare another build's zab (an older commit's, to see what a fix changed):
//! `ZK_DIFF_ZAB_BIN=/path/to/coordbench cargo test --test zk_differential`; against the
//! last member of a 3-member zab (ports allow up to 3): `ZK_DIFF_ZAB_MEMBERS=3`.

mod common;

use std::time::Duration;

use common::zk_differential::{self as diff, Step, Transcript};
use common::{raft_options, within};
use coordbench_drivers::zookeeper::four_letter::{field, four_letter_word};
use coordbench_lab::provision::raft::RaftOptions;
use coordbench_lab::provision::{zab, zookeeper, Cluster, ClusterSpec, DiskKind};
use tempfile::TempDir;

const BOUND: Duration = Duration::from_secs(90);
/// The ZooKeeper release whose answers zab gives (and whose version it reports).
const ZAB_SPEAKS: &str = "3.8.0";
/// Steps of each random sequence.
const RANDOM_STEPS: usize = 300;

/// A one-member ZooKeeper and a one-member zab (base ports `base` and `base + 20`; see
/// tests/kazoo_interop.rs for why 32100-32699).
struct Pair {
    zookeeper: Cluster,
    zab: Cluster,
    _work: TempDir,
}

impl Pair {
    async fn start(base: u16) -> Pair {
        let work = TempDir::new().unwrap();
        let spec = |port: u16, size: usize| ClusterSpec {
            base_port: Some(port),
            ..ClusterSpec::new(
                size,
                DiskKind::Tmpfs,
                Duration::from_secs(10),
                work.path().join(port.to_string()),
            )
        };
        let options = zookeeper::ZkOptions {
            extended_types: true,
            version: Some(ZAB_SPEAKS.parse().expect("a release")),
            ..Default::default()
        };
        let zk_spec = spec(base, 1);
        let zookeeper = within(
            BOUND,
            "starting ZooKeeper",
            zookeeper::start(&zk_spec, &options),
        )
        .await
        .expect("ZooKeeper starts");
        let members = std::env::var("ZK_DIFF_ZAB_MEMBERS")
            .map_or(1, |n| n.parse().expect("ZK_DIFF_ZAB_MEMBERS is 1 to 3"));
        let zab_spec = spec(base + 20, members);
        let zab = within(BOUND, "starting zab", zab::start(&zab_spec, &zab_options()))
            .await
            .expect("zab starts");
        Pair {
            zookeeper,
            zab,
            _work: work,
        }
    }

    fn stop(mut self) {
        self.zookeeper.stop();
        self.zab.stop();
    }

    /// Runs `steps` on both; panics at the first difference, printing `what` and both
    /// transcripts up to it. Returns ZooKeeper's transcript for the control's assertions.
    async fn same_replies(&self, what: &str, steps: &[Step]) -> Transcript {
        let zk = diff::run(&self.zookeeper.endpoints()[0], steps).await;
        let zab_members = self.zab.endpoints();
        let zab = diff::run(&zab_members[zab_members.len() - 1], steps).await;
        if let Some(d) = diff::first_difference(&zk, &zab) {
            let upto = d
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            let upto = upto.min(zk.len());
            let files = dump(what, &zk, &zab);
            let context = zk[upto.saturating_sub(8)..upto].join("\n  ");
            panic!("{what}: zab differs from ZooKeeper at {d}\nthe steps before it (ZooKeeper's replies):\n  {context}\nwhole transcripts: {files}");
        }
        zk
    }
}

/// Writes both transcripts under target/zk-differential/ (for diff(1)); returns where.
fn dump(what: &str, zk: &Transcript, zab: &Transcript) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/zk-differential");
    let name: String = what
        .chars()
        .take_while(|c| *c != '(')
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let write = |who: &str, t: &Transcript| {
        let path = dir.join(format!("{}.{who}.txt", name.trim_matches('-')));
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, t.join("\n") + "\n"))
            .map_or_else(
                |e| format!("(not written: {e})"),
                |()| path.display().to_string(),
            )
    };
    format!("{} {}", write("zookeeper", zk), write("zab", zab))
}

/// The zab members' launcher options: this build's binary, or `ZK_DIFF_ZAB_BIN`'s.
fn zab_options() -> RaftOptions {
    match std::env::var_os("ZK_DIFF_ZAB_BIN") {
        Some(bin) => RaftOptions {
            binary: Some(bin.into()),
            ..raft_options()
        },
        None => raft_options(),
    }
}

/// The line of `transcript` for the step whose description contains `needle`, after the
/// first `skip` such lines.
fn line<'a>(transcript: &'a Transcript, needle: &str, skip: usize) -> &'a str {
    transcript
        .iter()
        .filter(|l| l.contains(needle))
        .nth(skip)
        .unwrap_or_else(|| panic!("no step {needle} (#{skip})"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_data_reads_back_null_and_empty_stays_empty() {
    let pair = Pair::start(32400).await;
    let t = pair
        .same_replies("null data", &diff::null_data_steps("/nd"))
        .await;
    // The control: ZooKeeper keeps null apart from empty, through every write.
    assert!(
        line(&t, "op 4 /nd/create-null", 0).contains("data null"),
        "{t:#?}"
    );
    assert!(
        line(&t, "op 4 /nd/create-empty", 0).contains("data \"\""),
        "{t:#?}"
    );
    assert!(
        line(&t, "op 4 /nd/create-empty", 1).contains("data null"),
        "{t:#?}"
    );
    assert!(
        line(&t, "op 4 /nd/create-empty", 2).contains("data \"\""),
        "{t:#?}"
    );
    assert!(
        line(&t, "op 4 /nd/multi-null", 0).contains("data null"),
        "{t:#?}"
    );
    pair.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_acl_ids_are_the_creators_ids_or_refused_as_zookeeper_refuses_them() {
    let pair = Pair::start(32440).await;
    let t = pair
        .same_replies("null ACL ids", &diff::null_acl_steps("/na"))
        .await;
    // The control: Id("auth", null) is the creator's digest; without one it is InvalidACL.
    let acl = line(&t, "op 6 /na/creator-alice-null", 0);
    assert!(
        acl.contains("scheme: \"digest\"") && acl.contains("alice:"),
        "{acl}"
    );
    assert!(line(&t, "op 1 /na/creator-anon-null", 0).ends_with("err -114"));
    pair.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_modes_versions_multi_reads_watches_and_error_codes_match() {
    let pair = Pair::start(32480).await;
    let t = pair.same_replies("API", &diff::api_steps("/api")).await;
    assert!(line(&t, "op 15 /api/a data=\"1\"", 1).ends_with("err -110"));
    let t = pair
        .same_replies("reads and watches", &diff::read_and_watch_steps("/rw"))
        .await;
    assert!(line(&t, "c1 op 3 /:", 0).contains("after events"), "{t:#?}");
    let t = pair
        .same_replies("system nodes", &diff::system_node_steps())
        .await;
    assert!(line(&t, "op 5 /zookeeper/config", 0).ends_with("err -102"));
    pair.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sequences_match() {
    let pair = Pair::start(32520).await;
    let seeds: Vec<u64> = match std::env::var("ZK_DIFF_SEED") {
        Ok(s) => match s.split_once("..") {
            Some((a, b)) => {
                let bound = |x: &str| x.parse::<u64>().expect("ZK_DIFF_SEED is N or A..B");
                (bound(a)..bound(b)).collect()
            }
            None => vec![s.parse().expect("ZK_DIFF_SEED is N or A..B")],
        },
        Err(_) => vec![1, 2, 3],
    };
    for seed in seeds {
        let root = format!("/random-{seed}");
        let steps = diff::random(seed, &root, RANDOM_STEPS);
        let what =
            format!("seed {seed} (ZK_DIFF_SEED={seed} cargo test --test zk_differential random)");
        pair.same_replies(&what, &steps).await;
    }
    pair.stop();
}

/// `envi` is answered by both, in ZooKeeper's shape, and its zookeeper.version is the
/// version `srvr` reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envi_names_the_version_srvr_reports() {
    let pair = Pair::start(32560).await;
    for (name, cluster) in [("ZooKeeper", &pair.zookeeper), ("zab", &pair.zab)] {
        let addr = &cluster.endpoints()[0];
        let envi = four_letter_word(addr, "envi", None).await.expect("envi");
        let srvr = four_letter_word(addr, "srvr", None).await.expect("srvr");
        let mut lines = envi.lines();
        assert_eq!(lines.next(), Some("Environment:"), "{name}: {envi}");
        let version = envi
            .lines()
            .find_map(|l| l.strip_prefix("zookeeper.version="))
            .unwrap_or_else(|| panic!("{name}: no zookeeper.version in {envi}"));
        assert_eq!(
            Some(version),
            field(&srvr, "Zookeeper version"),
            "{name}: {envi}\n{srvr}"
        );
        assert!(version.starts_with("3.8.0-"), "{name}: {version}");
        assert!(
            lines.all(|l| l.split_once('=').is_some_and(|(k, _)| !k.is_empty())),
            "{name}: {envi}"
        );
    }
    pair.stop();
}

/// zab keeps null data apart from empty in its WAL: a killed member, restarted on its data
/// directory, answers getData as before (zab alone: ZooKeeper's own persistence is not
/// under test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zab_keeps_null_and_empty_data_through_a_restart() {
    let work = TempDir::new().unwrap();
    let spec = ClusterSpec {
        base_port: Some(32590),
        ..ClusterSpec::new(
            1,
            DiskKind::Tmpfs,
            Duration::from_secs(10),
            work.path().into(),
        )
    };
    let mut zab = within(BOUND, "starting zab", zab::start(&spec, &zab_options()))
        .await
        .expect("zab starts");
    let addr = zab.endpoints()[0].clone();
    let steps = diff::null_data_steps("/restart");
    let before = diff::run(&addr, &steps).await;
    zab.kill_member(0).expect("kill");
    zab.restart_member(0).expect("restart");
    let reads: Vec<Step> = steps
        .iter()
        .filter(|s| s.op == coordbench_zk_api::proto::op::GET_DATA)
        .cloned()
        .collect();
    let after = within(BOUND, "reading after the restart", async {
        loop {
            match diff::try_run(&addr, &reads).await {
                Some(t) => return t,
                None => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await;
    // The last read of each path before the restart is what it reads after it.
    for (line, step) in after.iter().zip(&reads) {
        let path = match &step.req {
            coordbench_zk_api::request::Request::GetData(r) => r.path.clone(),
            _ => unreachable!("only getData steps"),
        };
        let needle = format!("op 4 {path}:");
        let last = before.iter().rev().find(|l| l.contains(&needle)).unwrap();
        let value = |l: &str| {
            l.split_once(": ")
                .map(|(_, v)| v.split(" stat(").next().unwrap_or(v).to_string())
        };
        assert_eq!(
            value(line),
            value(last),
            "{path}: {last} before, {line} after"
        );
    }
    assert!(after.iter().any(|l| l.contains("data null")), "{after:#?}");
    zab.stop();
}
