//! Redis: N independent `redis-server` instances (`--cluster-size N`, no replication) that
//! coordbench starts (`provision::redis`), or `--endpoints` to attach; the Redis driver
//! (set-nx, set-nx-notify, redlock; kv as SET and GET).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use coordbench_drivers::redis::{RedisConfig, RedisCoordinator};
use coordbench_drivers::{ApiFamily, Coordinator};
use futures::future::BoxFuture;
use futures::FutureExt;

use super::{ConnectOptions, Descriptor, LeaderQuery, ReadyTarget, CONNECT_TIMEOUT};
use crate::config::RunConfig;
use coordbench_lab::provision;
use coordbench_results::kinds::{FaultArg, TargetKind, WorkloadKind};

/// Faults on independent servers: one of them, or all.
pub(super) const STANDALONE_FAULTS: &[FaultArg] = &[
    FaultArg::KillRandom,
    FaultArg::PauseRandom,
    FaultArg::RestartAll,
];

/// What the Redis and PostgreSQL drivers run.
pub(super) const KV_AND_LOCKS: &[WorkloadKind] = &[
    WorkloadKind::KvPut,
    WorkloadKind::KvGet,
    WorkloadKind::KvMixed,
    WorkloadKind::Lock,
];

pub const REDIS: Descriptor = Descriptor {
    kind: TargetKind::Redis,
    name: "redis",
    family: ApiFamily::Redis,
    client_lib: |_| "redis-rs",
    has_servers: true,
    quorum: false,
    leader: LeaderQuery::Standalone,
    server_counters: false,
    faults: STANDALONE_FAULTS,
    faults_note: "its instances are independent (no leader, no links between them); use kill-random, pause-random or restart-all",
    workloads: Some(KV_AND_LOCKS),
    emulated_disks: true,
    secure: false,
    engine: false,
    default_cluster_size: 3,
    max_cluster_size: None,
    election_timing: super::no_election_timing,
    prepare: prepare_boxed,
    connect: connect_boxed,
    probe: Some(probe),
};

fn prepare_boxed<'a>(
    config: &'a RunConfig,
    dir: &'a Path,
) -> BoxFuture<'a, anyhow::Result<ReadyTarget>> {
    super::prepare_plain(config, dir, |spec| async move {
        provision::redis::start(&spec).await
    })
    .boxed()
}

fn connect_boxed(
    options: ConnectOptions,
) -> BoxFuture<'static, anyhow::Result<Arc<dyn Coordinator>>> {
    async move {
        let config = RedisConfig {
            endpoints: options.endpoints,
            connect_timeout: CONNECT_TIMEOUT,
        };
        let coordinator = RedisCoordinator::connect(&config).await.context("redis")?;
        Ok(Arc::new(coordinator) as Arc<dyn Coordinator>)
    }
    .boxed()
}

fn probe(endpoint: &str) -> Box<dyn coordbench_drivers::probe::Probe> {
    Box::new(coordbench_drivers::redis::RedisProbe::new(endpoint))
}
