//! Server versions as a dimension, end to end through the `coordbench` binary, on the
//! releases scripts/test.sh installs: etcd 3.6.16 and 3.7.3 (`coordbench install`, Go
//! module proxy), ZooKeeper 3.9.5 (`coordbench install`, Maven Central), and Debian's etcd
//! 3.4.23 and ZooKeeper 3.8.0.
//!
//! - `install --list` shows every one with where it came from; a second install of a cached
//!   release rebuilds nothing; releases that cannot be installed are refused in one line.
//! - `run --server-version V` starts V: run.json's cluster names V and its provenance, and
//!   summary.csv records V, on new and old releases alike, secured (`--secure`: TLS, auth)
//!   with 0 lock violations.
//! - Leader faults on the current releases lose no acknowledged write.
//! - A sweep's `server_version` axis runs each release and the report charts them in release
//!   order; an upgrade gate runs one release against another and writes gate.md.
//!
//! Clusters run one at a time: several 3-member JVM ensembles side by side on 2 cores
//! would time each other out.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");
const ETCD_CURRENT: &str = "3.6.16";
const ETCD_NEWEST: &str = "3.7.3";
const ETCD_DEBIAN: &str = "3.4.23";
const ZK_CURRENT: &str = "3.9.5";
const ZK_DEBIAN: &str = "3.8.0";
/// Start, warm-up, a window with faults, recovery, the checks and teardown, loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(240);

static ONE_CLUSTER_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

#[path = "common/output.rs"]
mod output;
use output::describe;

fn coordbench(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("coordbench runs")
}

/// Runs `coordbench run` of `version` of `target` on 3 members on tmpfs with `args` into a
/// fresh directory and returns it; the run must succeed.
fn run_release(tmp: &TempDir, target: &str, version: &str, args: &[&str]) -> PathBuf {
    let out = tmp.path().join(format!("{target}-{version}"));
    let mut argv = vec!["run", "--quiet", "--out", out.to_str().expect("utf-8")];
    argv.extend(["--target", target, "--server-version", version]);
    argv.extend(["--cluster-size", "3", "--disk", "tmpfs"]);
    argv.extend_from_slice(args);
    let (status, stderr) = common::run_coordbench(&argv, tmp.path(), RUN_BOUND);
    assert!(
        status.success(),
        "coordbench {argv:?}: {status:?}\n{stderr}"
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The installation's directory as `install --list` names it, for the release.
fn listed_location(list: &str, server: &str, version: &str) -> Option<String> {
    list.lines().find_map(|line| {
        let cols: Vec<&str> = line.trim_start_matches('*').split_whitespace().collect();
        (cols.len() >= 3 && cols[0] == server && cols[1] == version).then(|| cols[2].to_string())
    })
}

#[test]
fn installed_releases_are_listed_with_provenance_that_matches_their_files() {
    let o = coordbench(&["install", "--list"]);
    assert!(o.status.success(), "{}", describe(&o));
    let list = stdout(&o);
    for (server, version, source) in [
        (
            "etcd",
            ETCD_CURRENT,
            "coordbench install: go.etcd.io/etcd/server/v3 v3.6.16",
        ),
        (
            "etcd",
            ETCD_NEWEST,
            "coordbench install: go.etcd.io/etcd/server/v3 v3.7.3",
        ),
        ("etcd", ETCD_DEBIAN, "Debian etcd-server 3.4.23"),
        (
            "zookeeper",
            ZK_CURRENT,
            "coordbench install: org.apache.zookeeper:zookeeper 3.9.5",
        ),
        ("zookeeper", ZK_DEBIAN, "Debian zookeeper 3.8.0"),
    ] {
        let line = list
            .lines()
            .find(|l| listed_location(l, server, version).is_some())
            .unwrap_or_else(|| panic!("{server} {version} not listed:\n{list}"));
        assert!(line.contains(source), "{line}");
    }
    // The digest in provenance.json is the digest of the binary a run executes.
    let dir = PathBuf::from(listed_location(&list, "etcd", ETCD_CURRENT).expect("listed"));
    let provenance: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("provenance.json")).unwrap())
            .unwrap();
    assert_eq!(provenance["schema"], "coordbench.server-install/1");
    assert_eq!(provenance["files"][0]["path"], "bin/etcd");
    let binary = std::fs::read(dir.join("bin/etcd")).unwrap();
    let digest: String = Sha256::digest(&binary)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(provenance["files"][0]["sha256"], digest.as_str());
    assert!(provenance["toolchain"]
        .as_str()
        .unwrap()
        .starts_with("go version go1."));
}

#[test]
fn a_cached_release_installs_again_without_rebuilding() {
    let o = coordbench(&["install", "--list"]);
    let dir = PathBuf::from(listed_location(&stdout(&o), "zookeeper", ZK_CURRENT).expect("listed"));
    let before = std::fs::metadata(dir.join("provenance.json"))
        .unwrap()
        .modified()
        .unwrap();
    for (server, version) in [("etcd", ETCD_CURRENT), ("zookeeper", ZK_CURRENT)] {
        let o = coordbench(&["install", server, version]);
        assert!(o.status.success(), "{}", describe(&o));
        assert!(
            stdout(&o).contains(&format!("{server} {version} is installed: ")),
            "{}",
            describe(&o)
        );
    }
    let after = std::fs::metadata(dir.join("provenance.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "the cached ZooKeeper was installed anew");
}

#[test]
fn releases_that_cannot_be_installed_or_run_are_refused_in_one_line() {
    let cache = TempDir::new().unwrap();
    let install = |server: &str, version: &str| {
        Command::new(BIN)
            .args(["install", server, version])
            .env("COORDBENCH_CACHE_DIR", cache.path())
            .stdin(Stdio::null())
            .output()
            .expect("coordbench runs")
    };
    for (o, needle) in [
        (install("etcd", "3.4.23"), "predates etcd's Go modules"),
        (
            install("zookeeper", "3.9.6"),
            "is not served by Maven Central",
        ),
        (install("etcd", "3.6"), "write MAJOR.MINOR.PATCH"),
    ] {
        let stderr = String::from_utf8_lossy(&o.stderr);
        common::assert_refused_in_one_line(o.status.code().unwrap_or(-1), &stderr, needle, needle);
    }
    // Nothing half-built is left where a run would look.
    let servers = cache.path().join("servers");
    let left: Vec<String> = std::fs::read_dir(&servers)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(left, ["logs"], "{left:?}");

    let tmp = TempDir::new().unwrap();
    let out = tmp.path().join("out");
    let out = out.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--target", "etcd", "--server-version", "3.6.99"],
            "run `coordbench install etcd 3.6.99`",
        ),
        (
            vec!["--target", "raft", "--server-version", ETCD_CURRENT],
            "applies to --target etcd or zookeeper",
        ),
        (
            vec![
                "--target",
                "etcd",
                "--server-version",
                ETCD_CURRENT,
                "--etcd-bin",
                "/usr/bin/etcd",
            ],
            "cannot be used with",
        ),
    ] {
        let mut argv = vec![
            "run",
            "--workload",
            "lock",
            "--duration",
            "1s",
            "--out",
            out,
        ];
        argv.extend(args);
        let o = coordbench(&argv);
        let stderr = String::from_utf8_lossy(&o.stderr);
        common::assert_refused_in_one_line(o.status.code().unwrap_or(-1), &stderr, needle, needle);
    }
}

/// run.json and summary.csv name the release that ran and where it came from.
fn assert_release(out: &Path, version: &str, source: &str) {
    let record = common::run_json(out);
    assert_eq!(
        record["cluster"]["version"], version,
        "{}",
        record["cluster"]
    );
    let recorded = record["cluster"]["source"].as_str().unwrap_or_default();
    assert!(recorded.contains(source), "{recorded}");
    assert_eq!(record["config"]["server_version"], version);
    let row = common::summary_row(&out.join("summary.csv"));
    assert_eq!(row["server_version"], version);
}

#[test]
fn each_release_runs_secured_with_no_lock_violation() {
    let _serial = one_at_a_time();
    let tmp = TempDir::new().unwrap();
    for (target, version, source) in [
        ("etcd", ETCD_CURRENT, "coordbench install"),
        ("etcd", ETCD_NEWEST, "coordbench install"),
        ("etcd", ETCD_DEBIAN, "Debian etcd-server"),
        ("zookeeper", ZK_CURRENT, "coordbench install"),
        ("zookeeper", ZK_DEBIAN, "Debian zookeeper"),
    ] {
        let name = format!("{target}-{version}");
        let args = ["--secure", "--workload", "lock", "--clients", "4"];
        let out = run_release(
            &tmp,
            target,
            version,
            &[&args[..], &["--warmup", "0s", "--duration", "3s"]].concat(),
        );
        assert_release(&out, version, source);
        let row = common::summary_row(&out.join("summary.csv"));
        assert_eq!(row["violations"], "0", "{name}");
        assert!(
            row["ops"].parse::<u64>().unwrap() > 0,
            "{name}: no acquisition"
        );
        let record = common::run_json(&out);
        assert_eq!(record["config"]["secure"], true, "{name}");
    }
}

#[test]
fn leader_faults_on_current_releases_lose_no_acknowledged_write() {
    let _serial = one_at_a_time();
    let tmp = TempDir::new().unwrap();
    for (target, version) in [
        ("etcd", ETCD_CURRENT),
        ("etcd", ETCD_NEWEST),
        ("zookeeper", ZK_CURRENT),
    ] {
        let name = format!("{target}-{version}");
        let faults = ["--fault", "kill-leader,pause-leader,partition-leader"];
        let timing = ["--fault-every", "2s", "--fault-duration", "1s"];
        let window = ["--clients", "6", "--warmup", "500ms", "--duration", "8s"];
        let args = [&["--workload", "register"][..], &faults, &timing, &window].concat();
        let out = run_release(&tmp, target, version, &args);
        let record = common::run_json(&out);
        let faults = &record["faults"];
        assert!(faults["faults"].as_u64().unwrap() >= 2, "{name}: {faults}");
        assert_eq!(faults["unrecovered"], 0, "{name}: {faults}");
        assert_eq!(faults["lost_writes"]["lost"], 0, "{name}: {faults}");
        assert!(
            faults["lost_writes"]["checked"].as_u64().unwrap() > 0,
            "{name}: {faults}"
        );
        assert_eq!(faults["minority_acked_writes"], 0, "{name}: {faults}");
        // Linearizable reads are quorum reads on both APIs (ZooKeeper's: a check-only multi
        // before getData), so the history must be linearizable on every release.
        assert_eq!(
            record["results"]["register"]["linearizable"], "true",
            "{name}"
        );
    }
}

/// `coordbench sweep|gate` of a spec of 1-member etcd kv-put runs (4 clients, tmpfs, no
/// warm-up) with `repeats`, `duration` and the spec's `rest`, written into `out`.
fn spec_command(
    tmp: &TempDir,
    command: &str,
    out: &Path,
    repeats: u32,
    duration: &str,
    rest: &str,
) -> Output {
    let spec = tmp.path().join(format!("{command}.toml"));
    let text = format!(
        "name = \"{command}\"\ntargets = [\"etcd\"]\nworkload = \"kv-put\"\nrepeats = {repeats}\nwarmup = \"0s\"\nduration = \"{duration}\"\n[options]\ncluster_size = 1\nclients = 4\ndisk = \"tmpfs\"\n{rest}"
    );
    std::fs::write(&spec, text).unwrap();
    coordbench(&[
        command,
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn a_version_sweep_charts_releases_in_order_and_an_upgrade_gate_compares_two() {
    let _serial = one_at_a_time();
    let tmp = TempDir::new().unwrap();
    let versions = format!(
        "[axes]\nserver_version = [\"{ETCD_NEWEST}\", \"{ETCD_DEBIAN}\", \"{ETCD_CURRENT}\", \"zookeeper@{ZK_CURRENT}\"]\n"
    );
    let out = tmp.path().join("sweep");
    let o = spec_command(&tmp, "sweep", &out, 1, "2s", &versions);
    assert!(o.status.success(), "{}", describe(&o));
    for version in [ETCD_DEBIAN, ETCD_CURRENT, ETCD_NEWEST] {
        let dir = out.join(format!("etcd-server_version={version}-r1"));
        assert_eq!(common::run_json(&dir)["cluster"]["version"], version);
    }
    assert!(!out
        .join(format!("etcd-server_version={ZK_CURRENT}-r1"))
        .exists());
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        report.contains("Server CPU per operation by server version"),
        "{report}"
    );
    // Releases go on x in release order (report::groups' tests), their charts beside.
    let charts = out.join("charts");
    for stem in [
        "throughput-vs-server_version",
        "version-server-cpu",
        "version-server-rss",
    ] {
        assert!(charts.join(format!("{stem}.svg")).is_file(), "{stem}");
    }

    let sides = format!(
        "[baseline]\nserver_version = \"{ETCD_CURRENT}\"\n[candidate]\nserver_version = \"{ETCD_NEWEST}\"\n[thresholds]\nthroughput_ops_s = {{ max_drop = \"90%\" }}\nviolations = {{ max = 0 }}\n"
    );
    let out = tmp.path().join("gate");
    let o = spec_command(&tmp, "gate", &out, 3, "1s", &sides);
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", describe(&o));
    let md = std::fs::read_to_string(out.join("gate.md")).expect("gate.md");
    assert!(
        md.contains(&format!("- candidate: `--server-version {ETCD_NEWEST}`")),
        "{md}"
    );
    for (side, version) in [("baseline", ETCD_CURRENT), ("candidate", ETCD_NEWEST)] {
        for repeat in 1..=3 {
            let dir = out.join(side).join(format!("etcd-r{repeat}"));
            assert_eq!(
                common::run_json(&dir)["cluster"]["version"],
                version,
                "{side} r{repeat}"
            );
        }
    }
}
