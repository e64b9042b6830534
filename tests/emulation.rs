//! Emulated disks and networks, measured against real processes on 127.0.0.1: the
//! sync-delay filesystem adds its configured delay to fdatasync and an etcd member runs on
//! it; the delay proxy adds its one-way delay per direction, keeps byte order under jitter,
//! stalls a cut link until it is healed, and a 3-member Raft-engine cluster elects a leader and serves writes
//! through it, slower than without; a run samples its servers into resources.csv.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use coordbench_lab::netdelay::{Ends, NetDelay, Proxy};
use coordbench_lab::provision::disk::probe_sync_latency;
use coordbench_lab::provision::etcd::{self, EtcdOptions};
use coordbench_lab::provision::raft::{self, RaftOptions};
use coordbench_lab::provision::{ClusterSpec, DiskKind};
use coordbench_lab::syncfs::{SyncFsMount, SyncPolicy};

/// Slack for timing upper bounds on a loaded 2-core machine; lower bounds are exact.
const SLACK: Duration = Duration::from_millis(150);

fn mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let p = path.display().to_string();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(p.as_str()) && l.contains(" - fuse coordbench-"))
}

#[test]
fn the_sync_delay_filesystem_adds_its_delay_to_fdatasync() {
    let work = tempfile::tempdir_in("/dev/shm").expect("tempdir on tmpfs");
    let delay = Duration::from_millis(20);
    let mut p50 = Vec::new();
    for (name, policy) in [
        (
            "plain",
            SyncPolicy {
                fsync: true,
                delay: Duration::ZERO,
            },
        ),
        ("delayed", SyncPolicy { fsync: true, delay }),
        (
            "nofsync",
            SyncPolicy {
                fsync: false,
                delay: Duration::ZERO,
            },
        ),
    ] {
        let backing = work.path().join(format!("{name}.backing"));
        std::fs::create_dir(&backing).unwrap();
        let mountpoint = work.path().join(name);
        let mount = SyncFsMount::mount(&backing, &mountpoint, policy).expect("mount");
        assert!(mounted(&mountpoint));
        // Files written through the mount land in the backing directory.
        std::fs::write(mountpoint.join("f"), b"through").unwrap();
        assert_eq!(std::fs::read(backing.join("f")).unwrap(), b"through");
        let probe = probe_sync_latency(&mountpoint, 10).expect("probe on the mount");
        p50.push(Duration::from_micros(probe.p50_us));
        drop(mount);
        assert!(!mounted(&mountpoint), "{name} still mounted after drop");
    }
    let (plain, delayed, nofsync) = (p50[0], p50[1], p50[2]);
    assert!(delayed >= delay, "delayed p50 {delayed:?} < {delay:?}");
    assert!(
        delayed <= plain + delay + SLACK,
        "delayed {delayed:?}, plain {plain:?}"
    );
    assert!(
        plain < delay && nofsync < delay,
        "plain {plain:?}, nofsync {nofsync:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_member_runs_on_an_emulated_hdd() {
    let work = tempfile::tempdir().expect("tempdir");
    let delay = Duration::from_millis(10);
    let mut spec = ClusterSpec::new(
        1,
        DiskKind::Hdd,
        Duration::from_secs(10),
        work.path().into(),
    );
    spec.sync_delay = Some(delay);
    let mut cluster = etcd::start(&spec, &EtcdOptions::default())
        .await
        .expect("etcd on hdd");
    let data_dir = cluster.data_dirs()[0].clone();
    assert!(
        data_dir.starts_with("/dev/shm") && mounted(&data_dir),
        "{data_dir:?}"
    );
    // What the run records: the probe on the member's own directory sees the delay.
    let probe = probe_sync_latency(&data_dir, 5).expect("probe");
    assert!(Duration::from_micros(probe.p50_us) >= delay, "{probe:?}");
    // A write commits only after etcd's WAL sync, which waits for the delay.
    let mut client = etcd_client::Client::connect(cluster.endpoints(), None)
        .await
        .expect("connect");
    let t = Instant::now();
    client.put("k", "v", None).await.expect("put");
    assert!(t.elapsed() >= delay, "put took {:?}", t.elapsed());
    let got = client.get("k", None).await.expect("get");
    assert_eq!(got.kvs()[0].value(), b"v");
    let root = data_dir.parent().unwrap().to_path_buf();
    cluster.stop();
    assert!(!mounted(&data_dir), "mount left behind");
    assert!(!root.exists(), "data root {root:?} left behind");
}

/// An echo server on 127.0.0.1 for the proxy to forward to.
fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut buf = [0u8; 4096];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// Median round trip of `rounds` one-byte pings through `addr`.
fn median_rtt(addr: SocketAddr, rounds: usize) -> Duration {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rtts: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            s.write_all(b"x").unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            t.elapsed()
        })
        .collect();
    rtts.sort();
    rtts[rounds / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_delays_each_direction_keeps_order_and_cuts_links() {
    let upstream = echo_server();
    let one_way = Duration::from_millis(15);
    let mut proxy = Proxy::new(NetDelay {
        delay: one_way,
        jitter: Duration::ZERO,
    });
    let link = Ends::Link { from: 0, to: 1 };
    let delayed = proxy.add_route("a->b", upstream, link).await.unwrap();
    let (direct_rtt, rtt) =
        tokio::task::spawn_blocking(move || (median_rtt(upstream, 5), median_rtt(delayed, 7)))
            .await
            .unwrap();
    assert!(rtt >= 2 * one_way, "round trip {rtt:?} < 2 x {one_way:?}");
    assert!(
        rtt <= 2 * one_way + direct_rtt + SLACK,
        "round trip {rtt:?}"
    );

    // Jitter larger than the gap between writes must not reorder bytes.
    let mut jittery = Proxy::new("5ms,5ms".parse().unwrap());
    let addr = jittery.add_route("j", upstream, link).await.unwrap();
    let sent: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
    let echoed = tokio::task::spawn_blocking({
        let sent = sent.clone();
        move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            for chunk in sent.chunks(10) {
                s.write_all(chunk).unwrap();
                std::thread::sleep(Duration::from_micros(200));
            }
            let mut got = vec![0u8; sent.len()];
            s.read_exact(&mut got).unwrap();
            got
        }
    })
    .await
    .unwrap();
    assert!(echoed == sent, "bytes reordered or lost");

    // A cut link stalls a new connection (nothing comes back, it stays open); restored, the
    // byte sent during the cut arrives and the link forwards again.
    proxy.set_link_up(0, 1, false);
    let (stalled, mut conn) = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(delayed).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        s.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        let stalled = matches!(s.read(&mut b), Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
        (stalled, s)
    })
    .await
    .unwrap();
    assert!(stalled, "a cut link forwarded or closed");
    proxy.heal();
    let delivered = tokio::task::spawn_blocking(move || {
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        conn.read_exact(&mut b).map(|()| b[0])
    })
    .await
    .unwrap();
    assert_eq!(delivered.ok(), Some(b'x'), "the byte sent during the cut");
    let rtt = tokio::task::spawn_blocking(move || median_rtt(delayed, 1))
        .await
        .unwrap();
    assert!(rtt >= 2 * one_way);
    proxy.stop();
    assert!(
        TcpStream::connect(delayed).is_err() || {
            // The listener task may take a moment to drop its socket after abort.
            std::thread::sleep(Duration::from_millis(100));
            TcpStream::connect(delayed).is_err()
        }
    );
}

/// Median latency of `n` puts to the first member.
async fn median_put(endpoints: Vec<String>, n: usize) -> Duration {
    let mut client = etcd_client::Client::connect(&endpoints[..1], None)
        .await
        .expect("connect");
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        client.put(format!("k{i}"), "v", None).await.expect("put");
        lat.push(t.elapsed());
    }
    lat.sort();
    lat[n / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raft_cluster_elects_and_writes_through_the_delay_proxy() {
    let opts = RaftOptions {
        binary: Some(env!("CARGO_BIN_EXE_coordbench").into()),
        ..Default::default()
    };
    let one_way = Duration::from_millis(10);
    let mut latency = Vec::new();
    for net_delay in [
        None,
        Some(NetDelay {
            delay: one_way,
            jitter: Duration::ZERO,
        }),
    ] {
        let work = tempfile::tempdir().expect("tempdir");
        let mut spec = ClusterSpec::new(
            3,
            DiskKind::Tmpfs,
            Duration::from_secs(10),
            work.path().into(),
        );
        spec.net_delay = net_delay;
        let mut cluster = raft::start(&spec, &opts)
            .await
            .expect("3 members elect a leader");
        if net_delay.is_some() {
            // Every member reaches each other one through its own route: 3 x 2 links.
            assert_eq!(cluster.proxy().expect("proxy").routes().len(), 6);
        }
        latency.push(median_put(cluster.endpoints(), 15).await);
        cluster.stop();
    }
    let (direct, delayed) = (latency[0], latency[1]);
    // A write commits after a round trip to a follower (and one more if member 1 forwards
    // it to another leader).
    assert!(delayed >= 2 * one_way, "delayed put p50 {delayed:?}");
    assert!(
        delayed > direct + one_way,
        "direct {direct:?}, delayed {delayed:?}"
    );
}

#[test]
fn a_run_samples_its_servers_into_resources_csv() {
    let out = tempfile::tempdir().expect("tempdir");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_coordbench"))
        .args([
            "run",
            "--target",
            "raft",
            "--cluster-size",
            "1",
            "--disk",
            "nvme",
        ])
        .args([
            "--workload",
            "kv-put",
            "--clients",
            "2",
            "--warmup",
            "0s",
            "--duration",
            "2s",
        ])
        .args(["--quiet", "--out"])
        .arg(out.path())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("coordbench run");
    assert!(status.success(), "{status}");
    let csv = std::fs::read_to_string(out.path().join("resources.csv")).expect("resources.csv");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("t_s,member,pid,cpu_s,rss_bytes,disk_written_bytes")
    );
    assert!(lines.count() >= 2, "{csv}");
    let summary = std::fs::read_to_string(out.path().join("summary.csv")).expect("summary.csv");
    let mut rows = csv::Reader::from_reader(summary.as_bytes());
    let header = rows.headers().unwrap().clone();
    let row = rows.records().next().expect("a row").unwrap();
    let col = |name: &str| {
        let i = header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"));
        row[i].to_string()
    };
    assert_eq!(col("disk"), "nvme");
    assert_eq!(col("sync_delay_us"), "75");
    assert!(col("server_peak_rss_mb").parse::<f64>().unwrap() > 1.0);
    assert!(col("server_cpu_us_per_op").parse::<f64>().unwrap() > 0.0);
}
