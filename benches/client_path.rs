//! The load generator's per-operation client path against real engine processes, so a
//! costlier driver or runtime cannot slip in unnoticed: one put through the etcd driver's
//! `Session` (etcd-client's gRPC clients over the driver's own HTTP/2 transport,
//! drivers/src/etcd/transport) against one `coordbench serve raft` member, and one through
//! the ZooKeeper driver against one `coordbench serve zab` member, each alone and as a
//! burst of 64 sessions sharing the driver's connections (the closed-loop kv-put shape,
//! where HTTP/2 batching decides what a put costs); and the etcd burst against 3 raft
//! members, where the transport spreads the calls over the three connections. Runs on a
//! multi-thread runtime like the generator's.
//!
//! Run with `cargo bench --bench client_path`; `cargo test --all-targets` runs each case
//! once (a few seconds: it starts and stops the two members).

use std::sync::Arc;
use std::time::Duration;

use coordbench_drivers::etcd::{EtcdConfig, EtcdCoordinator};
use coordbench_drivers::zookeeper::{ZkConfig, ZkCoordinator};
use coordbench_drivers::{Coordinator, Session, SessionOptions};
use coordbench_lab::provision::raft::{self, RaftOptions};
use coordbench_lab::provision::{zab, Cluster, ClusterSpec, DiskKind};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::future::try_join_all;
use tokio::runtime::Runtime;

/// Sessions in the burst case: the brief's `--clients 64`.
const BURST: usize = 64;
const VALUE: &[u8] = &[b'x'; 256];
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A runtime like the generator's (see src/main.rs).
fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// `members` members of `engine` on tmpfs, served by the coordbench binary cargo built.
fn start(rt: &Runtime, engine: &str, members: usize, dir: &tempfile::TempDir) -> Cluster {
    let spec = ClusterSpec::new(
        members,
        DiskKind::Tmpfs,
        Duration::from_secs(10),
        dir.path().to_path_buf(),
    );
    let opts = RaftOptions {
        binary: Some(env!("CARGO_BIN_EXE_coordbench").into()),
        ..Default::default()
    };
    let started = match engine {
        "raft" => rt.block_on(raft::start(&spec, &opts)),
        _ => rt.block_on(zab::start(&spec, &opts)),
    };
    started.unwrap_or_else(|e| panic!("starting a {engine} member: {e}"))
}

async fn connect(engine: &str, endpoints: Vec<String>) -> Arc<dyn Coordinator> {
    if engine == "raft" {
        let config = EtcdConfig {
            endpoints,
            conns: 1,
            connect_timeout: CONNECT_TIMEOUT,
            security: Default::default(),
        };
        Arc::new(EtcdCoordinator::connect(&config).await.expect("connect"))
    } else {
        let config = ZkConfig {
            endpoints,
            connect_timeout: CONNECT_TIMEOUT,
            access: Default::default(),
        };
        Arc::new(ZkCoordinator::connect(&config).await.expect("connect"))
    }
}

async fn sessions(c: &dyn Coordinator, n: usize) -> Vec<Box<dyn Session>> {
    let options = SessionOptions {
        ttl: Duration::from_secs(10),
    };
    let mut out = Vec::with_capacity(n);
    for client in 0..n {
        out.push(c.open_session(client, &options).await.expect("session"));
    }
    out
}

/// A put by every session at once, each on its own key.
async fn burst(sessions: &mut [Box<dyn Session>], keys: &[String]) {
    try_join_all(
        sessions
            .iter_mut()
            .zip(keys)
            .map(|(s, key)| s.put(key, VALUE)),
    )
    .await
    .expect("burst of puts");
}

fn bench_engine(c: &mut Criterion, engine: &str, members: usize) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = start(&rt, engine, members, &dir);
    let coordinator = rt.block_on(connect(engine, cluster.endpoints()));
    let mut all = rt.block_on(sessions(coordinator.as_ref(), BURST));
    let keys: Vec<String> = (0..BURST)
        .map(|i| format!("/coordbench/kv/bench{i:04}"))
        .collect();
    let name = match members {
        1 => engine.to_string(),
        n => format!("{engine}x{n}"),
    };
    let mut group = c.benchmark_group(format!("client_path/{name}"));
    if members == 1 {
        group.throughput(Throughput::Elements(1));
        group.bench_function("put", |b| {
            b.iter(|| rt.block_on(all[0].put(&keys[0], VALUE)).expect("put"))
        });
    }
    group.throughput(Throughput::Elements(BURST as u64));
    group.bench_function("put_x64_sessions", |b| {
        b.iter(|| rt.block_on(burst(&mut all, &keys)))
    });
    group.finish();
    rt.block_on(async {
        for mut s in all {
            let _ = s.close().await;
        }
    });
    drop(coordinator);
    cluster.stop();
}

fn etcd_driver_on_raft(c: &mut Criterion) {
    bench_engine(c, "raft", 1);
}

fn etcd_driver_on_three_raft_members(c: &mut Criterion) {
    bench_engine(c, "raft", 3);
}

fn zookeeper_driver_on_zab(c: &mut Criterion) {
    bench_engine(c, "zab", 1);
}

criterion_group! {
    name = benches;
    // No plots: criterion's plotters backend panics where no system font is installed.
    config = Criterion::default()
        .without_plots()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = etcd_driver_on_raft, etcd_driver_on_three_raft_members, zookeeper_driver_on_zab
}
criterion_main!(benches);
