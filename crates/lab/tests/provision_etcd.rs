//! The lab's etcd provisioning against a real etcd: the release a run starts when it names
//! none ($COORDBENCH_ETCD_VERSION, else the newest `coordbench install`ed, else Debian's
//! etcd-server). Provisioning alone, so these live with the lab crate; everything binds
//! 127.0.0.1 only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use coordbench_lab::provision::disk::{probe_sync_latency, DiskKind};
use coordbench_lab::provision::etcd::{self, EtcdOptions};
use coordbench_lab::provision::{Cluster, ClusterSpec, ProvisionError};
use etcd_client::Client;

/// Upper bound for any single cluster start in these tests.
const START_BOUND: Duration = Duration::from_secs(40);

fn spec(size: usize, disk: DiskKind, work_dir: &Path) -> ClusterSpec {
    ClusterSpec {
        size,
        disk,
        ttl: Duration::from_secs(10),
        base_port: None,
        work_dir: work_dir.to_path_buf(),
        sync_delay: None,
        net_delay: None,
        net_delay_clients: false,
        snapshot_every: None,
        auto_compaction: None,
    }
}

async fn start(spec: &ClusterSpec, opts: &EtcdOptions) -> Result<Cluster, ProvisionError> {
    match tokio::time::timeout(START_BOUND, etcd::start(spec, opts)).await {
        Ok(r) => r,
        Err(_) => panic!("etcd::start did not return within {START_BOUND:?}"),
    }
}

fn pids(cluster: &Cluster) -> Vec<u32> {
    (0..cluster.member_count())
        .filter_map(|i| cluster.member_pid(i))
        .collect()
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence. Members are reaped, so no zombie remains.
    let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    exists && Path::new(&format!("/proc/{pid}")).exists()
}

fn assert_one_line(err: &ProvisionError) {
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "multi-line error message: {msg:?}");
    assert!(!msg.is_empty());
}

/// Every endpoint answers Status with the same non-zero leader.
async fn assert_common_leader(cluster: &Cluster) {
    let mut leaders = Vec::new();
    for ep in cluster.endpoints() {
        let mut c = Client::connect([ep.as_str()], None).await.expect("connect");
        let status = tokio::time::timeout(Duration::from_secs(5), c.status())
            .await
            .expect("status timed out")
            .expect("status");
        leaders.push(status.leader());
    }
    assert_ne!(leaders[0], 0, "no leader");
    assert!(
        leaders.iter().all(|&l| l == leaders[0]),
        "leaders differ: {leaders:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_member_cluster_starts_and_stops() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut cluster = start(
        &spec(1, DiskKind::Disk, work.path()),
        &EtcdOptions::default(),
    )
    .await
    .expect("start 1-member etcd");
    assert!(cluster.is_provisioned());
    assert_eq!(cluster.endpoints().len(), 1);
    assert!(cluster.endpoints()[0].starts_with("http://127.0.0.1:"));
    let info = cluster.info();
    assert_eq!(info.target, "etcd");
    assert_eq!(info.disk, Some(DiskKind::Disk));
    assert!(
        info.version.as_deref().is_some_and(|v| v.starts_with('3')),
        "{:?}",
        info.version
    );
    assert!(info.binary.is_some());
    assert!(info
        .settings
        .iter()
        .any(|(k, v)| k == "heartbeat-interval-ms" && v == "100"));
    assert!(info.settings.iter().any(|(k, v)| k == "fsync" && v == "on"));
    assert!(cluster.data_dirs()[0].starts_with(work.path().join("data")));
    assert!(work.path().join("logs/etcd-m1.log").exists());
    assert_common_leader(&cluster).await;
    cluster.check_alive().expect("alive");

    let pids = pids(&cluster);
    assert_eq!(pids.len(), 1);
    assert!(alive(pids[0]));
    cluster.stop();
    cluster.stop(); // idempotent
    assert!(
        pids.iter().all(|&p| !alive(p)),
        "member still alive after stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_member_cluster_replicates_and_stops() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut cluster = start(
        &spec(3, DiskKind::Disk, work.path()),
        &EtcdOptions::default(),
    )
    .await
    .expect("start 3-member etcd");
    let eps = cluster.endpoints();
    assert_eq!(eps.len(), 3);
    assert_common_leader(&cluster).await;

    let mut writer = Client::connect([eps[0].as_str()], None)
        .await
        .expect("connect m1");
    writer
        .put("coordbench-test", "v1", None)
        .await
        .expect("put via m1");
    let mut reader = Client::connect([eps[2].as_str()], None)
        .await
        .expect("connect m3");
    let got = reader
        .get("coordbench-test", None)
        .await
        .expect("get via m3");
    assert_eq!(got.kvs().first().map(|kv| kv.value()), Some(&b"v1"[..]));

    // Fault-injection hooks: pause/resume keeps the member; kill is not reported as a crash.
    cluster.pause_member(1).expect("pause");
    cluster.resume_member(1).expect("resume");
    cluster.kill_member(2).expect("kill");
    cluster
        .check_alive()
        .expect("an intentionally killed member is not a failure");

    let pids = pids(&cluster);
    assert_eq!(pids.len(), 3);
    assert!(!alive(pids[2]));
    cluster.stop();
    assert!(
        pids.iter().all(|&p| !alive(p)),
        "member still alive after stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_cluster_kills_members() {
    let work = tempfile::tempdir().expect("tempdir");
    let cluster = start(
        &spec(1, DiskKind::Disk, work.path()),
        &EtcdOptions::default(),
    )
    .await
    .expect("start etcd");
    let pids = pids(&cluster);
    assert!(pids.iter().all(|&p| alive(p)));
    drop(cluster);
    assert!(pids.iter().all(|&p| !alive(p)), "member survived drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taken_port_is_reported_up_front() {
    let work = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let mut s = spec(1, DiskKind::Disk, work.path());
    s.base_port = Some(port);
    let err = start(&s, &EtcdOptions::default())
        .await
        .expect_err("must fail");
    assert!(
        matches!(err, ProvisionError::PortInUse { port: p } if p == port),
        "{err:?}"
    );
    assert_one_line(&err);
    assert!(err.to_string().contains("--base-port"), "{err}");
    // Nothing was spawned: no member log was ever created.
    assert!(!work.path().join("logs").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_binary_is_reported() {
    let work = tempfile::tempdir().expect("tempdir");
    let opts = EtcdOptions {
        binary: Some(PathBuf::from("/nonexistent/etcd")),
        ..EtcdOptions::default()
    };
    let err = start(&spec(1, DiskKind::Disk, work.path()), &opts)
        .await
        .expect_err("must fail");
    assert!(
        matches!(err, ProvisionError::BinaryNotFound { .. }),
        "{err:?}"
    );
    assert_one_line(&err);
    assert!(
        err.to_string().contains("apt-get install etcd-server"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_exit_during_startup_surfaces_its_log() {
    use std::os::unix::fs::PermissionsExt;
    let work = tempfile::tempdir().expect("tempdir");
    // A stand-in "etcd" that dies the way a real one does when its port is taken.
    let fake = work.path().join("fake-etcd");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = --help ]; then echo '  --initial-cluster'; exit 0; fi\n\
         echo 'starting'\n\
         echo '{\"level\":\"fatal\",\"msg\":\"discovery failed\",\"error\":\"listen tcp 127.0.0.1:1: bind: address already in use\"}' >&2\n\
         exit 1\n",
    )
    .expect("write fake etcd");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let opts = EtcdOptions {
        binary: Some(fake),
        ..EtcdOptions::default()
    };
    let t = std::time::Instant::now();
    let err = start(&spec(3, DiskKind::Disk, work.path()), &opts)
        .await
        .expect_err("must fail");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "exit not noticed promptly"
    );
    assert!(
        matches!(err, ProvisionError::MemberExited { .. }),
        "{err:?}"
    );
    assert_one_line(&err);
    assert!(err.to_string().contains("address already in use"), "{err}");
    assert!(err.log_tail().is_some_and(|t| t.contains("starting")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmpfs_data_lives_in_dev_shm_and_is_removed() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut cluster = start(
        &spec(1, DiskKind::Tmpfs, work.path()),
        &EtcdOptions::default(),
    )
    .await
    .expect("start etcd on tmpfs");
    let dirs = cluster.data_dirs();
    assert_eq!(dirs.len(), 1);
    assert!(dirs[0].starts_with("/dev/shm"), "{dirs:?}");
    assert!(dirs[0].exists());
    let root = dirs[0].parent().expect("data root").to_path_buf();
    cluster.stop();
    assert!(!root.exists(), "tmpfs data root {root:?} not removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nofsync_runs_on_every_etcd() {
    let work = tempfile::tempdir().expect("tempdir");
    // The etcd a run starts when it names none (the chosen installed release).
    let (bin, _) = etcd::resolve_server(None, None).expect("etcd installed");
    let help = std::process::Command::new(&bin)
        .arg("--help")
        .output()
        .expect("etcd --help");
    let supported = String::from_utf8_lossy(&help.stdout).contains("--unsafe-no-fsync")
        || String::from_utf8_lossy(&help.stderr).contains("--unsafe-no-fsync");
    let mut cluster = start(
        &spec(1, DiskKind::Nofsync, work.path()),
        &EtcdOptions::default(),
    )
    .await
    .expect("start etcd with --disk nofsync");
    let pid = cluster.member_pid(0).expect("pid");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    let fsync = cluster
        .info()
        .settings
        .iter()
        .find(|(k, _)| k == "fsync")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(fsync.starts_with("off"), "{fsync}");
    // etcd 3.4 has no --unsafe-no-fsync: its data directory is a no-op-sync mount instead.
    assert_eq!(
        String::from_utf8_lossy(&cmdline).contains("--unsafe-no-fsync"),
        supported
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let data_dir = cluster.data_dirs()[0].display().to_string();
    assert_eq!(mounts.contains(&data_dir), !supported, "{data_dir}");
    cluster.stop();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    assert!(
        !mounts.contains(&data_dir),
        "{data_dir} still mounted after stop"
    );
}

#[test]
fn sync_probe_reports_ordered_percentiles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = probe_sync_latency(dir.path(), 20).expect("probe");
    assert_eq!(p.samples, 20);
    assert!(p.p50_us > 0);
    assert!(p.p50_us <= p.p99_us && p.p99_us <= p.max_us, "{p:?}");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("read_dir").count(),
        0,
        "probe file left behind"
    );
}

#[test]
fn disk_kind_round_trips_lowercase() {
    for k in [
        DiskKind::Tmpfs,
        DiskKind::Disk,
        DiskKind::Nofsync,
        DiskKind::Hdd,
        DiskKind::Ssd,
        DiskKind::Nvme,
    ] {
        assert_eq!(k.to_string().parse::<DiskKind>(), Ok(k));
        assert_eq!(serde_json::to_string(&k).expect("json"), format!("\"{k}\""));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_cluster_has_no_processes() {
    let mut c = Cluster::attached("etcd", vec!["http://127.0.0.1:2379".into()]);
    assert!(!c.is_provisioned());
    assert_eq!(c.endpoints(), vec!["http://127.0.0.1:2379".to_string()]);
    assert!(c.data_dirs().is_empty());
    assert!(c.kill_member(0).is_err());
    c.check_alive().expect("nothing to check");
    c.stop();
}

#[test]
fn member_dies_with_its_spawning_thread() {
    use coordbench_lab::provision::process::ManagedProcess;
    // PR_SET_PDEATHSIG fires when the spawning thread exits; this is the guarantee that a
    // SIGKILLed coordbench takes its members with it.
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("sleep.log");
    let pid = std::thread::spawn(move || {
        let p = ManagedProcess::spawn(Path::new("/bin/sleep"), ["30"], &log, &[]).expect("spawn");
        let pid = p.pid();
        std::mem::forget(p); // no Drop: only the parent-death signal may kill it
        pid
    })
    .join()
    .expect("thread");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    // The killed child stays a zombie (nobody reaps it), so look at its state, not existence.
    let dead = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    };
    while !dead() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dead(), "child {pid} survived its spawning thread");
    // SAFETY: reaping our own zombie child by pid.
    unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
}
