//! The ZooKeeper-protocol targets: real ZooKeeper (Debian's zookeeper package, or
//! `--endpoints`) and the built-in Zab engine (`coordbench serve zab` members). One driver
//! family measures both, through the driver's own client or (`--zk-client async`) zookeeper-async.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use coordbench_drivers::zookeeper::{ZkConfig, ZkCoordinator, ZkTls};
use coordbench_drivers::zookeeper_async::AsyncZkCoordinator;
use coordbench_drivers::{ApiFamily, Coordinator};
use futures::future::BoxFuture;
use futures::FutureExt;

use super::etcd::ALL_FAULTS;
use super::{ConnectOptions, Descriptor, LeaderQuery, ReadyTarget, CONNECT_TIMEOUT};
use crate::config::RunConfig;
use coordbench_lab::election_timing::ElectionTiming;
use coordbench_lab::provision;
use coordbench_lab::provision::zookeeper_tls::SecureZk;
use coordbench_results::kinds::{TargetKind, ZkClientArg};

pub const ZOOKEEPER: Descriptor = Descriptor {
    kind: TargetKind::Zookeeper,
    name: "zookeeper",
    family: ApiFamily::ZooKeeper,
    client_lib: zk_client_lib,
    has_servers: true,
    quorum: true,
    leader: LeaderQuery::FourLetterWords,
    server_counters: true,
    faults: ALL_FAULTS,
    faults_note: "",
    workloads: None,
    emulated_disks: true,
    secure: true,
    engine: false,
    default_cluster_size: 3,
    max_cluster_size: None,
    // Any heartbeat and MIN become a tickTime and a syncLimit (provision::zookeeper).
    election_timing: |_| Ok(()),
    prepare: prepare_boxed,
    connect: connect_boxed,
    probe: None,
};

pub const ZAB: Descriptor = Descriptor {
    kind: TargetKind::Zab,
    name: "zab",
    engine: true,
    election_timing: engine_timing,
    ..ZOOKEEPER
};

fn zk_client_lib(client: ZkClientArg) -> &'static str {
    match client {
        ZkClientArg::Client => "coordbench-zk-client",
        ZkClientArg::Async => "zookeeper-async",
    }
}

/// Whether the built-in engines' members can run with `timing`.
pub(super) fn engine_timing(timing: &ElectionTiming) -> Result<(), String> {
    provision::raft::RaftOptions::default()
        .with_timing(timing)
        .map(drop)
}

/// How the built-in engines' members start: from `--engine-bin` when given, with the
/// run's election timing.
pub(super) fn engine_options(config: &RunConfig) -> anyhow::Result<provision::raft::RaftOptions> {
    provision::raft::RaftOptions {
        binary: config.engine_bin.clone(),
        // zab: --enforce-auth (its TLS is added by `prepare`); raft is secured through
        // `tls` and auth for `client`'s user (etcd.rs).
        secure: config.secure,
        ..Default::default()
    }
    .with_timing(&config.election_timing)
    .map_err(anyhow::Error::msg)
}

fn prepare_boxed<'a>(
    config: &'a RunConfig,
    dir: &'a Path,
) -> BoxFuture<'a, anyhow::Result<ReadyTarget>> {
    prepare(config, dir).boxed()
}

async fn prepare(config: &RunConfig, work_dir: &Path) -> anyhow::Result<ReadyTarget> {
    let spec = super::cluster_spec(config, work_dir);
    let mut access = config.zk_access.clone();
    let secure = match config.secure && !config.attached() {
        true => Some(secure(work_dir)?),
        false => None,
    };
    if let Some(secure) = &secure {
        access.tls = Some(secure.client.clone());
    }
    let cluster = if config.attached() {
        super::attached(config)
    } else if config.target == TargetKind::Zab {
        let options = provision::raft::RaftOptions {
            tls: secure.as_ref().map(|s| s.certs.clone()),
            zk_client: secure.map(|s| s.client),
            ..engine_options(config)?
        };
        provision::zab::start(&spec, &options).await?
    } else {
        let options = provision::zookeeper::ZkOptions {
            classpath: config.zk_classpath.clone(),
            version: config.server_version.clone(),
            enforce_auth: config.secure,
            tls: secure,
            election_timing: config.election_timing,
            heap_mb: config
                .zk_heap_mb
                .unwrap_or(provision::zookeeper::ZkOptions::default().heap_mb),
            ..Default::default()
        };
        provision::zookeeper::start(&spec, &options).await?
    };
    super::ready(config, cluster, Default::default(), access).await
}

/// `--secure`: the run's certificates, and the driver's TLS with its client certificate.
fn secure(work_dir: &Path) -> anyhow::Result<SecureZk> {
    let (certs, client) = super::run_certificates(work_dir)?;
    let client = ZkTls::new(&client)?;
    Ok(SecureZk { certs, client })
}

fn connect_boxed(
    options: ConnectOptions,
) -> BoxFuture<'static, anyhow::Result<Arc<dyn Coordinator>>> {
    async move {
        let zk = ZkConfig {
            endpoints: options.endpoints,
            connect_timeout: CONNECT_TIMEOUT,
            access: options.zk_access,
        };
        let coordinator: Arc<dyn Coordinator> = match options.zk_client {
            ZkClientArg::Client => Arc::new(
                ZkCoordinator::connect(&zk)
                    .await
                    .context("zookeeper")?
                    .with_freezable_sessions(options.freezable_sessions),
            ),
            ZkClientArg::Async => Arc::new(
                AsyncZkCoordinator::connect(&zk)
                    .await
                    .context("zookeeper (zookeeper-async)")?,
            ),
        };
        Ok(coordinator)
    }
    .boxed()
}
