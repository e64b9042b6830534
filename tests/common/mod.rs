//! Helpers shared by the integration tests that run against real coordination services:
//! start a target of N members on 127.0.0.1 and connect its driver ([`start_target`]),
//! open sessions, run a workload through the runner with a short bounded plan, read
//! percentiles, and check that no server process is left behind.
//!
//! Test bodies take a [`TargetKind`] (or a connected [`Target`]) and use only the driver
//! seam, so the same body runs against every target: add a variant to [`TargetKind`] and a
//! branch to [`start_target`], then call the bodies in [`conformance`] from a new test file.
//! [`recipes`] holds election, discovery and value-watch bodies that take a connected
//! coordinator, so ZooKeeper-protocol targets run them too.

#![allow(dead_code)] // each test binary uses a different subset

pub mod conformance;
pub mod differential;
pub mod etcd_differential;
pub mod etcdctl;
pub mod failover;
pub mod herd;
pub mod recipes;
pub mod shrink;
pub mod standalone;
pub mod zk_conformance;
pub mod zk_differential;

use std::future::Future;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordbench_bench::runner::{self, LoadMode, LoadPlan, RunOutcome};
use coordbench_drivers::etcd::{EtcdConfig, EtcdCoordinator};
use coordbench_drivers::{Coordinator, Session, SessionOptions};
use coordbench_lab::provision::etcd::{self, EtcdOptions};
use coordbench_lab::provision::raft::{self, RaftOptions};
use coordbench_lab::provision::zab;
use coordbench_lab::provision::{Cluster, ClusterSpec, DiskKind};
use coordbench_workloads::{RunClock, Workload};
use hdrhistogram::Histogram;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

/// Upper bound for starting a cluster and connecting to it.
pub const START_BOUND: Duration = Duration::from_secs(40);
/// How long a connection attempt may take (what the CLI uses too).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound for a graceful stop of every member.
pub const STOP_BOUND: Duration = Duration::from_secs(4);
/// Session TTL for sessions that are not about expiry.
pub const LONG_TTL: Duration = Duration::from_secs(10);

/// A system the tests can start and drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// Debian's etcd-server (/usr/bin/etcd), through the etcd v3 driver.
    Etcd,
    /// The built-in Raft engine (`coordbench serve raft` processes), through the same driver.
    Raft,
    /// The built-in Zab engine (`coordbench serve zab` processes), through the ZooKeeper
    /// driver.
    Zab,
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Etcd => "etcd",
            TargetKind::Raft => "raft",
            TargetKind::Zab => "zab",
        }
    }

    /// The shortest session TTL the target honours with the launcher's default settings
    /// (etcd raises lease TTLs to 1.5 election timeouts, rounded up to whole seconds: 2 s;
    /// the Raft engine follows etcd's rule with the same election timeout; the Zab engine
    /// grants at least 2 ticks of 2 s).
    pub fn min_ttl(self) -> Duration {
        match self {
            TargetKind::Etcd | TargetKind::Raft => Duration::from_secs(2),
            // Zab members keep ZooKeeper's tickTime of 2 s whatever the spec's TTL, and
            // negotiate session timeouts to at least 2 ticks.
            TargetKind::Zab => Duration::from_secs(4),
        }
    }
}

/// A started target and its connected driver. Dropping it stops every member process; use
/// [`Target::stop`] to also check that none is left behind.
///
/// Field order is drop order: connections first, then the members, then the directory that
/// holds their logs.
pub struct Target {
    pub kind: TargetKind,
    pub coordinator: Arc<dyn Coordinator>,
    pub cluster: Cluster,
    pub work_dir: TempDir,
}

impl Target {
    /// Pids of the member processes the target started.
    pub fn pids(&self) -> Vec<u32> {
        (0..self.cluster.member_count())
            .filter_map(|i| self.cluster.member_pid(i))
            .collect()
    }

    /// Client endpoints, one per member.
    pub fn endpoints(&self) -> Vec<String> {
        self.cluster.endpoints()
    }

    /// A coordinator connected to member `i` alone (to read from a chosen member).
    pub async fn connect_member(&self, i: usize) -> Arc<dyn Coordinator> {
        let endpoint = self.endpoints()[i].clone();
        connect(self.kind, vec![endpoint], 1).await
    }

    /// Stops the target and asserts that no member exited on its own before, that every
    /// member exited on SIGTERM (within [`STOP_BOUND`]), and that no member process is left.
    pub fn stop(self) {
        let Target {
            kind,
            coordinator,
            mut cluster,
            work_dir,
        } = self;
        drop(coordinator);
        if let Err(e) = cluster.check_alive() {
            panic!(
                "{} member died during the test: {e}\n{}",
                kind.name(),
                e.log_tail().unwrap_or("")
            );
        }
        let pids: Vec<u32> = (0..cluster.member_count())
            .filter_map(|i| cluster.member_pid(i))
            .collect();
        let stopping = Instant::now();
        cluster.stop();
        let took = stopping.elapsed();
        assert_gone(&pids);
        // Members that exit on SIGTERM take well under a second; the launcher SIGKILLs what
        // is still running after a 5 s grace.
        assert!(
            took < STOP_BOUND,
            "stopping took {took:?}: a member did not exit on SIGTERM"
        );
        drop(work_dir);
    }
}

/// Starts a `size`-member cluster of `kind` on 127.0.0.1 (data on tmpfs, logs in a fresh
/// temporary directory) and connects its driver with 4 connections. Panics if either takes
/// longer than [`START_BOUND`].
pub async fn start_target(kind: TargetKind, size: usize) -> Target {
    let work_dir = tempfile::tempdir().expect("tempdir");
    let spec = ClusterSpec {
        size,
        disk: DiskKind::Tmpfs,
        ttl: LONG_TTL,
        base_port: None,
        work_dir: work_dir.path().to_path_buf(),
        sync_delay: None,
        net_delay: None,
        net_delay_clients: false,
        snapshot_every: None,
        auto_compaction: None,
    };
    let cluster = match kind {
        TargetKind::Etcd => within(
            START_BOUND,
            "starting etcd",
            etcd::start(&spec, &EtcdOptions::default()),
        )
        .await
        .unwrap_or_else(|e| panic!("starting a {size}-member etcd cluster: {e}")),
        TargetKind::Raft => within(
            START_BOUND,
            "starting raft",
            raft::start(&spec, &raft_options()),
        )
        .await
        .unwrap_or_else(|e| panic!("starting a {size}-member raft cluster: {e}")),
        TargetKind::Zab => within(
            START_BOUND,
            "starting zab",
            zab::start(&spec, &raft_options()),
        )
        .await
        .unwrap_or_else(|e| panic!("starting a {size}-member zab cluster: {e}")),
    };
    let coordinator = connect(kind, cluster.endpoints(), 4).await;
    Target {
        kind,
        coordinator,
        cluster,
        work_dir,
    }
}

/// Launcher options for raft and zab members: the defaults (etcd's timing), served by the
/// coordbench binary cargo built for this test run rather than one found by guessing.
pub fn raft_options() -> RaftOptions {
    RaftOptions {
        binary: Some(env!("CARGO_BIN_EXE_coordbench").into()),
        ..Default::default()
    }
}

/// Connects the driver of `kind` to `endpoints` with `conns` connections.
pub async fn connect(
    kind: TargetKind,
    endpoints: Vec<String>,
    conns: usize,
) -> Arc<dyn Coordinator> {
    match kind {
        TargetKind::Etcd | TargetKind::Raft => {
            let config = EtcdConfig {
                endpoints,
                conns,
                connect_timeout: CONNECT_TIMEOUT,
                security: Default::default(),
            };
            let what = format!("connecting to {}", kind.name());
            let c = within(START_BOUND, &what, EtcdCoordinator::connect(&config))
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            Arc::new(c)
        }
        // The ZooKeeper driver keeps one connection per session; `conns` does not apply.
        TargetKind::Zab => zk_conformance::connect_zk(endpoints).await,
    }
}

/// Opens the sessions of clients `first..first + n` with `ttl`.
pub async fn open_sessions(
    coordinator: &dyn Coordinator,
    first: usize,
    n: usize,
    ttl: Duration,
) -> Vec<Box<dyn Session>> {
    let options = SessionOptions { ttl };
    let mut sessions = Vec::with_capacity(n);
    for client in first..first + n {
        let s = within(
            CONNECT_TIMEOUT,
            "opening a session",
            coordinator.open_session(client, &options),
        )
        .await
        .unwrap_or_else(|e| panic!("opening the session of client {client}: {e}"));
        sessions.push(s);
    }
    sessions
}

/// One session of client `client`.
pub async fn open_session(
    coordinator: &dyn Coordinator,
    client: usize,
    ttl: Duration,
) -> Box<dyn Session> {
    open_sessions(coordinator, client, 1, ttl)
        .await
        .pop()
        .expect("one session")
}

/// A closed-loop plan: `clients` clients, no rate, 1 s intervals, 5 s operation timeout.
pub fn closed_plan(clients: usize, warmup: Duration, duration: Duration) -> LoadPlan {
    LoadPlan {
        clients,
        mode: LoadMode::Closed,
        warmup,
        duration,
        max_ops: None,
        op_timeout: Duration::from_secs(5),
        interval: Duration::from_secs(1),
        ttl: LONG_TTL,
        session_opens: coordbench_bench::runner::opening::DEFAULT_AT_ONCE,
        part: coordbench_bench::shard::Part::WHOLE,
        start: coordbench_bench::shard::StartRule::Now,
    }
}

/// Runs `workload` through the real runner, bounded by the plan's length plus 30 s.
pub async fn run_plan(
    plan: &LoadPlan,
    coordinator: Arc<dyn Coordinator>,
    workload: Arc<dyn Workload>,
    clock: RunClock,
) -> RunOutcome {
    let bound = plan.warmup + plan.duration + Duration::from_secs(30);
    let stop = CancellationToken::new();
    let mut progress = |_: Duration, _: &runner::Aggregator| {};
    let run = runner::run(plan, coordinator, workload, clock, stop, &mut progress);
    within(bound, "runner::run", run)
        .await
        .unwrap_or_else(|e| panic!("runner::run failed: {e}"))
}

/// p50, p90, p99 and max of a latency histogram (µs).
#[derive(Debug, Clone, Copy)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        assert!(!h.is_empty(), "empty latency histogram");
        Percentiles {
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        }
    }

    /// 0 < p50 <= p90 <= p99 <= max.
    pub fn assert_ordered(&self) {
        assert!(self.p50 > 0, "p50 is zero: {self:?}");
        assert!(
            self.p50 <= self.p90 && self.p90 <= self.p99 && self.p99 <= self.max,
            "percentiles out of order: {self:?}"
        );
    }
}

/// Awaits `fut`, panicking with `what` if it takes longer than `bound`.
pub async fn within<F: Future>(bound: Duration, what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(bound, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {bound:?}"),
    }
}

/// A port on 127.0.0.1 that nothing listens on (bound by the OS, then released).
pub fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// True if `pid` names a process that exists and is not a zombie.
pub fn process_running(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    if !exists {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Asserts that none of `pids` exists any more: not running, and not left as a zombie.
pub fn assert_gone(pids: &[u32]) {
    for &pid in pids {
        // SAFETY: signal 0 only checks that the process exists.
        let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
        assert!(
            !exists && !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} still exists (running: {})",
            process_running(pid)
        );
    }
}

/// The one row of a run's summary.csv, by column name.
pub fn summary_row(path: &Path) -> std::collections::HashMap<String, String> {
    let mut reader = csv::Reader::from_path(path).expect("summary.csv");
    let headers = reader.headers().expect("header").clone();
    let record = reader.records().next().expect("one row").expect("row");
    headers
        .iter()
        .zip(record.iter())
        .map(|(h, v)| (h.to_string(), v.to_string()))
        .collect()
}

/// Runs the `coordbench` binary with `argv` in `cwd` and returns how it exited and its
/// stderr; a run that outlives `bound` is killed and fails the test.
pub fn run_coordbench(
    argv: &[&str],
    cwd: &Path,
    bound: Duration,
) -> (std::process::ExitStatus, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args(argv)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn coordbench");
    let deadline = Instant::now() + bound;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("coordbench {argv:?} did not exit within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::io::read_to_string(child.stderr.take().expect("stderr")).unwrap_or_default();
    (status, stderr)
}

/// The run.json a finished run wrote into `out`.
pub fn run_json(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).expect("run.json"))
        .expect("run.json parses")
}

/// `coordbench run` arguments for a short lock run (3 clients, 2 s, no warm-up, tmpfs, one
/// member) of `target` into `out`, then `extra`.
pub fn lock_run_args(target: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--target",
        target,
        "--workload",
        "lock",
        "--clients",
        "3",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--disk",
        "tmpfs",
        "--cluster-size",
        "1",
        "--quiet",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(out.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A refused run: exit 2 and one line on stderr containing `needle` (`what` names the
/// case in failures). Returns that line.
pub fn assert_refused_in_one_line(code: i32, stderr: &str, needle: &str, what: &str) -> String {
    assert_eq!(code, 2, "{what}: {stderr}");
    let lines: Vec<&str> = stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "{what}: one line: {stderr}");
    assert!(
        lines[0].contains(needle),
        "{what}: want {needle:?} in {stderr}"
    );
    lines[0].to_string()
}
