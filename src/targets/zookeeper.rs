//! The ZooKeeper-protocol targets: real ZooKeeper (Debian's zookeeper package, or
//! `--endpoints`) and the built-in Zab engine (`coordbench serve zab` members). One driver
//! family measures both, through zookeeper-client or (`--zk-client async`) zookeeper-async.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use coordbench_drivers::zookeeper::{ZkConfig, ZkCoordinator};
use coordbench_drivers::zookeeper_async::AsyncZkCoordinator;
use coordbench_drivers::{ApiFamily, Coordinator};
use futures::future::BoxFuture;
use futures::FutureExt;

use super::etcd::ALL_FAULTS;
use super::{ConnectOptions, Descriptor, LeaderQuery, ReadyTarget, CONNECT_TIMEOUT};
use crate::cli::{TargetKind, ZkClientArg};
use crate::config::RunConfig;
use crate::election_timing::ElectionTiming;
use crate::provision;

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
        ZkClientArg::Client => "zookeeper-client",
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
        // zab: --enforce-auth; raft is secured through `tls` (etcd.rs).
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
    let cluster = if config.attached() {
        super::attached(config)
    } else if config.target_kind == TargetKind::Zab {
        provision::zab::start(&spec, &engine_options(config)?).await?
    } else {
        let options = provision::zookeeper::ZkOptions {
            classpath: config.zk_classpath.clone(),
            enforce_auth: config.secure,
            election_timing: config.election_timing,
            ..Default::default()
        };
        provision::zookeeper::start(&spec, &options).await?
    };
    super::ready(config, cluster, Default::default()).await
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
