//! End-to-end tests of the `coordbench` binary: bad input exits 2 with one line on stderr
//! (unknown values, invalid durations and rates, a recipe of another target, a missing
//! etcd binary, an unreachable --endpoints, a taken --base-port); --help and --version;
//! a null-target open-loop run and the result files it writes; lock runs on a 3-member
//! etcd cluster with both recipes; and SIGINT / SIGTERM during a run: exit 130, results
//! written as incomplete, no etcd process left behind; runs on the default target, a
//! 3-member raft cluster of `coordbench serve raft` processes (lock, and kv-put with 64
//! clients), and `serve raft` refusing bad arguments. Servers run on 127.0.0.1 only.

mod common;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{assert_gone, closed_port};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");

/// A finished command: exit status, output, and how long it took.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Finished {
    fn describe(&self) -> String {
        format!(
            "status {:?}, stdout:\n{}\nstderr:\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// A running coordbench whose stdout and stderr go to files. Killed (with its members,
/// which die with it) if the test gives up on it.
struct Running {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    started: Instant,
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `bound` for the process to exit; panics (killing it) if it does not.
    fn wait(mut self, bound: Duration) -> Finished {
        let deadline = Instant::now() + bound;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "coordbench did not exit within {bound:?}; stderr:\n{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Finished {
            status,
            stdout: std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.stderr).unwrap_or_default(),
            elapsed: self.started.elapsed(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts `coordbench args...` in `dir` (its working directory, which also receives the
/// output files), so a stray default results directory cannot land in the repository.
fn spawn(dir: &Path, args: &[&str]) -> Running {
    let n = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    let stdout = dir.join(format!("stdout-{n}.txt"));
    let stderr = dir.join(format!("stderr-{n}.txt"));
    let child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).expect("stdout file"))
        .stderr(File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("spawn coordbench");
    Running {
        child,
        stdout,
        stderr,
        started: Instant::now(),
    }
}

fn run(dir: &Path, args: &[&str], bound: Duration) -> Finished {
    spawn(dir, args).wait(bound)
}

fn tempdir() -> TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Rows of a CSV file, each as column name -> value.
fn read_csv(path: &Path) -> Vec<HashMap<String, String>> {
    let mut reader =
        csv::Reader::from_path(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let headers = reader.headers().expect("csv header").clone();
    reader
        .records()
        .map(|r| {
            let r = r.expect("csv record");
            headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn num(row: &HashMap<String, String>, column: &str) -> f64 {
    let v = row
        .get(column)
        .unwrap_or_else(|| panic!("no column {column}"));
    v.parse()
        .unwrap_or_else(|_| panic!("{column} = {v:?} is not a number"))
}

fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Pids of the cluster members a run recorded in run.json.
fn member_pids(run_json: &serde_json::Value) -> Vec<u32> {
    let members = run_json["cluster"]["members"]
        .as_array()
        .expect("cluster.members");
    members
        .iter()
        .map(|m| m["pid"].as_u64().expect("member pid") as u32)
        .collect()
}

fn assert_no_panic(f: &Finished) {
    for text in [&f.stdout, &f.stderr] {
        assert!(
            !text.contains("panicked") && !text.contains("RUST_BACKTRACE"),
            "{}",
            f.describe()
        );
    }
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempdir();
    let out = |name: &str| dir.path().join(name).to_str().expect("utf-8").to_string();
    let closed = format!("127.0.0.1:{}", closed_port());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken_port = taken.local_addr().expect("addr").port().to_string();
    let (out_bin, out_closed, out_taken) = (out("bin"), out("closed"), out("taken"));

    // (arguments after `run`, text the one line must contain)
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--target", "nosuch"], "nosuch"),
        (vec!["--workload", "nosuch"], "nosuch"),
        (vec!["--duration", "abc"], "abc"),
        (vec!["--duration", "0s"], "0s"),
        (vec!["--rate", "-5"], "-5"),
        (vec!["--rate=-5"], "-5"),
        (vec!["--rate", "0"], "--rate"),
        (vec!["--clients", "0"], "--clients"),
        (vec!["--client-threads", "0"], "--client-threads"),
        (vec!["--session-opens", "0"], "--session-opens"),
        (vec!["--recipe", "zk-recipe"], "zk-recipe"),
        (vec!["--workload", "kv-mixed", "--read-ratio", "1.5"], "1.5"),
        (
            vec!["--workload", "kv-mixed", "--read-ratio", "x"],
            "--read-ratio",
        ),
        (vec!["--read-ratio", "0.5"], "--read-ratio"),
        (vec!["--election-timeout", "300-150"], "MIN is above MAX"),
        (vec!["--election-timeout", "0-150"], "0-150"),
        (vec!["--election-timeout", "150ms"], "150ms"),
        (vec!["--heartbeat", "0s"], "--heartbeat"),
        (
            vec!["--election-timeout", "150-300", "--heartbeat", "200ms"],
            "--heartbeat",
        ),
        (
            vec![
                "--target",
                "etcd",
                "--election-timeout",
                "100-200",
                "--heartbeat",
                "50ms",
            ],
            "5 heartbeats",
        ),
        (
            vec!["--target", "null", "--heartbeat", "10ms"],
            "--heartbeat",
        ),
        (
            vec![
                "--target",
                "etcd",
                "--etcd-bin",
                "/nonexistent/etcd",
                "--out",
                &out_bin,
            ],
            "/nonexistent/etcd",
        ),
        (
            vec![
                "--target",
                "etcd",
                "--endpoints",
                &closed,
                "--out",
                &out_closed,
            ],
            &closed,
        ),
        (
            vec![
                "--target",
                "etcd",
                "--disk",
                "tmpfs",
                "--base-port",
                &taken_port,
                "--out",
                &out_taken,
            ],
            &taken_port,
        ),
    ];
    for (args, mentions) in cases {
        let mut argv = vec!["run"];
        argv.extend_from_slice(&args);
        let f = run(dir.path(), &argv, Duration::from_secs(30));
        let what = format!("coordbench {}: {}", argv.join(" "), f.describe());
        assert_eq!(f.status.code(), Some(2), "{what}");
        assert!(
            f.elapsed < Duration::from_secs(15),
            "took {:?}: {what}",
            f.elapsed
        );
        assert_no_panic(&f);
        assert_eq!(
            f.stderr.lines().count(),
            1,
            "not exactly one line on stderr: {what}"
        );
        assert!(f.stderr.ends_with('\n'), "{what}");
        assert!(f.stderr.starts_with("error: "), "{what}");
        assert!(
            f.stderr.contains(mentions),
            "the error does not mention {mentions:?}: {what}"
        );
        assert!(f.stdout.is_empty(), "{what}");
    }
    drop(taken);
    // Nothing was written into the working directory but the captured output.
    let stray: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !n.starts_with("stdout-")
                && !n.starts_with("stderr-")
                && !["bin", "closed", "taken"].contains(&n.as_str())
        })
        .collect();
    assert!(stray.is_empty(), "unexpected files: {stray:?}");
}

#[test]
fn help_and_version() {
    let dir = tempdir();
    let help = run(dir.path(), &["run", "--help"], Duration::from_secs(10));
    assert_eq!(help.status.code(), Some(0), "{}", help.describe());
    for option in ["--target", "--workload", "--duration", "--recipe", "--out"] {
        assert!(
            help.stdout.contains(option),
            "run --help lacks {option}: {}",
            help.describe()
        );
    }
    let version = run(dir.path(), &["--version"], Duration::from_secs(10));
    assert_eq!(version.status.code(), Some(0), "{}", version.describe());
    assert!(
        version
            .stdout
            .starts_with(&format!("coordbench {}", env!("CARGO_PKG_VERSION"))),
        "{}",
        version.describe()
    );
    assert_eq!(version.stdout.lines().count(), 1, "{}", version.describe());
}

#[test]
fn null_open_loop_run_writes_every_result_file() {
    let dir = tempdir();
    let out = dir.path().join("out");
    let f = run(
        dir.path(),
        &[
            "run",
            "--target",
            "null",
            "--workload",
            "kv-put",
            "--rate",
            "20000",
            "--duration",
            "2s",
            "--warmup",
            "0s",
            "--out",
            path_str(&out),
            "--quiet",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(f.status.code(), Some(0), "{}", f.describe());
    assert_no_panic(&f);

    let rows = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 1, "summary.csv rows: {rows:?}");
    let row = &rows[0];
    let throughput = num(row, "throughput_ops_s");
    assert!(
        (throughput - 20000.0).abs() <= 0.05 * 20000.0,
        "throughput {throughput} is not within 5% of 20000"
    );
    assert_eq!(row["target"], "null");
    assert_eq!(row["mode"], "open");
    assert_eq!(row["complete"], "true");
    assert!(num(row, "p50_us") <= num(row, "p99_us"));
    // The generator accounts for itself, and for its schedule.
    assert!(num(row, "client_cpu_us_per_op") > 0.0, "{row:?}");
    let util = num(row, "client_cpu_util");
    assert!(util > 0.0 && util <= 1.0, "{row:?}");
    assert!(num(row, "client_peak_rss_mb") > 0.0, "{row:?}");
    assert!(num(row, "schedule_lag_p50_us") <= num(row, "schedule_lag_p99_us"));
    assert!(num(row, "schedule_lag_p99_us") <= num(row, "schedule_lag_max_us"));
    assert!(
        num(row, "schedule_lag_max_us") <= num(row, "max_us"),
        "{row:?}"
    );
    assert!(num(row, "schedule_dropped") <= 0.05 * 40000.0, "{row:?}");

    let record = read_json(&out.join("run.json"));
    assert_eq!(record["complete"], true, "{record:#}");
    assert_eq!(record["end_reason"], "completed");
    assert_eq!(record["config"]["target"], "null");
    let cpu = record["environment"]["cpu_model"]
        .as_str()
        .expect("environment.cpu_model");
    assert!(!cpu.is_empty());
    assert!(record["results"]["ops"].as_u64().expect("results.ops") > 0);

    let intervals = read_csv(&out.join("timeseries.csv"));
    assert_eq!(intervals.len(), 2, "timeseries.csv rows: {intervals:?}");
    assert_eq!(intervals[0]["second"], "0");
    assert_eq!(intervals[1]["second"], "1");
    let hlog = std::fs::metadata(out.join("latency.hlog")).expect("latency.hlog");
    assert!(hlog.len() > 0, "latency.hlog is empty");
}

/// `--realtime` takes the real-time priority where the process may (root, CAP_SYS_NICE)
/// and says so in run.json; where it may not, one warning and the run goes on.
#[test]
fn realtime_generator_is_recorded_or_refused_with_a_warning() {
    let dir = tempdir();
    let out = dir.path().join("out");
    let args = [
        "run",
        "--target",
        "null",
        "--workload",
        "kv-put",
        "--rate",
        "5000",
    ];
    let tail = [
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--realtime",
        "--pin-client",
        "0",
        "--quiet",
    ];
    let mut all: Vec<&str> = args.iter().chain(&tail).copied().collect();
    all.extend(["--out", path_str(&out)]);
    let f = run(dir.path(), &all, Duration::from_secs(30));
    assert_eq!(f.status.code(), Some(0), "{}", f.describe());
    let record = read_json(&out.join("run.json"));
    // SAFETY: a valid sched_param for the calling (test) thread: a probe of whether this
    // process may take a real-time priority.
    let permitted = unsafe {
        let param = libc::sched_param { sched_priority: 1 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
    };
    if permitted {
        // Back to normal for the rest of this test binary's threads.
        let param = libc::sched_param { sched_priority: 0 };
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
        assert_eq!(record["generator"]["realtime"], true, "{record:#}");
    } else {
        assert_eq!(record["generator"]["realtime"], false, "{record:#}");
        assert!(f.stderr.contains("warning: --realtime"), "{}", f.describe());
    }
}

/// A closed loop on the null target never waits: pinned to one core, the generator uses all
/// of it (or waits for it), so the run must call itself saturated and say so.
#[test]
fn a_generator_pinned_to_a_busy_core_reports_saturation() {
    saturated_on_one_core(&["--pin-client", "0"]);
}

#[test]
fn a_generator_on_one_runtime_worker_reports_saturation_of_one_core() {
    saturated_on_one_core(&["--client-threads", "1"]);
}

/// A closed-loop null run (always busy) limited to one core by `limit` must say it was
/// saturated and count one core.
fn saturated_on_one_core(limit: &[&str]) {
    let dir = tempdir();
    let out = dir.path().join("out");
    let mut args = vec![
        "run",
        "--target",
        "null",
        "--workload",
        "kv-put",
        "--clients",
        "4",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--out",
        path_str(&out),
        "--quiet",
    ];
    args.extend_from_slice(limit);
    let f = run(dir.path(), &args, Duration::from_secs(30));
    assert_eq!(f.status.code(), Some(0), "{}", f.describe());
    assert!(
        f.stderr
            .contains("warning: the load generator was saturated"),
        "{}",
        f.describe()
    );
    let rows = read_csv(&out.join("summary.csv"));
    assert_eq!(rows[0]["generator_saturated"], "true", "{:?}", rows[0]);
    assert!(
        num(&rows[0], "generator_saturated_s") > 0.0,
        "{:?}",
        rows[0]
    );
    assert!(
        rows[0]["schedule_lag_p99_us"].is_empty(),
        "closed loop has no schedule"
    );
    let record = read_json(&out.join("run.json"));
    assert_eq!(record["generator_saturated"], true, "{record:#}");
    assert_eq!(record["generator"]["cores"], 1, "{record:#}");
}

/// A 3 s lock run with 16 clients on one lock, on a 3-member etcd cluster on tmpfs.
fn etcd_lock_run(recipe: Option<&str>) {
    let dir = tempdir();
    let out = dir.path().join("out");
    let mut args = vec![
        "run",
        "--target",
        "etcd",
        "--cluster-size",
        "3",
        "--workload",
        "lock",
        "--clients",
        "16",
        "--locks",
        "1",
        "--duration",
        "3s",
        "--warmup",
        "0s",
        "--disk",
        "tmpfs",
        "--out",
        path_str(&out),
        "--quiet",
    ];
    if let Some(recipe) = recipe {
        args.extend_from_slice(&["--recipe", recipe]);
    }
    let f = run(dir.path(), &args, Duration::from_secs(60));
    assert_eq!(f.status.code(), Some(0), "{}", f.describe());
    assert_no_panic(&f);

    let rows = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 1, "summary.csv rows: {rows:?}");
    let row = &rows[0];
    assert_eq!(row["recipe"], recipe.unwrap_or("etcd-mutex"));
    assert_eq!(row["cluster_size"], "3");
    assert!(num(row, "throughput_ops_s") > 0.0, "{row:?}");
    let (p50, p99) = (num(row, "p50_us"), num(row, "p99_us"));
    assert!(p50 > 0.0 && p99 >= p50, "p50 {p50}, p99 {p99}");
    assert_eq!(num(row, "violations"), 0.0, "{row:?}");
    assert_eq!(row["complete"], "true");

    let record = read_json(&out.join("run.json"));
    assert_eq!(record["complete"], true);
    assert_eq!(record["results"]["lock"]["token_regressions"], 0);
    assert!(
        record["results"]["lock"]["sections"]
            .as_u64()
            .expect("sections")
            > 0
    );
    let pids = member_pids(&record);
    assert_eq!(pids.len(), 3);
    assert_gone(&pids);
}

#[test]
fn etcd_lock_run_with_etcd_mutex() {
    etcd_lock_run(None);
}

#[test]
fn etcd_lock_run_with_naive_recipe() {
    etcd_lock_run(Some("naive"));
}

/// Child processes of `parent` named etcd, with their client URL.
fn etcd_children(parent: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(parent) || !head.ends_with("(etcd") {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let url = String::from_utf8_lossy(&cmdline)
            .split('\0')
            .find_map(|a| a.strip_prefix("--listen-client-urls=").map(str::to_string));
        if let Some(url) = url {
            found.push((pid, url));
        }
    }
    found
}

/// Live processes started by the coordbench with pid `coordbench` as etcd members: their
/// command line carries the cluster token `coordbench-<pid>-...`, whoever their parent is now.
fn etcd_started_by(coordbench: u32) -> Vec<u32> {
    let token = format!("--initial-cluster-token=coordbench-{coordbench}-");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .split('\0')
                    .any(|a| a.starts_with(&token))
            })
        })
        .collect()
}

/// Waits until the run's kv-put setup has written all `keys` keys (so the run is past
/// setup), by asking one of its etcd members.
fn wait_for_setup(coordbench: u32, keys: i64, bound: Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let deadline = Instant::now() + bound;
    loop {
        assert!(
            Instant::now() < deadline,
            "the run did not finish its setup within {bound:?}"
        );
        let members = etcd_children(coordbench);
        if members.len() == 3 {
            let count = rt.block_on(async {
                let options = etcd_client::ConnectOptions::new()
                    .with_connect_timeout(Duration::from_secs(1))
                    .with_timeout(Duration::from_secs(1));
                let mut client =
                    etcd_client::Client::connect([members[0].1.as_str()], Some(options))
                        .await
                        .ok()?;
                let get = etcd_client::GetOptions::new()
                    .with_prefix()
                    .with_count_only();
                client
                    .get("/coordbench/kv/", Some(get))
                    .await
                    .ok()
                    .map(|r| r.count())
            });
            if count == Some(keys) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts a kv-put run on a 3-member etcd cluster, waits until it measures, sends `signal`,
/// and checks the exit code, the incomplete results and that no member survives.
fn interrupted_run(signal: libc::c_int, duration: &str) {
    let dir = tempdir();
    let out = dir.path().join("out");
    let running = spawn(
        dir.path(),
        &[
            "run",
            "--target",
            "etcd",
            "--cluster-size",
            "3",
            "--workload",
            "kv-put",
            "--duration",
            duration,
            "--disk",
            "tmpfs",
            "--out",
            path_str(&out),
            "--quiet",
        ],
    );
    let coordbench = running.pid();
    wait_for_setup(coordbench, 1000, Duration::from_secs(30));
    let members: Vec<u32> = etcd_children(running.pid())
        .into_iter()
        .map(|(pid, _)| pid)
        .collect();
    // One second of warm-up (the default), then about two measured.
    std::thread::sleep(Duration::from_secs(3));

    // SAFETY: signalling our own child, which has not been reaped yet.
    assert_eq!(
        unsafe { libc::kill(running.pid() as libc::pid_t, signal) },
        0
    );
    let signalled = Instant::now();
    let f = running.wait(Duration::from_secs(20));
    let took = signalled.elapsed();
    assert_eq!(f.status.code(), Some(130), "{}", f.describe());
    eprintln!("signal {signal}: coordbench exited {took:?} after it");
    assert!(
        took <= Duration::from_secs(10),
        "exited {took:?} after the signal"
    );
    assert_no_panic(&f);

    let record = read_json(&out.join("run.json"));
    assert_eq!(record["complete"], false, "{record:#}");
    assert_eq!(record["end_reason"], "interrupted", "{record:#}");
    assert!(
        record["results"]["ops"].as_u64().expect("results.ops") > 0,
        "{record:#}"
    );
    let rows = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["complete"], "false");
    assert!(num(&rows[0], "ops") > 0.0);

    let mut pids = member_pids(&record);
    pids.sort_unstable();
    let mut seen = members.clone();
    seen.sort_unstable();
    assert_eq!(
        pids, seen,
        "run.json names other members than the ones that ran"
    );
    assert_gone(&pids);
    assert_eq!(
        etcd_started_by(coordbench),
        Vec::<u32>::new(),
        "etcd members outlived coordbench"
    );
}

#[test]
fn sigint_ends_a_run_with_incomplete_results_and_no_member_left() {
    interrupted_run(libc::SIGINT, "60s");
}

#[test]
fn sigterm_ends_a_run_with_incomplete_results_and_no_member_left() {
    interrupted_run(libc::SIGTERM, "30s");
}

#[test]
fn sigint_while_the_cluster_starts_exits_130_and_stops_what_started() {
    let dir = tempdir();
    let out = dir.path().join("out");
    let running = spawn(
        dir.path(),
        &[
            "run",
            "--target",
            "etcd",
            "--cluster-size",
            "3",
            "--workload",
            "kv-put",
            "--duration",
            "30s",
            "--disk",
            "tmpfs",
            "--out",
            path_str(&out),
            "--quiet",
        ],
    );
    let coordbench = running.pid();
    // Signal as soon as the first member runs: the launcher is still waiting for a leader.
    let deadline = Instant::now() + Duration::from_secs(15);
    let members = loop {
        let members = etcd_children(coordbench);
        if !members.is_empty() {
            break members;
        }
        assert!(
            Instant::now() < deadline,
            "no etcd member started within 15 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    // SAFETY: signalling our own child, which has not been reaped yet.
    assert_eq!(
        unsafe { libc::kill(coordbench as libc::pid_t, libc::SIGINT) },
        0
    );
    let signalled = Instant::now();
    let f = running.wait(Duration::from_secs(20));
    assert_eq!(f.status.code(), Some(130), "{}", f.describe());
    assert!(
        signalled.elapsed() <= Duration::from_secs(10),
        "exited {:?} after the signal",
        signalled.elapsed()
    );
    assert_no_panic(&f);
    assert!(f.stderr.is_empty(), "{}", f.describe());

    let record = read_json(&out.join("run.json"));
    assert_eq!(record["complete"], false, "{record:#}");
    assert_eq!(record["end_reason"], "interrupted", "{record:#}");
    let pids: Vec<u32> = members.into_iter().map(|(pid, _)| pid).collect();
    assert_gone(&pids);
    assert_eq!(
        etcd_started_by(coordbench),
        Vec::<u32>::new(),
        "etcd members outlived coordbench"
    );
}

/// Runs `coordbench run args...` against a started raft cluster on tmpfs; asserts exit 0,
/// one complete summary row for a 3-member raft cluster with 0 errors and throughput > 0,
/// and that no member outlived the run. Returns the row and run.json.
fn raft_run(args: &[&str], bound: Duration) -> (HashMap<String, String>, serde_json::Value) {
    let dir = tempdir();
    let out = dir.path().join("out");
    let mut argv = vec!["run"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--disk", "tmpfs", "--out", path_str(&out), "--quiet"]);
    let f = run(dir.path(), &argv, bound);
    assert_eq!(f.status.code(), Some(0), "{}", f.describe());
    assert_no_panic(&f);

    let rows = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 1, "summary.csv rows: {rows:?}");
    let row = rows.into_iter().next().expect("one row");
    assert_eq!(row["target"], "raft", "{row:?}");
    assert_eq!(row["cluster_size"], "3", "{row:?}");
    assert_eq!(row["complete"], "true", "{row:?}");
    assert_eq!(num(&row, "errors"), 0.0, "{row:?}");
    assert!(num(&row, "throughput_ops_s") > 0.0, "{row:?}");
    let record = read_json(&out.join("run.json"));
    assert_eq!(record["cluster"]["target"], "raft", "{record:#}");
    let pids = member_pids(&record);
    assert_eq!(pids.len(), 3);
    assert_gone(&pids);
    (row, record)
}

/// The must-show: with no --target, a lock run measures a 3-member raft cluster that
/// coordbench starts from its own binary (nothing installed), safely.
#[test]
fn default_target_is_a_three_member_raft_cluster() {
    let (row, record) = raft_run(
        &["--workload", "lock", "--clients", "16", "--duration", "5s"],
        Duration::from_secs(60),
    );
    assert_eq!(row["recipe"], "etcd-mutex", "{row:?}");
    assert_eq!(num(&row, "violations"), 0.0, "{row:?}");
    assert_eq!(
        record["results"]["lock"]["token_regressions"], 0,
        "{record:#}"
    );
    assert!(
        record["results"]["lock"]["sections"]
            .as_u64()
            .expect("sections")
            > 0
    );
}

#[test]
fn raft_kv_put_with_64_clients_has_no_errors() {
    let (row, _) = raft_run(
        &[
            "--target",
            "raft",
            "--workload",
            "kv-put",
            "--clients",
            "64",
            "--duration",
            "3s",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(row["clients"], "64", "{row:?}");
    assert!(num(&row, "ops") > 0.0, "{row:?}");
}

/// `coordbench serve raft` refuses arguments it cannot serve with before it starts
/// anything: exit 2, one line on stderr that names the problem.
#[test]
fn serve_raft_bad_arguments_exit_2_with_one_line() {
    let dir = tempdir();
    let data = dir.path().join("data");
    let data_dir = format!("--data-dir={}", path_str(&data));
    let (p1, c1) = (closed_port(), closed_port());
    let peers = format!("--peers=1=127.0.0.1:{p1}");
    let clients = format!("--clients=1=127.0.0.1:{c1}");
    // (arguments after `serve raft`, text the one line must contain)
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![&peers, &clients, &data_dir], "--id"),
        (vec!["--id=2", &peers, &clients, &data_dir], "--id 2"),
        (
            vec!["--id=1", "--peers=1=127.0.0.1", &clients, &data_dir],
            "127.0.0.1",
        ),
        (
            vec!["--id=1", "--peers=1:127.0.0.1:1", &clients, &data_dir],
            "id=host:port",
        ),
        (
            vec!["--id=1", "--peers=0=127.0.0.1:1", &clients, &data_dir],
            "--peers",
        ),
        (
            vec!["--id=1", &peers, "--clients=2=127.0.0.1:1", &data_dir],
            "--clients",
        ),
    ];
    for (args, mentions) in cases {
        let mut argv = vec!["serve", "raft"];
        argv.extend_from_slice(&args);
        let f = run(dir.path(), &argv, Duration::from_secs(15));
        let what = format!("coordbench {}: {}", argv.join(" "), f.describe());
        assert_eq!(f.status.code(), Some(2), "{what}");
        assert_no_panic(&f);
        assert_eq!(
            f.stderr.lines().count(),
            1,
            "not exactly one line on stderr: {what}"
        );
        assert!(f.stderr.starts_with("error: "), "{what}");
        assert!(
            f.stderr.contains(mentions),
            "the error does not mention {mentions:?}: {what}"
        );
        assert!(f.stdout.is_empty(), "{what}");
    }
    assert!(
        !data.exists(),
        "a refused member created its data directory"
    );
}
