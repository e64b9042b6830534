//! Sharded runs through the CLI: N `coordbench run --shard I/N` processes on this machine
//! and `coordbench merge`. On a 3-member raft cluster (real `coordbench serve raft`
//! processes the shards attach to with --endpoints) three kv-put shards meet with
//! --rendezvous, and the merge's ops are the sum of the shards', its percentiles those of
//! every shard's latency.hlog intervals added, and `report` and `compare` read it; three
//! lock shards merge with 0 violations across shards, three election shards (observers
//! split like clients) with 0 split brains; a lone shard's rendezvous times out naming the
//! missing shards. Two shards meet the same way at a zab cluster (ZooKeeper's protocol) and
//! at etcd (Debian's etcd-server; skipped without it, failed under CI). On the null target, three open-loop shards with a common
//! --start-at together keep the total --rate within 2%; merge refuses shards of different
//! runs or options. The orchestration shipped for machines this test cannot have runs its
//! own commands here: scripts/sharded-run.sh through a fake `ssh` that runs the remote
//! command locally, and deploy/kubernetes' Jobs, parsed as YAML, their containers' shell
//! commands run with the ConfigMap's variables and a completion index per shard.

mod common;
#[path = "common/output.rs"]
mod output;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::{run_json, start_target, TargetKind};
use hdrhistogram::Histogram;
use output::describe;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");
/// Bound on any one coordbench process of these tests.
const PROCESS_BOUND: Duration = Duration::from_secs(60);

/// Starts `coordbench run` with `args` for shard `index` of `count` into `out`.
fn spawn_shard(args: &[&str], index: usize, count: usize, out: &Path) -> Child {
    Command::new(BIN)
        .arg("run")
        .args(args)
        .args(["--shard", &format!("{index}/{count}"), "--quiet", "--out"])
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn coordbench run")
}

/// Waits for every child within [`PROCESS_BOUND`] (killing all and failing past it).
fn wait_all(children: Vec<Child>) -> Vec<Output> {
    let deadline = Instant::now() + PROCESS_BOUND;
    let mut children: Vec<Option<Child>> = children.into_iter().map(Some).collect();
    while children
        .iter_mut()
        .flatten()
        .any(|c| c.try_wait().expect("try_wait").is_none())
    {
        if Instant::now() >= deadline {
            for c in children.iter_mut().flatten() {
                let _ = c.kill();
            }
            panic!("a shard did not exit within {PROCESS_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    children
        .iter_mut()
        .map(|c| c.take().expect("child").wait_with_output().expect("output"))
        .collect()
}

/// Runs `count` shards of `args` at once into `root/shard-I`; asserts each exits 0.
fn run_shards(args: &[&str], count: usize, root: &Path) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = (0..count)
        .map(|i| root.join(format!("shard-{i}")))
        .collect();
    let children = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| spawn_shard(args, i, count, dir))
        .collect();
    for (i, out) in wait_all(children).iter().enumerate() {
        assert!(out.status.success(), "shard {i}: {}", describe(out));
    }
    dirs
}

/// `coordbench SUBCOMMAND ARGS...`, bounded.
fn coordbench(args: &[&str]) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn coordbench");
    wait_all(vec![child]).pop().expect("one output")
}

fn merge(dirs: &[PathBuf], out: &Path) -> Output {
    let mut args = vec!["merge".to_string()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args.extend(["--out".into(), out.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    coordbench(&refs)
}

/// Runs `count` shards into `root/shard-I` and merges them into `root/merged`.
fn run_and_merge(args: &[&str], count: usize, root: &Path) -> (Vec<PathBuf>, PathBuf) {
    let shards = run_shards(args, count, root);
    let merged = root.join("merged");
    let out = merge(&shards, &merged);
    assert!(out.status.success(), "merge: {}", describe(&out));
    (shards, merged)
}

fn results_u64(run: &serde_json::Value, path: &[&str]) -> u64 {
    let mut v = &run["results"];
    for p in path {
        v = &v[*p];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("results.{} in {run}", path.join(".")))
}

/// A results figure summed over the shards' run.json.
fn shards_sum(dirs: &[PathBuf], path: &[&str]) -> u64 {
    dirs.iter().map(|d| results_u64(&run_json(d), path)).sum()
}

/// Every shard's latency.hlog intervals added into one histogram.
fn all_intervals(dirs: &[PathBuf]) -> Histogram<u64> {
    let mut all = coordbench_workloads::histogram::latency_histogram();
    for d in dirs {
        coordbench_analysis::report::cdf::merge_log(&d.join("latency.hlog"), &mut all)
            .expect("hlog");
    }
    all
}

/// The merged run's ops are the shards' summed, its percentiles those of all their
/// intervals.
fn check_exact_merge(shards: &[PathBuf], merged: &Path) {
    let run = run_json(merged);
    let shard_ops: u64 = shards_sum(shards, &["ops"]);
    assert!(shard_ops > 0, "the shards measured nothing");
    assert_eq!(results_u64(&run, &["ops"]), shard_ops);
    let all = all_intervals(shards);
    assert_eq!(results_u64(&run, &["latency", "count"]), all.len());
    for (field, q) in [("p50_us", 0.5), ("p99_us", 0.99), ("p999_us", 0.999)] {
        assert_eq!(
            results_u64(&run, &["latency", field]),
            all.value_at_quantile(q),
            "{field}"
        );
    }
    assert_eq!(results_u64(&run, &["latency", "max_us"]), all.max());
    assert_eq!(run["complete"], true, "{run}");
}

/// `coordbench report` and `compare` take a merged directory as an ordinary run directory.
fn check_readers_accept(merged: &Path) {
    let report = coordbench(&["report", &merged.display().to_string()]);
    assert!(report.status.success(), "report: {}", describe(&report));
    let dir = merged.display().to_string();
    let compare = coordbench(&["compare", &dir, &dir]);
    assert!(compare.status.success(), "compare: {}", describe(&compare));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_raft_shards_meet_at_the_target_and_merge_exactly() {
    let target = start_target(TargetKind::Raft, 3).await;
    let endpoints = target.endpoints().join(",");
    let root = tempfile::tempdir().expect("tempdir");
    let common = [
        "--target",
        "raft",
        "--endpoints",
        &endpoints,
        "--rendezvous",
        "--rendezvous-timeout",
        "30s",
        "--duration",
        "1500ms",
        "--warmup",
        "300ms",
    ];

    let kv_args = [
        &common[..],
        &["--workload", "kv-put", "--clients", "9"],
        &["--run-id", "kv"],
    ]
    .concat();
    let (kv, kv_merged) = run_and_merge(&kv_args, 3, &root.path().join("kv"));
    check_exact_merge(&kv, &kv_merged);
    check_readers_accept(&kv_merged);
    let shards = &run_json(&kv_merged)["shards"];
    assert_eq!(shards["count"], 3);
    assert_eq!(run_json(&kv_merged)["config"]["clients"], 9);
    let skew = shards["start_skew_ms"].as_f64().expect("start skew");
    assert!((0.0..30_000.0).contains(&skew), "start skew {skew} ms");

    let lock_args = [
        &common[..],
        &[
            "--workload",
            "lock",
            "--clients",
            "6",
            "--locks",
            "2",
            "--hold",
            "2ms",
        ],
        &["--run-id", "lock"],
    ]
    .concat();
    let (locks, lock_merged) = run_and_merge(&lock_args, 3, &root.path().join("lock"));
    let run = run_json(&lock_merged);
    let shard_sections: u64 = shards_sum(&locks, &["lock", "sections"]);
    assert!(shard_sections > 0);
    assert_eq!(results_u64(&run, &["lock", "sections"]), shard_sections);
    assert_eq!(results_u64(&run, &["violations"]), 0, "{run}");
    assert_eq!(results_u64(&run, &["lock", "token_regressions"]), 0);
    assert!(run["shards"]["clock_uncertainty_ms"].as_f64().is_some());

    let election_args = [
        &common[..],
        &[
            "--workload",
            "election",
            "--clients",
            "6",
            "--watchers",
            "3",
        ],
        &["--term", "20ms", "--run-id", "election"],
    ]
    .concat();
    let (elections, election_merged) =
        run_and_merge(&election_args, 3, &root.path().join("election"));
    let run = run_json(&election_merged);
    let shard_terms: u64 = shards_sum(&elections, &["election", "terms"]);
    assert!(shard_terms > 0);
    assert_eq!(results_u64(&run, &["election", "terms"]), shard_terms);
    assert_eq!(results_u64(&run, &["election", "split_brains"]), 0, "{run}");
    assert_eq!(results_u64(&run, &["election", "observers"]), 3);
    // Every shard's observer saw leaders of every shard; the merge times them all.
    let shard_notified: u64 = shards_sum(&elections, &["election", "observer_notifications"]);
    assert!(results_u64(&run, &["election", "observer_notifications"]) >= shard_notified);

    // A shard alone waits for the others until its timeout, then names them.
    let lone = coordbench(
        &[
            &["run"],
            &common[..5],
            &[
                "--rendezvous-timeout",
                "1s",
                "--workload",
                "kv-put",
                "--clients",
                "3",
            ],
            &["--run-id", "lone", "--shard", "1/3", "--quiet", "--out"],
            &[&root.path().join("lone").display().to_string()[..]],
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&lone.stderr);
    assert_eq!(lone.status.code(), Some(2), "{}", describe(&lone));
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("shard(s) 0, 2 of 3"), "{stderr}");
    target.stop();
}

/// Two kv-put shards meet at a `kind` cluster through its own protocol and merge.
async fn two_shards_meet_at(kind: TargetKind) {
    let target = start_target(kind, 3).await;
    let endpoints = target.endpoints().join(",");
    let root = tempfile::tempdir().expect("tempdir");
    let args = [
        "--target",
        kind.name(),
        "--endpoints",
        &endpoints,
        "--rendezvous",
        "--workload",
        "kv-put",
        "--clients",
        "4",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--run-id",
        "meet",
    ];
    let (shards, merged) = run_and_merge(&args, 2, root.path());
    check_exact_merge(&shards, &merged);
    for shard in &shards {
        assert_eq!(run_json(shard)["shard"]["start"], "rendezvous");
    }
    target.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_meet_through_zookeepers_protocol_on_zab() {
    two_shards_meet_at(TargetKind::Zab).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_meet_at_etcd() {
    if coordbench_sim::tools::installed("/usr/bin/etcd") {
        two_shards_meet_at(TargetKind::Etcd).await;
    }
}

/// A wall-clock start a little ahead, as an orchestrator would set it.
fn start_at(ahead: Duration) -> String {
    humantime::format_rfc3339_millis(SystemTime::now() + ahead).to_string()
}

#[test]
fn open_loop_shards_keep_the_total_rate_and_merge_refuses_strangers() {
    const RATE: f64 = 3000.0;
    let root = tempfile::tempdir().expect("tempdir");
    // Ahead enough for three debug builds to start on a loaded 2-core machine.
    let at = start_at(Duration::from_secs(5));
    let args = [
        "--target",
        "null",
        "--workload",
        "kv-put",
        "--clients",
        "6",
        "--rate",
        "3000",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--run-id",
        "open",
        "--start-at",
        &at,
    ];
    let (shards, merged) = run_and_merge(&args, 3, &root.path().join("open"));
    check_exact_merge(&shards, &merged);
    let run = run_json(&merged);
    let throughput = run["results"]["throughput_ops_s"]
        .as_f64()
        .expect("throughput");
    assert!(
        (throughput - RATE).abs() <= RATE * 0.02,
        "merged throughput {throughput} ops/s, asked for {RATE} in total; shards: {}",
        run["shards"]
    );
    assert_eq!(run["config"]["rate"], RATE);

    // Another run's shard, and a shard of this run with other options.
    let other_run = [&args[..12], &["--run-id", "other"]].concat();
    let stranger = run_shards(&other_run, 1, &root.path().join("stranger"));
    let other_options = [&args[..5], &["7"], &args[6..]].concat();
    let changed = root.path().join("changed");
    let out = wait_all(vec![spawn_shard(&other_options, 2, 3, &changed)]);
    assert!(out[0].status.success(), "{}", describe(&out[0]));
    for (dirs, says) in [
        (
            vec![shards[0].clone(), shards[1].clone(), stranger[0].clone()],
            "run id open vs other",
        ),
        (
            vec![shards[0].clone(), shards[1].clone(), changed],
            "options differ in clients (6 vs 7)",
        ),
        (shards[..2].to_vec(), "shard(s) 2 missing"),
    ] {
        let out = merge(&dirs, &root.path().join("refused"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    assert!(!root.path().join("refused").join("run.json").exists());
}

/// `null` run options for the orchestration tests: 3 clients, open loop, 1 s, starting
/// together at a wall-clock time shortly ahead.
fn null_run_options() -> Vec<String> {
    let at = start_at(Duration::from_secs(3));
    [
        "--target",
        "null",
        "--workload",
        "kv-put",
        "--clients",
        "3",
        "--rate",
        "600",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--start-at",
        &at,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A directory holding `coordbench` (this build) and a fake `ssh HOST COMMAND` that runs
/// COMMAND here with bash (as a login shell on the host would) and notes the host.
fn fake_host_tools(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    std::os::unix::fs::symlink(BIN, bin.join("coordbench")).expect("symlink coordbench");
    let ssh = bin.join("ssh");
    std::fs::write(
        &ssh,
        "#!/bin/sh\nhost=$1; shift\nprintf '%s %s\\n' \"$host\" \"$*\" >> \"$FAKE_SSH_LOG\"\nexec bash -c \"$*\"\n",
    )
    .expect("fake ssh");
    let mut perms = std::fs::metadata(&ssh).expect("ssh").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&ssh, perms).expect("chmod ssh");
    bin
}

fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn sharded_run_script_runs_a_shard_per_host_over_ssh_and_merges() {
    let root = tempfile::tempdir().expect("tempdir");
    let bin = fake_host_tools(root.path());
    let log = root.path().join("ssh.log");
    let out = root.path().join("out");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sharded-run.sh");
    let child = Command::new("bash")
        .arg(script)
        .args(["--remote-dir"])
        .arg(root.path().join("remote"))
        .arg("--out")
        .arg(&out)
        .args(["--run-id", "over-ssh", "host-a", "host-b", "host-c", "--"])
        .args(null_run_options())
        .env("PATH", path_with(&bin))
        .env("FAKE_SSH_LOG", &log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sharded-run.sh");
    let done = wait_all(vec![child]).pop().expect("output");
    assert!(done.status.success(), "sharded-run.sh: {}", describe(&done));
    let calls = std::fs::read_to_string(&log).expect("ssh log");
    for (i, host) in ["host-a", "host-b", "host-c"].iter().enumerate() {
        let runs: Vec<&str> = calls
            .lines()
            .filter(|l| l.starts_with(host) && l.contains(" run "))
            .collect();
        assert_eq!(runs.len(), 1, "{calls}");
        assert!(
            runs[0].contains(&format!("--shard {i}/3 --run-id over-ssh")),
            "{calls}"
        );
    }
    let run = run_json(&out.join("merged"));
    assert_eq!(run["shards"]["count"], 3, "{run}");
    assert_eq!(run["shards"]["run_id"], "over-ssh");
    let shards: Vec<PathBuf> = (0..3).map(|i| out.join(format!("shard-{i}"))).collect();
    check_exact_merge(&shards, &out.join("merged"));
}

/// The documents of a YAML file, as JSON (through Debian's python3-yaml).
fn yaml_documents(path: &str) -> Option<Vec<serde_json::Value>> {
    if !coordbench_sim::tools::installed("/usr/lib/python3/dist-packages/yaml") {
        return None;
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
            path,
        ])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{path} does not parse: {}",
        describe(&out)
    );
    Some(serde_json::from_slice(&out.stdout).expect("json"))
}

fn of_kind<'a>(docs: &'a [serde_json::Value], kind: &str) -> &'a serde_json::Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {docs:?}"))
}

/// The `sh -c` script of a Job's one container.
fn job_script(job: &serde_json::Value) -> String {
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], serde_json::json!(["/bin/sh", "-c"]));
    container["args"][0].as_str().expect("script").to_string()
}

#[test]
fn kubernetes_jobs_parse_and_their_commands_run_here() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes/");
    let (Some(shards_docs), Some(merge_docs)) = (
        yaml_documents(&format!("{dir}shards-job.yaml")),
        yaml_documents(&format!("{dir}merge-job.yaml")),
    ) else {
        return;
    };
    let config = &of_kind(&shards_docs, "ConfigMap")["data"];
    let count: usize = config["SHARDS"]
        .as_str()
        .expect("SHARDS")
        .parse()
        .expect("a number");
    let job = of_kind(&shards_docs, "Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], count);
    assert_eq!(job["spec"]["parallelism"], count);

    let root = tempfile::tempdir().expect("tempdir");
    let bin = fake_host_tools(root.path());
    let env = [
        ("RUN_ID", "k8s".to_string()),
        ("SHARDS", count.to_string()),
        ("RUN_OPTIONS", null_run_options().join(" ")),
        ("RESULTS", root.path().display().to_string()),
        ("PATH", path_with(&bin)),
    ];
    let pod = |script: &str, index: Option<usize>| {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script])
            .envs(env.iter().map(|(k, v)| (*k, v)));
        if let Some(i) = index {
            c.env("JOB_COMPLETION_INDEX", i.to_string());
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().expect("spawn pod command")
    };
    let shard_script = job_script(job);
    for (i, out) in wait_all((0..count).map(|i| pod(&shard_script, Some(i))).collect())
        .iter()
        .enumerate()
    {
        assert!(out.status.success(), "pod {i}: {}", describe(out));
    }
    let merge_script = job_script(of_kind(&merge_docs, "Job"));
    let merged = wait_all(vec![pod(&merge_script, None)])
        .pop()
        .expect("output");
    assert!(merged.status.success(), "merge pod: {}", describe(&merged));
    let run_dir = root.path().join("k8s");
    let shards: Vec<PathBuf> = (0..count)
        .map(|i| run_dir.join(format!("shard-{i}")))
        .collect();
    check_exact_merge(&shards, &run_dir.join("merged"));
}
