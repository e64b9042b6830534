//! The etcd-API targets: real etcd (Debian's etcd-server, or `--endpoints`) and the
//! built-in Raft engine (`coordbench serve raft` members). One driver measures both.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use coordbench_drivers::etcd::{EtcdConfig, EtcdCoordinator, EtcdSecurity};
use coordbench_drivers::{ApiFamily, Coordinator};
use futures::future::BoxFuture;
use futures::FutureExt;

use super::{ConnectOptions, Descriptor, LeaderQuery, ReadyTarget, CONNECT_TIMEOUT};
use crate::config::RunConfig;
use coordbench_lab::election_timing::ElectionTiming;
use coordbench_lab::provision::{self, Cluster};
use coordbench_results::kinds::{FaultArg, TargetKind};

/// Every fault kind: replicated clusters with a leader, behind the proxy for partitions.
pub(super) const ALL_FAULTS: &[FaultArg] = &[
    FaultArg::KillLeader,
    FaultArg::KillRandom,
    FaultArg::PauseLeader,
    FaultArg::PauseRandom,
    FaultArg::PartitionLeader,
    FaultArg::PartitionRandom,
    FaultArg::RestartAll,
];

pub const ETCD: Descriptor = Descriptor {
    kind: TargetKind::Etcd,
    name: "etcd",
    family: ApiFamily::Etcd,
    client_lib: etcd_client,
    has_servers: true,
    quorum: true,
    leader: LeaderQuery::EtcdStatus,
    server_counters: false,
    faults: ALL_FAULTS,
    faults_note: "",
    workloads: None,
    emulated_disks: true,
    secure: true,
    engine: false,
    default_cluster_size: 3,
    max_cluster_size: None,
    election_timing: etcd_timing,
    prepare: prepare_boxed,
    connect: connect_etcd,
    probe: None,
};

pub const RAFT: Descriptor = Descriptor {
    kind: TargetKind::Raft,
    name: "raft",
    engine: true,
    election_timing: super::zookeeper::engine_timing,
    connect: connect_raft,
    ..ETCD
};

fn etcd_client(_: coordbench_results::kinds::ZkClientArg) -> &'static str {
    "etcd-client"
}

fn prepare_boxed<'a>(
    config: &'a RunConfig,
    dir: &'a Path,
) -> BoxFuture<'a, anyhow::Result<ReadyTarget>> {
    prepare(config, dir).boxed()
}

fn connect_etcd(
    options: ConnectOptions,
) -> BoxFuture<'static, anyhow::Result<Arc<dyn Coordinator>>> {
    connect(options, "etcd")
}

fn connect_raft(
    options: ConnectOptions,
) -> BoxFuture<'static, anyhow::Result<Arc<dyn Coordinator>>> {
    connect(options, "raft")
}

fn etcd_timing(timing: &ElectionTiming) -> Result<(), String> {
    provision::etcd::EtcdOptions::default()
        .with_timing(timing)
        .map(drop)
}

async fn prepare(config: &RunConfig, work_dir: &Path) -> anyhow::Result<ReadyTarget> {
    let mut security = config.etcd_security.clone();
    let cluster = if config.attached() {
        super::attached(config)
    } else {
        let certs = run_certificates(config, work_dir, &mut security)?;
        start(config, work_dir, certs, &security).await?
    };
    super::ready(config, cluster, security, config.zk_access.clone()).await
}

fn connect(
    options: ConnectOptions,
    name: &'static str,
) -> BoxFuture<'static, anyhow::Result<Arc<dyn Coordinator>>> {
    async move {
        let etcd = EtcdConfig {
            endpoints: options.endpoints,
            conns: options.conns,
            connect_timeout: CONNECT_TIMEOUT,
            security: options.etcd_security,
        };
        let coordinator = EtcdCoordinator::connect(&etcd).await.context(name)?;
        Ok(Arc::new(coordinator) as Arc<dyn Coordinator>)
    }
    .boxed()
}

/// `--secure` on etcd and raft: the run's certificates ([`super::run_certificates`]), and
/// the driver's TLS with the client certificate (added to `security`).
fn run_certificates(
    config: &RunConfig,
    work_dir: &Path,
    security: &mut EtcdSecurity,
) -> anyhow::Result<Option<coordbench_tls::RunCertificates>> {
    if !config.secure {
        return Ok(None);
    }
    let (certs, client) = super::run_certificates(work_dir)?;
    security.tls = Some(coordbench_tls::client_config(&client)?);
    Ok(Some(certs))
}

/// Starts the etcd or raft cluster of the run, secured with `certs` when given.
async fn start(
    config: &RunConfig,
    work_dir: &Path,
    certs: Option<coordbench_tls::RunCertificates>,
    security: &EtcdSecurity,
) -> anyhow::Result<Cluster> {
    let spec = super::cluster_spec(config, work_dir);
    if config.target == TargetKind::Raft {
        let options = provision::raft::RaftOptions {
            tls: certs,
            client: security.clone(),
            ..super::zookeeper::engine_options(config)?
        };
        return Ok(provision::raft::start(&spec, &options).await?);
    }
    let secure = match (certs, &security.tls, &security.user) {
        (Some(certs), Some(tls), Some(user)) => Some(provision::etcd::SecureEtcd {
            certs,
            tls: tls.clone(),
            user: user.clone(),
            token_ttl: None,
        }),
        (None, _, _) => None,
        _ => anyhow::bail!("--secure on etcd needs the run's TLS and user (internal error)"),
    };
    let options = provision::etcd::EtcdOptions {
        binary: config.etcd_bin.clone(),
        version: config.server_version.clone(),
        secure,
        ..Default::default()
    }
    .with_timing(&config.election_timing)
    .map_err(anyhow::Error::msg)?;
    Ok(provision::etcd::start(&spec, &options).await?)
}
