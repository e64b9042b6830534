//! What run.json keeps of a run's configuration (`config`): every option as a reader of
//! the file needs it, in names and units that stay stable, derived from the
//! [`RunConfig`] the run used (never a password or a key).

use std::path::PathBuf;

use coordbench_drivers::{ApiFamily, Consistency};
use coordbench_lab::affinity::CpuList;
use coordbench_lab::provision::DiskKind;
use coordbench_results::kinds::{value_name, WorkloadKind};
use serde::Serialize;

use super::RunConfig;
use crate::args::workloads::WorkloadOptions;
use crate::etcd_access::EtcdAccessRecord;
use crate::runner::LoadMode;
use crate::zk_access::ZkAccessRecord;

/// run.json `config`. The field order is the file's.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigRecord {
    pub target: String,
    /// The client library the driver uses (`coordbench-zk-client`, `zookeeper-async`,
    /// `etcd-client`, `null`).
    pub client_lib: String,
    pub workload: String,
    /// Lock recipe name as the target's family calls it (lock, election); empty otherwise.
    pub recipe: String,
    /// "closed" or "open".
    pub mode: String,
    pub rate: Option<f64>,
    pub clients: usize,
    pub conns: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub ops: Option<u64>,
    pub op_timeout_ms: u64,
    pub keys: usize,
    pub value_size: usize,
    pub consistency: String,
    pub locks: usize,
    /// election, discovery, config-watch options (flattened into run.json's `config`).
    #[serde(flatten)]
    pub workload_options: WorkloadOptions,
    pub hold_ms: f64,
    pub ttl_ms: u64,
    /// Client sessions opened at once before warm-up (`--session-opens`).
    pub session_opens: usize,
    pub cluster_size: usize,
    pub disk: DiskKind,
    pub endpoints: Vec<String>,
    /// etcd, zookeeper: the release asked for (`--server-version`); the release that ran is
    /// the cluster's `version`, where it came from its `source`.
    pub server_version: Option<String>,
    pub etcd_bin: Option<PathBuf>,
    pub zk_classpath: Option<String>,
    /// raft, zab: the coordbench binary the members ran from (`--engine-bin`); absent: this
    /// one.
    pub engine_bin: Option<PathBuf>,
    /// raft, zab: whether the engine's deterministic cost was counted (`--engine-cost`).
    pub engine_cost: bool,
    /// zookeeper: `client` or `async` (`--zk-client`); absent for other targets.
    pub zk_client: Option<String>,
    pub secure: bool,
    /// zookeeper, zab: auth scheme and user, ACL mode, chroot (never the password).
    #[serde(flatten)]
    pub zk_access: ZkAccessRecord,
    /// etcd, raft: whether TLS was used, with a CA and a client certificate, and the user.
    #[serde(flatten)]
    pub etcd_access: EtcdAccessRecord,
    pub base_port: Option<u16>,
    /// Emulated disks: the delay per sync, µs.
    pub sync_delay_us: Option<u64>,
    pub net_delay: Option<coordbench_lab::netdelay::NetDelay>,
    pub net_delay_clients: bool,
    /// The election timeout range asked for (`--election-timeout`, ms, as `150-300`);
    /// what the cluster ran with is `cluster.election_timing`.
    pub election_timeout: Option<String>,
    /// The heartbeat asked for (`--heartbeat`), ms.
    pub heartbeat_ms: Option<u32>,
    pub seed: u64,
    pub pin_client: Option<CpuList>,
    pub pin_servers: Option<CpuList>,
    /// The fault kinds injected during the run (`--fault`), as given (`kill-leader,...`).
    pub fault: Option<String>,
    /// Period between fault starts, ms.
    pub fault_every_ms: Option<u64>,
    /// How long each fault lasts, ms (`--fault-duration`).
    pub fault_duration_ms: Option<u64>,
    /// Keys written, watchers and sessions held before the window (`--preload-*`).
    #[serde(flatten)]
    pub preload: crate::preload::Preload,
    /// null: the injected service time, if any (`--service-time`).
    pub null_service: Option<crate::targets::null::NullServiceRecord>,
}

impl ConfigRecord {
    pub fn of(config: &RunConfig) -> Self {
        let plan = &config.plan;
        let family = config.family();
        let (election_timeout, heartbeat_ms) = config.election_timing.requested();
        let faults = config.faults.as_ref();
        ConfigRecord {
            target: value_name(config.target),
            client_lib: (crate::targets::descriptor(config.target).client_lib)(config.zk_client)
                .to_string(),
            workload: value_name(config.workload),
            recipe: if matches!(config.workload, WorkloadKind::Lock | WorkloadKind::Election) {
                family.recipe_name(config.lock_recipe).to_string()
            } else {
                String::new()
            },
            mode: match plan.mode {
                LoadMode::Open { .. } => "open",
                LoadMode::Closed => "closed",
            }
            .to_string(),
            rate: match plan.mode {
                LoadMode::Open { rate } => Some(rate),
                LoadMode::Closed => None,
            },
            clients: plan.clients,
            conns: config.conns,
            duration_s: plan.duration.as_secs_f64(),
            warmup_s: plan.warmup.as_secs_f64(),
            ops: config.ops,
            op_timeout_ms: config.op_timeout.as_millis() as u64,
            keys: config.keys,
            value_size: config.value_size,
            consistency: match config.read_consistency {
                Consistency::Linearizable => "linearizable",
                Consistency::Serializable => "serializable",
                Consistency::Sync => "sync",
            }
            .to_string(),
            locks: config.locks,
            workload_options: config.workload_options.clone(),
            hold_ms: config.hold.as_secs_f64() * 1000.0,
            ttl_ms: plan.ttl.as_millis() as u64,
            session_opens: plan.session_opens,
            cluster_size: config.cluster_size,
            disk: config.disk,
            endpoints: config.endpoints.clone(),
            server_version: config.server_version.as_ref().map(ToString::to_string),
            etcd_bin: config.etcd_bin.clone(),
            zk_classpath: config.zk_classpath.clone(),
            engine_bin: config.engine_bin.clone(),
            engine_cost: config.engine_cost,
            zk_client: (family == ApiFamily::ZooKeeper).then(|| value_name(config.zk_client)),
            secure: config.secure,
            zk_access: config.zk_access_record.clone(),
            etcd_access: config.etcd_access_record.clone(),
            base_port: config.base_port,
            sync_delay_us: config.sync_delay.map(|d| d.as_micros() as u64),
            net_delay: config.net_delay,
            net_delay_clients: config.net_delay_clients,
            election_timeout,
            heartbeat_ms,
            seed: config.seed,
            pin_client: config.pin_client.clone(),
            pin_servers: config.pin_servers.clone(),
            fault: faults.map(|f| {
                let names: Vec<String> = f.kinds.iter().map(|k| k.name()).collect();
                names.join(",")
            }),
            fault_every_ms: faults.map(|f| f.every.as_millis() as u64),
            fault_duration_ms: faults.map(|f| f.duration.as_millis() as u64),
            preload: config.preload,
            null_service: config.null_service,
        }
    }
}
