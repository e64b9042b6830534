//! PostgreSQL: one server coordbench starts (`provision::postgres`), or `--endpoints` to
//! attach; the PostgreSQL driver (advisory, lease-row; kv as upsert and select).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use coordbench_drivers::postgres::{PgConfig, PgCoordinator};
use coordbench_drivers::{ApiFamily, Coordinator};
use futures::future::BoxFuture;
use futures::FutureExt;

use super::redis::{KV_AND_LOCKS, STANDALONE_FAULTS};
use super::{ConnectOptions, Descriptor, LeaderQuery, ReadyTarget, CONNECT_TIMEOUT};
use crate::config::RunConfig;
use coordbench_lab::provision;
use coordbench_results::kinds::TargetKind;

pub const POSTGRES: Descriptor = Descriptor {
    kind: TargetKind::Postgres,
    name: "postgres",
    family: ApiFamily::Postgres,
    client_lib: |_| "tokio-postgres",
    has_servers: true,
    quorum: false,
    leader: LeaderQuery::Standalone,
    server_counters: false,
    faults: STANDALONE_FAULTS,
    faults_note: "it is one server without replication (no leader, no links); use kill-random, pause-random or restart-all",
    workloads: Some(KV_AND_LOCKS),
    emulated_disks: false,
    secure: false,
    engine: false,
    default_cluster_size: 1,
    max_cluster_size: Some(1),
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
        provision::postgres::start(&spec).await
    })
    .boxed()
}

fn connect_boxed(
    options: ConnectOptions,
) -> BoxFuture<'static, anyhow::Result<Arc<dyn Coordinator>>> {
    async move {
        let config = PgConfig {
            endpoints: options.endpoints,
            connect_timeout: CONNECT_TIMEOUT,
        };
        let coordinator = PgCoordinator::connect(&config).await.context("postgres")?;
        Ok(Arc::new(coordinator) as Arc<dyn Coordinator>)
    }
    .boxed()
}

fn probe(endpoint: &str) -> Box<dyn coordbench_drivers::probe::Probe> {
    Box::new(coordbench_drivers::postgres::PgProbe::new(endpoint))
}
