//! The lab's ZooKeeper provisioning against a real ZooKeeper: the release a run starts when
//! it names none ($COORDBENCH_ZOOKEEPER_VERSION, else the newest `coordbench install`ed,
//! else Debian's zookeeper package). Provisioning alone, so these live with the lab crate;
//! everything binds 127.0.0.1 only.

use std::path::Path;
use std::time::Duration;

use coordbench_drivers::zookeeper::four_letter::{field, four_letter_word};
use coordbench_lab::provision::disk::DiskKind;
use coordbench_lab::provision::zookeeper::{self, ZkOptions};
use coordbench_lab::provision::{Cluster, ClusterSpec, ProvisionError};

/// Upper bound for any single cluster start in these tests (JVMs start in seconds).
const START_BOUND: Duration = Duration::from_secs(70);

fn spec(size: usize, disk: DiskKind, ttl: Duration, work_dir: &Path) -> ClusterSpec {
    ClusterSpec {
        size,
        disk,
        ttl,
        base_port: None,
        work_dir: work_dir.to_path_buf(),
        sync_delay: None,
        net_delay: None,
        net_delay_clients: false,
        snapshot_every: None,
        auto_compaction: None,
    }
}

async fn start(spec: &ClusterSpec, opts: &ZkOptions) -> Result<Cluster, ProvisionError> {
    match tokio::time::timeout(START_BOUND, zookeeper::start(spec, opts)).await {
        Ok(r) => r,
        Err(_) => panic!("zookeeper::start did not return within {START_BOUND:?}"),
    }
}

fn pids(cluster: &Cluster) -> Vec<u32> {
    (0..cluster.member_count())
        .filter_map(|i| cluster.member_pid(i))
        .collect()
}

/// True while `pid` exists and is not a zombie.
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn setting<'a>(cluster: &'a Cluster, key: &str) -> &'a str {
    let settings = &cluster.info().settings;
    settings
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no setting {key} in {settings:?}"))
}

async fn srvr_modes(cluster: &Cluster) -> Vec<String> {
    let mut modes = Vec::new();
    for ep in cluster.endpoints() {
        let reply = four_letter_word(&ep, "srvr", None).await.expect("srvr");
        modes.push(field(&reply, "Mode").expect("Mode in srvr").to_string());
    }
    modes
}

fn assert_one_line(err: &ProvisionError) {
    let msg = err.to_string();
    assert!(
        !msg.is_empty() && !msg.contains('\n'),
        "not one line: {msg:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_server_follows_the_ttl_and_stops() {
    let work = tempfile::tempdir().expect("tempdir");
    let ttl = Duration::from_secs(2);
    let mut cluster = start(
        &spec(1, DiskKind::Nofsync, ttl, work.path()),
        &ZkOptions::default(),
    )
    .await
    .expect("start standalone ZooKeeper");
    assert!(cluster.is_provisioned());
    assert_eq!(cluster.info().target, "zookeeper");
    // The release a run starts when it names none: $COORDBENCH_ZOOKEEPER_VERSION, else
    // the newest installed.
    let chosen =
        coordbench_lab::install::choose(coordbench_lab::install::ServerKind::Zookeeper, None)
            .expect("a release is chosen")
            .and_then(|i| i.version)
            .map(|v| v.to_string());
    assert_eq!(cluster.info().version, chosen);
    assert!(cluster.endpoints()[0].starts_with("127.0.0.1:"));
    assert_eq!(srvr_modes(&cluster).await, ["standalone"]);

    // TTL 2 s: tick 400 ms, and the server admits a 2 s session timeout.
    assert_eq!(setting(&cluster, "tickTime-ms"), "400");
    assert_eq!(setting(&cluster, "forceSync"), "no");
    let conf = four_letter_word(&cluster.endpoints()[0], "conf", None)
        .await
        .expect("conf");
    let conf_value = |key: &str| {
        conf.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
    };
    assert_eq!(conf_value("tickTime").as_deref(), Some("400"), "{conf}");
    let min: u64 = conf_value("minSessionTimeout")
        .and_then(|v| v.parse().ok())
        .expect("minSessionTimeout");
    let max: u64 = conf_value("maxSessionTimeout")
        .and_then(|v| v.parse().ok())
        .expect("maxSessionTimeout");
    assert!(min <= 2000 && 2000 <= max, "{conf}");

    let data_dir = cluster.data_dirs()[0].clone();
    assert!(
        data_dir.starts_with(work.path().join("data")),
        "{data_dir:?}"
    );
    let cfg = std::fs::read_to_string(data_dir.join("zoo.cfg")).expect("zoo.cfg");
    assert!(
        cfg.contains("forceSync=no") && cfg.contains("clientPortAddress=127.0.0.1"),
        "{cfg}"
    );
    assert_eq!(
        std::fs::read_to_string(data_dir.join("data/myid"))
            .expect("myid")
            .trim(),
        "1"
    );
    let log = work.path().join("logs/zk-1.log");
    assert!(
        std::fs::read_to_string(&log)
            .expect("server log")
            .contains("QuorumPeerConfig"),
        "nothing logged"
    );

    let pids = pids(&cluster);
    assert!(pids.iter().all(|&p| running(p)));
    cluster.stop();
    cluster.stop(); // idempotent
    assert!(pids.iter().all(|&p| !running(p)), "a JVM survived stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_server_ensemble_on_tmpfs_has_one_leader_and_stops() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut cluster = start(
        &spec(3, DiskKind::Tmpfs, Duration::from_secs(10), work.path()),
        &ZkOptions::default(),
    )
    .await
    .expect("start a 3-server ensemble");
    let mut modes = srvr_modes(&cluster).await;
    modes.sort();
    assert_eq!(modes, ["follower", "follower", "leader"]);
    assert_eq!(setting(&cluster, "tickTime-ms"), "2000");

    let dirs = cluster.data_dirs();
    assert_eq!(dirs.len(), 3);
    assert!(dirs.iter().all(|d| d.starts_with("/dev/shm")), "{dirs:?}");
    for (i, d) in dirs.iter().enumerate() {
        let myid = std::fs::read_to_string(d.join("data/myid")).expect("myid");
        assert_eq!(myid.trim(), (i + 1).to_string());
    }
    let info = cluster.info();
    assert!(info.members.iter().all(|m| m.peer_url.is_some()));
    let mut ports: Vec<&str> = info.members.iter().map(|m| m.client_url.as_str()).collect();
    ports.dedup();
    assert_eq!(ports.len(), 3);
    cluster.check_alive().expect("alive");

    let root = dirs[0].parent().expect("data root").to_path_buf();
    let pids = pids(&cluster);
    assert_eq!(pids.len(), 3);
    drop(cluster); // Drop stops, like stop()
    assert!(pids.iter().all(|&p| !running(p)), "a JVM survived drop");
    assert!(!root.exists(), "tmpfs data root {root:?} not removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_jar_or_java_is_reported_before_anything_starts() {
    let work = tempfile::tempdir().expect("tempdir");
    let s = spec(1, DiskKind::Disk, Duration::from_secs(10), work.path());
    let no_jar = ZkOptions {
        classpath: Some("/nonexistent/zookeeper.jar".into()),
        ..ZkOptions::default()
    };
    let err = start(&s, &no_jar).await.expect_err("must fail");
    assert!(
        matches!(err, ProvisionError::BinaryNotFound { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("apt-get install zookeeper"),
        "{err}"
    );
    assert_one_line(&err);

    let no_java = ZkOptions {
        java: Some("/nonexistent/java".into()),
        ..ZkOptions::default()
    };
    let err = start(&s, &no_java).await.expect_err("must fail");
    assert!(
        matches!(err, ProvisionError::BinaryNotFound { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("java"), "{err}");
    assert_one_line(&err);
    assert!(!work.path().join("logs").exists(), "nothing may be started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_at_startup_is_reported_with_its_log() {
    let work = tempfile::tempdir().expect("tempdir");
    // A classpath that exists but holds no ZooKeeper: the JVM exits at once.
    let empty = work.path().join("empty-lib");
    std::fs::create_dir(&empty).expect("mkdir");
    let opts = ZkOptions {
        classpath: Some(format!("{}/*", empty.display())),
        ..ZkOptions::default()
    };
    let t = std::time::Instant::now();
    let err = start(
        &spec(3, DiskKind::Disk, Duration::from_secs(10), work.path()),
        &opts,
    )
    .await
    .expect_err("must fail");
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "exit not noticed promptly"
    );
    assert!(
        matches!(err, ProvisionError::MemberExited { .. }),
        "{err:?}"
    );
    assert_one_line(&err);
    assert!(err.to_string().contains("QuorumPeerMain"), "{err}");
}

#[test]
fn servers_die_with_the_thread_that_started_them() {
    // PR_SET_PDEATHSIG must reach the JVM: a SIGKILLed coordbench takes its servers along.
    let work = tempfile::tempdir().expect("tempdir");
    let s = spec(1, DiskKind::Disk, Duration::from_secs(10), work.path());
    let pids = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let cluster = rt
            .block_on(start(&s, &ZkOptions::default()))
            .expect("start");
        let pids = pids(&cluster);
        std::mem::forget(cluster); // no Drop: only the parent-death signal may kill it
        pids
    })
    .join()
    .expect("thread");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&p| running(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        pids.iter().all(|&p| !running(p)),
        "JVM {pids:?} survived its spawning thread"
    );
    for pid in pids {
        // SAFETY: reaping our own zombie child by pid.
        unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
    }
}
