//! Targets: from a configuration to a running cluster (started here or attached) and the
//! driver that talks to it.
//!
//! Every target is one [`Descriptor`] in a module of its own (`etcd.rs` for etcd and raft,
//! `zookeeper.rs` for ZooKeeper and zab, `null.rs`, `redis.rs`, `postgres.rs`): how it is
//! provisioned and connected, which driver family it uses, and what it can do (leader
//! query, server counters, recipes, faults, workloads, security). The rest of coordbench
//! asks the descriptor ([`descriptor`]) instead of matching on [`TargetKind`], and a
//! request a target cannot serve is refused from it in one line ([`Descriptor::check`]).

mod etcd;
pub mod null;
mod postgres;
mod redis;
mod zookeeper;

use coordbench_results::kinds::value_name;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use coordbench_drivers::etcd::EtcdSecurity;
use coordbench_drivers::probe::Probe;
use coordbench_drivers::zookeeper::ZkAccess;
use coordbench_drivers::{ApiFamily, Coordinator};
use futures::future::BoxFuture;

use crate::args::RunArgs;
use crate::config::RunConfig;
use coordbench_lab::election_timing::ElectionTiming;
use coordbench_lab::netdelay::NetDelay;
use coordbench_lab::provision::{Cluster, ClusterSpec};
use coordbench_results::kinds::{FaultArg, TargetKind, WorkloadKind, ZkClientArg};

/// How long connecting to a target may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How fault injection (and readiness) learns who leads a started cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderQuery {
    /// No members to ask (null).
    None,
    /// etcd's Maintenance.Status (etcd, the Raft engine).
    EtcdStatus,
    /// ZooKeeper's `srvr` four-letter word (ZooKeeper, the Zab engine).
    FourLetterWords,
    /// Independent servers without a leader: each member that answers its protocol's ping
    /// counts as serving (redis instances, the postgres server).
    Standalone,
}

/// Everything a target's driver needs to connect.
#[derive(Clone)]
pub struct ConnectOptions {
    pub zk_client: ZkClientArg,
    pub zk_access: ZkAccess,
    pub etcd_security: EtcdSecurity,
    pub endpoints: Vec<String>,
    pub conns: usize,
    /// Holder pauses: sessions that can be frozen (ZooKeeper opens them through relays).
    pub freezable_sessions: bool,
}

/// Starts or attaches to the target of a run and connects its driver.
pub type Prepare =
    for<'a> fn(&'a RunConfig, &'a Path) -> BoxFuture<'a, anyhow::Result<ReadyTarget>>;
/// Connects the target's driver to endpoints.
pub type Connect = fn(ConnectOptions) -> BoxFuture<'static, anyhow::Result<Arc<dyn Coordinator>>>;

/// One target: how it is provisioned and reached, and what it can do.
pub struct Descriptor {
    pub kind: TargetKind,
    /// The name users type (`--target NAME`).
    pub name: &'static str,
    /// The driver family: recipes and their names follow it.
    pub family: ApiFamily,
    /// The client library the driver uses (the ZooKeeper family's depends on `--zk-client`).
    pub client_lib: fn(ZkClientArg) -> &'static str,
    /// False for the in-process null target: nothing is started or attached.
    pub has_servers: bool,
    /// Whether the members form one replicated cluster with a majority (etcd, ZooKeeper,
    /// the engines) or are independent servers (redis instances, postgres).
    pub quorum: bool,
    pub leader: LeaderQuery,
    /// Whether the members expose counters the run scrapes (ZooKeeper's `mntr`).
    pub server_counters: bool,
    /// The `--fault` kinds it can take, and why not the others (one line).
    pub faults: &'static [FaultArg],
    pub faults_note: &'static str,
    /// The workloads its driver runs (`None`: every one).
    pub workloads: Option<&'static [WorkloadKind]>,
    /// `--disk hdd|ssd|nvme` (a sync-delay FUSE mount of coordbench's) can hold its data.
    pub emulated_disks: bool,
    /// `--secure` starts it secured.
    pub secure: bool,
    /// `--engine-bin` applies (the built-in engines).
    pub engine: bool,
    /// `--cluster-size` when not given.
    pub default_cluster_size: usize,
    /// Largest `--cluster-size` it starts (`None`: any).
    pub max_cluster_size: Option<usize>,
    /// Whether its provisioner can start members with an election timing.
    pub election_timing: fn(&ElectionTiming) -> Result<(), String>,
    pub prepare: Prepare,
    pub connect: Connect,
    /// Standalone targets: a probe of whether the member at an endpoint answers.
    pub probe: Option<ProbeFn>,
}

/// Makes the probe of the member at an endpoint.
pub type ProbeFn = fn(&str) -> Box<dyn Probe>;

/// The descriptor of `kind`: the one place that maps a target to its module.
pub fn descriptor(kind: TargetKind) -> &'static Descriptor {
    match kind {
        TargetKind::Null => &null::NULL,
        TargetKind::Etcd => &etcd::ETCD,
        TargetKind::Raft => &etcd::RAFT,
        TargetKind::Zookeeper => &zookeeper::ZOOKEEPER,
        TargetKind::Zab => &zookeeper::ZAB,
        TargetKind::Redis => &redis::REDIS,
        TargetKind::Postgres => &postgres::POSTGRES,
    }
}

impl Descriptor {
    /// Refuses, in one line, what the target cannot do: a workload its driver lacks,
    /// a fault kind it cannot take, `--secure`, `--engine-bin`, a cluster size.
    pub fn check(&self, args: &RunArgs) -> Result<(), String> {
        if let Some(workloads) = self.workloads {
            if !workloads.contains(&args.load.workload) {
                let names: Vec<String> = workloads.iter().map(|w| value_name(*w)).collect();
                return Err(format!(
                    "--target {} runs the {} workloads; not --workload {}",
                    self.name,
                    names.join(", "),
                    value_name(args.load.workload)
                ));
            }
        }
        if let Some(kind) = args.faults.fault.iter().find(|k| !self.faults.contains(k)) {
            return Err(format!(
                "--fault {} is not available on --target {}: {}",
                kind.name(),
                self.name,
                self.faults_note
            ));
        }
        if args.cluster.disk.is_emulated() && args.starts_servers() && !self.emulated_disks {
            return Err(format!(
                "--disk {} is not available on --target {}: the sync-delay mount needs root, and as root the server runs as its own user, who cannot enter the mount; use --disk disk, tmpfs or nofsync",
                args.cluster.disk, self.name
            ));
        }
        if args.attach.secure && self.has_servers && !self.secure {
            return Err(format!(
                "--secure is not available on --target {}; run it without --secure",
                self.name
            ));
        }
        if args.cluster.engine_bin.is_some() && !self.engine {
            return Err("--engine-bin applies only to --target raft or zab".into());
        }
        if args.cluster.snapshot_every.is_some() && !args.starts_servers() {
            return Err("--snapshot-every applies to clusters coordbench starts (raft, zab, etcd, zookeeper)".into());
        }
        if args.cluster.engine_cost && !self.engine {
            return Err("--engine-cost applies only to --target raft or zab".into());
        }
        match self.max_cluster_size {
            Some(max) if args.starts_servers() && args.cluster_size() > max => Err(format!(
                "--target {} starts at most {max} server (--cluster-size {max}); it has no replication coordbench can start",
                self.name
            )),
            _ => Ok(()),
        }
    }

    /// Members `kind` needs: a majority must survive one failure on a replicated cluster;
    /// independent servers need none.
    pub fn min_members(&self, kind: FaultArg) -> usize {
        if self.quorum {
            kind.min_members()
        } else {
            1
        }
    }
}

/// A target ready to measure. Dropping it stops every process it started.
pub struct ReadyTarget {
    pub coordinator: Arc<dyn Coordinator>,
    /// `None` for the in-process null target.
    pub cluster: Option<Cluster>,
    pub server_version: String,
    /// etcd, raft: how the run's clients reach the members (TLS, user); what fault
    /// injection's own clients use too.
    pub etcd_security: EtcdSecurity,
    /// zookeeper, zab: the same (credentials, ACL, chroot, TLS; `--secure`'s TLS included).
    pub zk_access: ZkAccess,
}

/// Starts (or attaches to) the configured target and connects to it. `work_dir` receives
/// member logs and, for disk=disk, data directories.
pub async fn prepare(config: &RunConfig, work_dir: &Path) -> anyhow::Result<ReadyTarget> {
    (descriptor(config.target).prepare)(config, work_dir).await
}

/// The run's driver connected to a started or attached `cluster`, and its server version.
async fn ready(
    config: &RunConfig,
    cluster: Cluster,
    etcd_security: EtcdSecurity,
    zk_access: ZkAccess,
) -> anyhow::Result<ReadyTarget> {
    let target = descriptor(config.target);
    let coordinator = connect(
        config.target,
        config.zk_client,
        &zk_access,
        &etcd_security,
        cluster.endpoints(),
        config.conns,
        // Holder pauses freeze sessions through a relay each; others connect directly.
        config.workload_options.lock.holder_pause.is_some(),
    )
    .await?;
    let server_version = coordinator.server_version().await.context(target.name)?;
    Ok(ReadyTarget {
        coordinator,
        cluster: Some(cluster),
        server_version,
        etcd_security,
        zk_access,
    })
}

/// Prepares a target without security options: attached at `--endpoints`, or started by
/// `start` (the provisioner) from the run's cluster spec; then its driver connected.
async fn prepare_plain<F, Fut>(
    config: &RunConfig,
    dir: &Path,
    start: F,
) -> anyhow::Result<ReadyTarget>
where
    F: FnOnce(ClusterSpec) -> Fut,
    Fut: std::future::Future<Output = Result<Cluster, coordbench_lab::provision::ProvisionError>>,
{
    let cluster = if config.attached() {
        attached(config)
    } else {
        start(cluster_spec(config, dir)).await?
    };
    ready(
        config,
        cluster,
        EtcdSecurity::default(),
        config.zk_access.clone(),
    )
    .await
}

/// `--secure`: the run's CA and certificates in `<work_dir>/tls/`, and the client side
/// of them (the CA to verify members by, the client certificate to present).
fn run_certificates(
    work_dir: &Path,
) -> anyhow::Result<(coordbench_tls::RunCertificates, coordbench_tls::ClientTls)> {
    let certs = coordbench_tls::generate(&work_dir.join("tls"))?;
    let client = coordbench_tls::ClientTls {
        ca: Some(certs.ca.clone()),
        cert: Some(certs.client_cert.clone()),
        key: Some(certs.client_key.clone()),
        skip_verify: false,
    };
    Ok((certs, client))
}

/// An attached cluster of `config`'s target at `--endpoints`.
fn attached(config: &RunConfig) -> Cluster {
    Cluster::attached(descriptor(config.target).name, config.endpoints.clone())
}

/// The target's driver connected to `endpoints` with `conns` connections (etcd API; the
/// other drivers keep one connection per session). Also how fault injection reaches
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
    let options = ConnectOptions {
        zk_client,
        zk_access: zk_access.clone(),
        etcd_security: etcd_security.clone(),
        endpoints,
        conns,
        freezable_sessions,
    };
    (descriptor(kind).connect)(options).await
}

/// Whether `kind`'s provisioner can start members with `timing` (the same mapping the
/// start uses); a one-line reason when not.
pub fn check_election_timing(kind: TargetKind, timing: &ElectionTiming) -> Result<(), String> {
    (descriptor(kind).election_timing)(timing)
}

/// A probe of the member of `kind` at `endpoint` (`None` for targets without one).
pub fn probe(kind: TargetKind, endpoint: &str) -> Option<Box<dyn Probe>> {
    descriptor(kind).probe.map(|new| new(endpoint))
}

/// For targets without elections: any timing is refused.
fn no_election_timing(_: &ElectionTiming) -> Result<(), String> {
    Err("--election-timeout and --heartbeat apply to replicated targets (etcd, zookeeper, raft, zab); redis and postgres hold no elections".into())
}

fn cluster_spec(config: &RunConfig, work_dir: &Path) -> ClusterSpec {
    ClusterSpec {
        size: config.cluster_size,
        disk: config.disk,
        ttl: config.plan.ttl,
        base_port: config.base_port,
        work_dir: work_dir.to_path_buf(),
        sync_delay: config.sync_delay,
        // Partition faults cut links in the proxy: without a delay asked for, it runs at zero.
        net_delay: config.net_delay.or_else(|| {
            config
                .faults
                .iter()
                .flat_map(|f| &f.kinds)
                .any(|k| k.is_partition())
                .then(NetDelay::default)
        }),
        net_delay_clients: config.net_delay_clients,
        snapshot_every: config.snapshot_every,
        auto_compaction: config.auto_compaction.clone(),
    }
}
