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
//! run more: `ZK_DIFF_SEED=4..40` (a range, on one pair of servers; see
//! scripts/differential-soak.sh). A difference in a random sequence is shrunk to the
//! shortest subsequence found that still shows it (tests/common/shrink.rs), and printed
//! with ZooKeeper's replies to it.
//! Compare another build's zab (an older commit's, to see what a fix changed):
//! `ZK_DIFF_ZAB_BIN=/path/to/coordbench cargo test --test zk_differential`; against the
//! last member of a 3-member zab (ports allow up to 3): `ZK_DIFF_ZAB_MEMBERS=3`. The random
//! sequences' pair on other ports: `ZK_DIFF_BASE_PORT` (the soak script's).

mod common;

use std::time::Duration;

use common::differential::{self, first_difference};
use common::shrink::{self, Rerun};
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
/// Reruns a shrink may spend.
const SHRINK_RUNS: usize = 200;

/// A one-member ZooKeeper and a one-member zab (base ports `base` and `base + 20`; see
/// tests/kazoo_interop.rs for why 32100-32699).
struct Pair {
    zookeeper: Cluster,
    zab: Cluster,
    _work: TempDir,
}

impl Pair {
    /// `wrong_answer`: zab's test-only wrong answer (`serve zab --wrong-answer`).
    async fn start(base: u16, wrong_answer: Option<&str>) -> Pair {
        let work = TempDir::new().unwrap();
        let spec = |port: u16, size: usize| differential::member_spec(work.path(), port, size);
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
        let options = RaftOptions {
            wrong_answer: wrong_answer.map(str::to_string),
            ..zab_options()
        };
        let zab = within(BOUND, "starting zab", zab::start(&zab_spec, &options))
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

    /// Runs `steps` on both: both transcripts and where they first differ.
    async fn compare(&self, steps: &[Step]) -> (Transcript, Transcript, Option<usize>) {
        let zk = diff::run(&self.zookeeper.endpoints()[0], steps).await;
        let zab_members = self.zab.endpoints();
        let zab = diff::run(&zab_members[zab_members.len() - 1], steps).await;
        let at = first_difference(&zk, &zab);
        (zk, zab, at)
    }

    /// Runs `steps` on both; panics at the first difference, printing `what` and both
    /// transcripts up to it. Returns ZooKeeper's transcript for the control's assertions.
    async fn same_replies(&self, what: &str, steps: &[Step]) -> Transcript {
        let (zk, zab, at) = self.compare(steps).await;
        if let Some(at) = at {
            let files = dump(what, &zk, &zab);
            let context = zk[at.saturating_sub(8)..at.min(zk.len())].join("\n  ");
            panic!(
                "{what}: zab differs from ZooKeeper at {}\nthe steps before it (ZooKeeper's replies):\n  {context}\nwhole transcripts: {files}",
                differential::lines_at(at, ("zookeeper", &zk), ("zab", &zab))
            );
        }
        zk
    }

    /// Random sequence `seed`: ZooKeeper's transcript if the replies agree, else the first
    /// difference and the shortest subsequence found that still shows it.
    async fn random(&self, seed: u64) -> Result<Transcript, Found> {
        let steps = diff::random(seed, &format!("/random-{seed}"), RANDOM_STEPS);
        let (zk, zab, at) = self.compare(&steps).await;
        let Some(at) = at else { return Ok(zk) };
        let signature = signature(&steps, at);
        let mut oracle = Subsequences {
            pair: self,
            seed,
            reruns: 0,
        };
        let upto = (0..steps.len().min(at + 1)).collect();
        let none = |_: &usize| Vec::new();
        let shrunk = shrink::shrink(upto, &signature, SHRINK_RUNS, none, &mut oracle).await;
        let (shrunk_zk, shrunk_zab, shrunk_at) = oracle.run(&shrunk.steps).await;
        Err(Found {
            at,
            zk,
            zab,
            shrunk,
            shrunk_zk,
            shrunk_zab,
            shrunk_at,
        })
    }
}

/// What kind of step differs: its op code.
fn signature(steps: &[Step], at: usize) -> String {
    steps
        .get(at)
        .map_or("end".into(), |s| format!("op {}", s.op))
}

/// Reruns of subsequences of one random sequence, each regenerated under a root of its own.
struct Subsequences<'a> {
    pair: &'a Pair,
    seed: u64,
    reruns: usize,
}

impl Subsequences<'_> {
    /// The steps at `indexes` of the seed's sequence under a fresh root, run on both.
    async fn run(
        &mut self,
        indexes: &[usize],
    ) -> (Transcript, Transcript, Option<(usize, String)>) {
        self.reruns += 1;
        let root = format!("/random-{}-{}", self.seed, self.reruns);
        let all = diff::random(self.seed, &root, RANDOM_STEPS);
        let steps: Vec<Step> = indexes.iter().map(|&i| all[i].clone()).collect();
        let (zk, zab, at) = self.pair.compare(&steps).await;
        (zk, zab, at.map(|i| (i, signature(&steps, i))))
    }
}

impl Rerun<usize> for Subsequences<'_> {
    async fn rerun(&mut self, indexes: &[usize]) -> Option<String> {
        self.run(indexes).await.2.map(|(_, signature)| signature)
    }
}

/// A difference of a random sequence and its shrunk form.
struct Found {
    at: usize,
    zk: Transcript,
    zab: Transcript,
    shrunk: shrink::Shrunk<usize>,
    shrunk_zk: Transcript,
    shrunk_zab: Transcript,
    shrunk_at: Option<(usize, String)>,
}

impl Found {
    fn report(&self, what: &str) -> String {
        let first = differential::lines_at(self.at, ("zookeeper", &self.zk), ("zab", &self.zab));
        let files = dump(what, &self.zk, &self.zab);
        let shrunk = match &self.shrunk_at {
            Some((i, _)) => differential::lines_at(
                *i,
                ("zookeeper", &self.shrunk_zk),
                ("zab", &self.shrunk_zab),
            ),
            None => "(the shrunk sequence no longer differs: timing?)".into(),
        };
        format!(
            "first difference at {first}\nshrunk to steps {:?} of the sequence in {} reruns{}; ZooKeeper's replies to them:\n  {}\nwhere it differs at {shrunk}\nwhole transcripts: {files}",
            self.shrunk.steps,
            self.shrunk.runs,
            if self.shrunk.bounded { " (bound reached)" } else { "" },
            self.shrunk_zk.join("\n  "),
        )
    }
}

/// Writes both transcripts under target/zk-differential/ (for diff(1)); returns where.
fn dump(what: &str, zk: &Transcript, zab: &Transcript) -> String {
    differential::dump("zk-differential", what, &[("zookeeper", zk), ("zab", zab)])
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
    let pair = Pair::start(32400, None).await;
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
    let pair = Pair::start(32440, None).await;
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
    let pair = Pair::start(32480, None).await;
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
    let pair = Pair::start(differential::base_port("ZK_DIFF_BASE_PORT", 32520), None).await;
    for seed in differential::seeds("ZK_DIFF_SEED", &[1, 2, 3]) {
        let started = std::time::Instant::now();
        if let Err(found) = pair.random(seed).await {
            let what = format!(
                "seed {seed} (ZK_DIFF_SEED={seed} cargo test --test zk_differential random)"
            );
            panic!(
                "{what}: zab differs from ZooKeeper\n{}",
                found.report(&what)
            );
        }
        eprintln!("seed {seed}: same replies ({:.0?})", started.elapsed());
    }
    pair.stop();
}

/// A zab whose getData answers count one child too many (`serve zab --wrong-answer
/// get-data-children`, test-only) is caught by a random sequence, and the difference
/// shrinks to the steps that create a node and read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_answer_is_caught_and_shrunk() {
    let pair = Pair::start(32406, Some("get-data-children")).await;
    let found = match pair.random(1).await {
        Ok(t) => panic!("the wrong numChildren went unseen: {t:#?}"),
        Err(found) => found,
    };
    let report = found.report("wrong answer");
    eprintln!("{report}");
    let op = found.shrunk_at.as_ref().map(|(_, s)| s.as_str());
    assert_eq!(op, Some("op 4"), "{report}");
    assert!(found.shrunk.steps.len() <= 3, "{report}");
    pair.stop();
}

/// `envi` is answered by both, in ZooKeeper's shape, and its zookeeper.version is the
/// version `srvr` reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envi_names_the_version_srvr_reports() {
    let pair = Pair::start(32560, None).await;
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
