//! Targets: from a configuration to a running cluster (started here or attached) and the
//! driver that talks to it. The one place that knows which provisioner and which driver
//! each target uses.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use coordbench_drivers::etcd::{EtcdConfig, EtcdCoordinator, EtcdSecurity};
use coordbench_drivers::null::NullCoordinator;
use coordbench_drivers::zookeeper::{ZkAccess, ZkConfig, ZkCoordinator};
use coordbench_drivers::zookeeper_async::AsyncZkCoordinator;
use coordbench_drivers::Coordinator;

use crate::cli::{TargetKind, ZkClientArg};
use crate::config::RunConfig;
use crate::election_timing::ElectionTiming;
use crate::netdelay::NetDelay;
use crate::provision::{self, Cluster, ClusterSpec};

/// How long connecting to a target may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A target ready to measure. Dropping it stops every process it started.
pub struct ReadyTarget {
    pub coordinator: Arc<dyn Coordinator>,
    /// `None` for the in-process null target.
    pub cluster: Option<Cluster>,
    pub server_version: String,
    /// etcd, raft: how the run's clients reach the members (TLS, user); what fault
    /// injection's own clients use too.
    pub etcd_security: EtcdSecurity,
}

/// Starts (or attaches to) the configured target and connects to it. `work_dir` receives
/// member logs and, for disk=disk, data directories.
pub async fn prepare(config: &RunConfig, work_dir: &Path) -> anyhow::Result<ReadyTarget> {
    match config.target_kind {
        TargetKind::Null => {
            let coordinator = Arc::new(NullCoordinator::new());
            let server_version = coordinator.server_version().await?;
            Ok(ReadyTarget {
                coordinator,
                cluster: None,
                server_version,
                etcd_security: EtcdSecurity::default(),
            })
        }
        TargetKind::Etcd | TargetKind::Raft => {
            let name = if config.target_kind == TargetKind::Raft {
                "raft"
            } else {
                "etcd"
            };
            let mut security = config.etcd_security.clone();
            let cluster = if config.attached() {
                Cluster::attached(name, config.endpoints.clone())
            } else {
                let certs = run_certificates(config, work_dir, &mut security)?;
                start_etcd_api(config, work_dir, certs, &security).await?
            };
            ready(config, cluster, name, security).await
        }
        TargetKind::Zookeeper | TargetKind::Zab => {
            let cluster = if config.attached() {
                Cluster::attached(value_of(config.target_kind), config.endpoints.clone())
            } else if config.target_kind == TargetKind::Zab {
                provision::zab::start(&cluster_spec(config, work_dir), &engine_options(config)?)
                    .await?
            } else {
                let options = provision::zookeeper::ZkOptions {
                    classpath: config.zk_classpath.clone(),
                    enforce_auth: config.secure,
                    election_timing: config.election_timing,
                    ..Default::default()
                };
                provision::zookeeper::start(&cluster_spec(config, work_dir), &options).await?
            };
            ready(config, cluster, "zookeeper", EtcdSecurity::default()).await
        }
    }
}

/// The run's driver connected to a started or attached `cluster`, and its server version
/// (`name` says which target failed to answer).
async fn ready(
    config: &RunConfig,
    cluster: Cluster,
    name: &str,
    etcd_security: EtcdSecurity,
) -> anyhow::Result<ReadyTarget> {
    let coordinator = connect(
        config.target_kind,
        config.zk_client_kind,
        &config.zk_access,
        &etcd_security,
        cluster.endpoints(),
        config.conns,
        // Holder pauses freeze sessions through a relay each; others connect directly.
        config.workload_options.holder_pause.is_some(),
    )
    .await?;
    let server_version = coordinator
        .server_version()
        .await
        .context(name.to_string())?;
    Ok(ReadyTarget {
        coordinator,
        cluster: Some(cluster),
        server_version,
        etcd_security,
    })
}

/// `--secure` on etcd and raft: the run's CA and certificates in `<work_dir>/tls/`, and the
/// driver's TLS with the client certificate (added to `security`).
fn run_certificates(
    config: &RunConfig,
    work_dir: &Path,
    security: &mut EtcdSecurity,
) -> anyhow::Result<Option<coordbench_tls::RunCertificates>> {
    if !config.secure {
        return Ok(None);
    }
    let certs = coordbench_tls::generate(&work_dir.join("tls"))?;
    let tls = coordbench_tls::client_config(&coordbench_tls::ClientTls {
        ca: Some(certs.ca.clone()),
        cert: Some(certs.client_cert.clone()),
        key: Some(certs.client_key.clone()),
        skip_verify: false,
    })?;
    security.tls = Some(tls);
    Ok(Some(certs))
}

/// Starts the etcd or raft cluster of the run, secured with `certs` when given.
async fn start_etcd_api(
    config: &RunConfig,
    work_dir: &Path,
    certs: Option<coordbench_tls::RunCertificates>,
    security: &EtcdSecurity,
) -> anyhow::Result<Cluster> {
    let spec = cluster_spec(config, work_dir);
    if config.target_kind == TargetKind::Raft {
        let options = provision::raft::RaftOptions {
            tls: certs,
            client: security.clone(),
            ..engine_options(config)?
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
        secure,
        ..Default::default()
    }
    .with_timing(&config.election_timing)
    .map_err(anyhow::Error::msg)?;
    Ok(provision::etcd::start(&spec, &options).await?)
}

/// The target's driver connected to `endpoints` with `conns` connections (etcd API; the
/// ZooKeeper drivers keep one connection per session). Also how fault injection reaches
/// one member alone.
pub async fn connect(
    kind: TargetKind,
    zk_client: ZkClientArg,
    zk_access: &ZkAccess,
    etcd_security: &EtcdSecurity,
    endpoints: Vec<String>,
    conns: usize,
    freezable_sessions: bool,
) -> anyhow::Result<Arc<dyn Coordinator>> {
    Ok(match kind {
        TargetKind::Null => Arc::new(NullCoordinator::new()),
        TargetKind::Etcd | TargetKind::Raft => {
            let etcd = EtcdConfig {
                endpoints,
                conns,
                connect_timeout: CONNECT_TIMEOUT,
                security: etcd_security.clone(),
            };
            let name = if kind == TargetKind::Raft {
                "raft"
            } else {
                "etcd"
            };
            Arc::new(EtcdCoordinator::connect(&etcd).await.context(name)?)
        }
        TargetKind::Zookeeper | TargetKind::Zab => {
            let zk = ZkConfig {
                endpoints,
                connect_timeout: CONNECT_TIMEOUT,
                access: zk_access.clone(),
            };
            match zk_client {
                ZkClientArg::Client => Arc::new(
                    ZkCoordinator::connect(&zk)
                        .await
                        .context("zookeeper")?
                        .with_freezable_sessions(freezable_sessions),
                ),
                ZkClientArg::Async => Arc::new(
                    AsyncZkCoordinator::connect(&zk)
                        .await
                        .context("zookeeper (zookeeper-async)")?,
                ),
            }
        }
    })
}

fn value_of(kind: TargetKind) -> &'static str {
    if kind == TargetKind::Zab {
        "zab"
    } else {
        "zookeeper"
    }
}

/// How the built-in engines' members start: from `--engine-bin` when given, with the
/// run's election timing.
fn engine_options(config: &RunConfig) -> anyhow::Result<provision::raft::RaftOptions> {
    provision::raft::RaftOptions {
        binary: config.engine_bin.clone(),
        // zab: --enforce-auth; raft is secured through `tls` (start_etcd_api).
        secure: config.secure,
        ..Default::default()
    }
    .with_timing(&config.election_timing)
    .map_err(anyhow::Error::msg)
}

/// Whether `kind`'s provisioner can start members with `timing` (the same mapping the
/// start uses); a one-line reason when not.
pub fn check_election_timing(kind: TargetKind, timing: &ElectionTiming) -> Result<(), String> {
    match kind {
        TargetKind::Etcd => provision::etcd::EtcdOptions::default()
            .with_timing(timing)
            .map(drop),
        TargetKind::Raft | TargetKind::Zab => provision::raft::RaftOptions::default()
            .with_timing(timing)
            .map(drop),
        // Any heartbeat and MIN become a tickTime and a syncLimit (provision::zookeeper).
        TargetKind::Zookeeper | TargetKind::Null => Ok(()),
    }
}

fn cluster_spec(config: &RunConfig, work_dir: &Path) -> ClusterSpec {
    ClusterSpec {
        size: config.cluster_size,
        disk: config.disk,
        ttl: config.plan.ttl,
        base_port: config.base_port,
        work_dir: work_dir.to_path_buf(),
        sync_delay: config.sync_delay_us.map(Duration::from_micros),
        // Partition faults cut links in the proxy: without a delay asked for, it runs at zero.
        net_delay: config.net_delay.or_else(|| {
            config
                .fault_kinds
                .iter()
                .any(|k| k.is_partition())
                .then(NetDelay::default)
        }),
        net_delay_clients: config.net_delay_clients,
    }
}
