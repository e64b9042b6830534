//! A validated run configuration: the command line checked for combinations that make no
//! sense, with every value the results need to describe themselves. Stored in run.json.

use std::path::PathBuf;
use std::time::Duration;

use coordbench_drivers::{zookeeper_async, ApiFamily, Consistency, LockRecipe};
use serde::Serialize;

use crate::affinity::CpuList;
use crate::cli::{
    ConsistencyArg, FaultArg, ProtectArg, RunArgs, TargetKind, WorkloadKind, ZkClientArg,
};
use crate::election_timing::ElectionTiming;
use crate::etcd_access::{self, EtcdAccessRecord};
use crate::provision::{self, DiskKind};
use crate::runner::{LoadMode, LoadPlan};
use crate::shard::{Part, Sharding, StartRule};
use crate::workload_options::{self, WorkloadOptions};
use crate::zk_access::{self as access, ZkAccessRecord};
use coordbench_drivers::etcd::EtcdSecurity;
use coordbench_drivers::zookeeper::ZkAccess;

/// A configuration error: one line that says what to change.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// Everything that defines a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunConfig {
    pub target: String,
    /// The client library the driver uses (`zookeeper-client`, `zookeeper-async`,
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
    pub cluster_size: usize,
    pub disk: DiskKind,
    /// Non-empty when attached to a cluster the user runs.
    pub endpoints: Vec<String>,
    /// etcd, zookeeper: the release asked for (`--server-version`); the release that ran is
    /// the cluster's `version`, where it came from its `source`.
    pub server_version: Option<String>,
    pub etcd_bin: Option<PathBuf>,
    pub zk_classpath: Option<String>,
    /// raft, zab: the coordbench binary the members ran from (`--engine-bin`); absent: this
    /// one.
    pub engine_bin: Option<PathBuf>,
    /// zookeeper: `client` or `async` (`--zk-client`); absent for other targets.
    pub zk_client: Option<String>,
    /// Whether coordbench started the cluster secured (`--secure`).
    pub secure: bool,
    /// zookeeper, zab: auth scheme and user, ACL mode, chroot (never the password).
    #[serde(flatten)]
    pub zk_access_record: ZkAccessRecord,
    #[serde(skip)]
    pub zk_access: ZkAccess,
    /// etcd, raft: whether TLS was used, with a CA and a client certificate, and the user
    /// (never a password or key).
    #[serde(flatten)]
    pub etcd_access_record: EtcdAccessRecord,
    /// etcd, raft: the driver's TLS and user (`--secure`: TLS is added once the run's
    /// certificates are generated).
    #[serde(skip)]
    pub etcd_security: EtcdSecurity,
    pub base_port: Option<u16>,
    /// Emulated disks: the delay per sync, µs (the profile's unless `--sync-delay`).
    pub sync_delay_us: Option<u64>,
    /// One-way delay (and jitter) between members through the proxy, if any.
    pub net_delay: Option<crate::netdelay::NetDelay>,
    /// Whether clients' traffic to members is delayed too.
    pub net_delay_clients: bool,
    /// The election timeout range asked for (`--election-timeout`, ms, as `150-300`);
    /// what the cluster ran with is `cluster.election_timing`.
    pub election_timeout: Option<String>,
    /// The heartbeat asked for (`--heartbeat`), ms.
    pub heartbeat_ms: Option<u32>,
    #[serde(skip)]
    pub election_timing: ElectionTiming,
    pub seed: u64,
    /// CPUs the load generator is pinned to (`--pin-client`), if any.
    pub pin_client: Option<CpuList>,
    /// CPUs the started members are pinned to (`--pin-servers`), if any.
    pub pin_servers: Option<CpuList>,
    /// The fault kinds injected during the run (`--fault`), as given (`kill-leader,...`).
    pub fault: Option<String>,
    /// Period between fault starts, ms.
    pub fault_every_ms: Option<u64>,
    /// How long each fault lasts, ms (`--fault-duration`).
    pub fault_duration_ms: Option<u64>,
    #[serde(skip)]
    pub fault_kinds: Vec<FaultArg>,
    #[serde(skip)]
    pub target_kind: TargetKind,
    #[serde(skip)]
    pub workload_kind: WorkloadKind,
    #[serde(skip)]
    pub zk_client_kind: ZkClientArg,
    #[serde(skip)]
    pub lock_recipe: LockRecipe,
    #[serde(skip)]
    pub read_consistency: Consistency,
    /// Keys written, watchers and sessions held before the window (`--preload-*`).
    #[serde(flatten)]
    pub preload: crate::preload::Preload,
    /// null: the injected service time, if any (`--service-time`).
    pub null_service: Option<crate::targets::null::NullServiceRecord>,
    #[serde(skip)]
    pub plan: LoadPlan,
    /// `--shard` and its start rule (run.json records them apart, as `shard`).
    #[serde(skip)]
    pub sharding: Option<Sharding>,
}

/// `--keys` when not given: the kv workloads spread over many keys (the preloaded ones,
/// with `--preload-keys`), the register workload makes its clients contend on a few.
fn default_keys(workload: WorkloadKind, preload: Option<u64>) -> usize {
    match (workload, preload) {
        (WorkloadKind::Register, _) => 4,
        (_, Some(n)) => n as usize,
        _ => 1000,
    }
}

impl RunConfig {
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        let family = family_of(args.target);
        let lock_recipe = family
            .parse_recipe(args.recipe.as_deref())
            .map_err(ConfigError)?;
        let (workload_options, shape) = workload_options::resolve(args).map_err(ConfigError)?;
        crate::targets::descriptor(args.target)
            .check(args)
            .map_err(ConfigError)?;
        validate_pinning(args)?;
        validate_cluster_emulation(args)?;
        validate_faults(args)?;
        validate_binaries(args)?;
        let election_timing = validate_election_timing(args)?;
        let target = crate::targets::descriptor(args.target);
        if !target.has_servers && !args.endpoints.is_empty() {
            return Err(ConfigError(format!(
                "--endpoints cannot be used with --target {}",
                target.name
            )));
        }
        if family_of(args.target) == ApiFamily::ZooKeeper
            && workload_options::sessions_are_per_client(args.workload)
            && args.conns.is_some_and(|c| c != args.clients)
        {
            return Err(ConfigError(
                "--conns does not apply to zookeeper: each client has its own session (its own connection), which owns its locks; omit --conns".into(),
            ));
        }
        if args.target != TargetKind::Zookeeper && args.zk_classpath.is_some() {
            return Err(ConfigError(
                "--zk-classpath applies only to --target zookeeper".into(),
            ));
        }
        if family_of(args.target) != ApiFamily::ZooKeeper && args.zk_client.is_some() {
            return Err(ConfigError(
                "--zk-client applies only to --target zookeeper".into(),
            ));
        }
        let zk_client_kind = args.zk_client.unwrap_or_default();
        if zk_client_kind == ZkClientArg::Async {
            if matches!(
                args.workload,
                WorkloadKind::Election
                    | WorkloadKind::Discovery
                    | WorkloadKind::ConfigWatch
                    | WorkloadKind::Register
                    | WorkloadKind::Barrier
            ) {
                return Err(ConfigError(format!(
                    "--zk-client async runs only the kv and lock workloads (zookeeper-async has no session id to recognise its own nodes and drops watches on reconnect); omit --zk-client for --workload {}",
                    value_name(args.workload)
                )));
            }
            if matches!(args.workload, WorkloadKind::KvGet | WorkloadKind::KvMixed)
                && args.consistency == ConsistencyArg::Linearizable
            {
                return Err(ConfigError(
                    "--zk-client async cannot read linearizably (zookeeper-async has no sync()); use --consistency serializable".into(),
                ));
            }
            if args.ttl < zookeeper_async::MIN_SESSION_TIMEOUT {
                return Err(ConfigError(
                    "--zk-client async needs --ttl 1500ms or more (below it zookeeper-async's read deadline is zero and it reconnects endlessly)".into(),
                ));
            }
        }
        validate_holder_pauses(args, family, lock_recipe, zk_client_kind)?;
        validate_secure(args)?;
        let resolved = access::resolve(
            &args.zk_access,
            &args.tls,
            args.target,
            zk_client_kind,
            args.secure,
            std::env::var(access::PASSWORD_ENV).ok(),
        )
        .map_err(ConfigError)?;
        let etcd = etcd_access::resolve(
            &args.etcd_access,
            &args.tls,
            args.target,
            &args.endpoints,
            args.secure,
            std::env::var(etcd_access::PASSWORD_ENV).ok(),
        )
        .map_err(ConfigError)?;
        if args.ttl < Duration::from_secs(1) && family == ApiFamily::Etcd {
            return Err(ConfigError(
                "--ttl must be at least 1s on the etcd API (leases are whole seconds)".into(),
            ));
        }
        let clients = shape.clients;
        let sharding = Sharding::from_args(args, clients).map_err(ConfigError)?;
        let mode = match shape.rate {
            Some(rate) => LoadMode::Open { rate },
            None => LoadMode::Closed,
        };
        let read_consistency = match args.consistency {
            ConsistencyArg::Linearizable => Consistency::Linearizable,
            ConsistencyArg::Serializable => Consistency::Serializable,
        };
        // A barrier run counts every barrier from the first, and lasts until all are passed.
        let (warmup, duration) = if args.workload == WorkloadKind::Barrier {
            (Duration::ZERO, workload_options::BARRIER_TIME_LIMIT)
        } else {
            (args.warmup, args.duration)
        };
        let plan = LoadPlan {
            clients,
            mode,
            warmup,
            duration,
            max_ops: shape.max_ops,
            // A paused holder's own stall is not the server's slowness: its operation may
            // take the pause on top of --op-timeout before it counts as a timeout.
            op_timeout: args.op_timeout
                + workload_options
                    .holder_pause
                    .map_or(Duration::ZERO, |p| p.duration),
            interval: Duration::from_secs(1),
            ttl: args.ttl,
            part: sharding.as_ref().map_or(Part::WHOLE, |s| s.part),
            start: sharding
                .as_ref()
                .map_or(StartRule::Now, |s| s.start.clone()),
        };
        Ok(RunConfig {
            target: value_name(args.target),
            client_lib: (crate::targets::descriptor(args.target).client_lib)(zk_client_kind)
                .to_string(),
            workload: value_name(args.workload),
            recipe: if matches!(args.workload, WorkloadKind::Lock | WorkloadKind::Election) {
                family.recipe_name(lock_recipe).to_string()
            } else {
                String::new()
            },
            mode: if shape.rate.is_some() {
                "open"
            } else {
                "closed"
            }
            .to_string(),
            rate: shape.rate,
            clients,
            conns: shape.conns,
            duration_s: duration.as_secs_f64(),
            warmup_s: warmup.as_secs_f64(),
            ops: args.ops,
            op_timeout_ms: args.op_timeout.as_millis() as u64,
            keys: args.keys.map_or(
                default_keys(args.workload, args.preload.preload_keys),
                |k| k as usize,
            ),
            value_size: args.value_size as usize,
            consistency: value_name(args.consistency),
            locks: args.locks as usize,
            workload_options,
            hold_ms: args.hold.as_secs_f64() * 1000.0,
            ttl_ms: args.ttl.as_millis() as u64,
            cluster_size: args.cluster_size(),
            disk: args.disk,
            endpoints: args.endpoints.clone(),
            server_version: args.server_version.as_ref().map(ToString::to_string),
            etcd_bin: args.etcd_bin.clone(),
            zk_classpath: args.zk_classpath.clone(),
            engine_bin: args.engine_bin.clone(),
            zk_client: (family_of(args.target) == ApiFamily::ZooKeeper)
                .then(|| value_name(zk_client_kind)),
            secure: args.secure,
            zk_access_record: resolved.record,
            zk_access: resolved.access,
            etcd_access_record: etcd.record,
            etcd_security: etcd.security,
            base_port: args.base_port,
            sync_delay_us: args.disk.is_emulated().then(|| {
                args.sync_delay
                    .unwrap_or(args.disk.sync_delay())
                    .as_micros() as u64
            }),
            net_delay: args.net_delay,
            net_delay_clients: args.net_delay_clients,
            election_timeout: election_timing.requested().0,
            heartbeat_ms: election_timing.requested().1,
            election_timing,
            seed: args.seed,
            pin_client: args.pin_client.clone(),
            pin_servers: args.pin_servers.clone(),
            fault: (!args.fault.is_empty()).then(|| {
                let names: Vec<String> = args.fault.iter().map(|k| k.name()).collect();
                names.join(",")
            }),
            fault_every_ms: (!args.fault.is_empty()).then_some(args.fault_every.as_millis() as u64),
            fault_duration_ms: (!args.fault.is_empty())
                .then_some(fault_duration(args).as_millis() as u64),
            fault_kinds: args.fault.clone(),
            target_kind: args.target,
            workload_kind: args.workload,
            zk_client_kind,
            lock_recipe,
            read_consistency,
            preload: crate::preload::Preload::of(&args.preload),
            null_service: crate::targets::null::service_record(args).map_err(ConfigError)?,
            plan,
            sharding,
        })
    }

    /// True when the run uses a cluster the user runs.
    pub fn attached(&self) -> bool {
        !self.endpoints.is_empty()
    }

    /// The faults to inject (`--fault`), if any.
    pub fn fault_plan(&self) -> Option<crate::fault::FaultPlan> {
        let (every, duration) = (self.fault_every_ms?, self.fault_duration_ms?);
        Some(crate::fault::FaultPlan {
            kinds: self.fault_kinds.clone(),
            every: Duration::from_millis(every),
            duration: Duration::from_millis(duration),
            seed: self.seed,
        })
    }
}

/// `--election-timeout` and `--heartbeat` shape clusters coordbench starts, as far as the
/// target can take them (its provisioner's mapping decides, so the error is the one the
/// start would give, before anything starts).
fn validate_election_timing(args: &RunArgs) -> Result<ElectionTiming, ConfigError> {
    let timing = ElectionTiming::new(args.election_timeout, args.heartbeat).map_err(ConfigError)?;
    if timing.is_default() {
        return Ok(timing);
    }
    if !args.starts_servers() {
        return Err(ConfigError(
            "--election-timeout and --heartbeat apply to clusters coordbench starts; omit them with --endpoints or --target null".into(),
        ));
    }
    crate::targets::check_election_timing(args.target, &timing).map_err(ConfigError)?;
    Ok(timing)
}

/// `--secure` starts a secured cluster, so it needs one coordbench starts.
fn validate_secure(args: &RunArgs) -> Result<(), ConfigError> {
    if !args.secure {
        return Ok(());
    }
    let target = crate::targets::descriptor(args.target);
    match target.family {
        _ if !target.has_servers => Err(ConfigError(format!(
            "--secure applies to clusters coordbench starts; omit it with --target {}",
            target.name
        ))),
        ApiFamily::Etcd if !args.endpoints.is_empty() => Err(ConfigError(
            "--secure starts a secured cluster; against --endpoints pass --cacert, --cert, --key (and --user for etcd) instead".into(),
        )),
        _ if !args.endpoints.is_empty() => Err(ConfigError(
            "--secure starts a secured cluster; against --endpoints pass --zk-auth (and --zk-acl creator; --cacert, --cert, --key for a secure client port) instead".into(),
        )),
        _ => Ok(()),
    }
}

/// CPU lists must name CPUs this process may use; servers can be pinned only when
/// coordbench starts them.
fn validate_pinning(args: &RunArgs) -> Result<(), ConfigError> {
    for (flag, list) in [
        ("--pin-client", &args.pin_client),
        ("--pin-servers", &args.pin_servers),
    ] {
        if let Some(list) = list {
            list.check_available()
                .map_err(|e| ConfigError(format!("{flag}: {e}")))?;
        }
    }
    if args.pin_servers.is_some() && !args.starts_servers() {
        return Err(ConfigError(
            "--pin-servers applies only to members coordbench starts; omit it with --endpoints or --target null".into(),
        ));
    }
    Ok(())
}

/// Holder pauses need a driver that can freeze a session, and `--protect txn` a recipe
/// whose lock the service can check.
fn validate_holder_pauses(
    args: &RunArgs,
    family: ApiFamily,
    recipe: LockRecipe,
    zk_client: ZkClientArg,
) -> Result<(), ConfigError> {
    if args.holder_pause.is_some() && zk_client == ZkClientArg::Async {
        return Err(ConfigError(
            "--holder-pause needs --zk-client client (zookeeper-async's sessions cannot be frozen: it replaces an expired session silently); omit --zk-client".into(),
        ));
    }
    if args.protect == Some(ProtectArg::Txn) && zk_client == ZkClientArg::Async {
        return Err(ConfigError(
            "--protect txn needs --zk-client client (the zookeeper-async driver has no fenced write); omit --zk-client".into(),
        ));
    }
    if args.protect == Some(ProtectArg::Txn)
        && family == ApiFamily::ZooKeeper
        && recipe == LockRecipe::Naive
    {
        return Err(ConfigError(
            "--protect txn cannot fence --recipe naive on zookeeper: every holder re-creates the same holder node at version 0, so a version check cannot tell holders apart; use --recipe zk-recipe or --protect token".into(),
        ));
    }
    Ok(())
}

/// `--sync-delay` and `--net-delay` shape clusters coordbench starts, and only where
/// they mean something.
fn validate_cluster_emulation(args: &RunArgs) -> Result<(), ConfigError> {
    let started = args.starts_servers();
    if args.sync_delay.is_some() && !args.disk.is_emulated() {
        return Err(ConfigError(
            "--sync-delay applies only to --disk hdd, ssd or nvme".into(),
        ));
    }
    if args.sync_delay.is_some_and(|d| d > Duration::from_secs(1)) {
        return Err(ConfigError("--sync-delay must be at most 1s".into()));
    }
    if args.net_delay.is_some() && !started {
        return Err(ConfigError(
            "--net-delay applies only to clusters coordbench starts; omit it with --endpoints or --target null".into(),
        ));
    }
    if args.net_delay_clients && args.net_delay.is_none() {
        return Err(ConfigError(
            "--net-delay-clients needs --net-delay DELAY".into(),
        ));
    }
    Ok(())
}

/// Shortest and longest `--fault-duration`.
const FAULT_DURATION: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(60));

/// `--fault-duration`, or its default.
fn fault_duration(args: &RunArgs) -> Duration {
    args.fault_duration.unwrap_or(Duration::from_secs(1))
}

/// `--fault` needs members coordbench starts (it kills, pauses and partitions them), each
/// kind once, and enough members for the kind; `--fault-duration` goes with it, in bounds.
fn validate_faults(args: &RunArgs) -> Result<(), ConfigError> {
    if args.fault.is_empty() {
        return match args.fault_duration {
            Some(_) => Err(ConfigError(
                "--fault-duration needs --fault KIND,... (it is how long each fault lasts)".into(),
            )),
            None => Ok(()),
        };
    }
    if !args.endpoints.is_empty() {
        return Err(ConfigError(
            "--fault applies only to clusters coordbench starts (it kills, pauses and partitions members); omit it with --endpoints".into(),
        ));
    }
    let target = crate::targets::descriptor(args.target);
    let mut seen = std::collections::BTreeSet::new();
    for &kind in &args.fault {
        if !seen.insert(kind) {
            return Err(ConfigError(format!(
                "--fault lists {} twice; name each kind once",
                kind.name()
            )));
        }
        if args.cluster_size() < target.min_members(kind) {
            return Err(ConfigError(format!(
                "--fault {} needs --cluster-size {} or more (with fewer, the members left have no majority); restart-all works on any size",
                kind.name(),
                kind.min_members()
            )));
        }
    }
    let d = fault_duration(args);
    let (shortest, longest) = FAULT_DURATION;
    if d < shortest || d > longest {
        return Err(ConfigError(format!(
            "--fault-duration must be between {} and {}s (got {})",
            humantime::format_duration(shortest),
            longest.as_secs(),
            humantime::format_duration(d)
        )));
    }
    Ok(())
}

/// `--engine-bin` applies to raft or zab members coordbench starts. An explicit server
/// binary that will be started (`--engine-bin`, `--etcd-bin`) must be an executable, so a
/// bad path is refused before anything starts (in a sweep: before its first point).
fn validate_binaries(args: &RunArgs) -> Result<(), ConfigError> {
    if args.engine_bin.is_some() && !args.endpoints.is_empty() {
        return Err(ConfigError(
            "--engine-bin applies only to members coordbench starts; omit it with --endpoints"
                .into(),
        ));
    }
    if !args.endpoints.is_empty() {
        if args.server_version.is_some() {
            return Err(ConfigError(
                "--server-version picks a server coordbench starts; omit it with --endpoints"
                    .into(),
            ));
        }
        return Ok(());
    }
    validate_server_version(args)?;
    let found = match (args.target, &args.engine_bin, &args.etcd_bin) {
        (kind, Some(bin), _) if crate::targets::descriptor(kind).engine => {
            provision::raft::resolve_binary(Some(bin)).map(drop)
        }
        (TargetKind::Etcd, _, Some(bin)) => provision::etcd::resolve_binary(Some(bin)).map(drop),
        _ => Ok(()),
    };
    found.map_err(|e| ConfigError(e.to_string()))
}

/// `--server-version` names a release of etcd or ZooKeeper that is installed; refused
/// before anything starts otherwise, with the install command in the message.
fn validate_server_version(args: &RunArgs) -> Result<(), ConfigError> {
    let Some(version) = &args.server_version else {
        return Ok(());
    };
    let kind = match args.target {
        TargetKind::Etcd => crate::install::ServerKind::Etcd,
        TargetKind::Zookeeper => crate::install::ServerKind::Zookeeper,
        other => {
            return Err(ConfigError(format!(
                "--server-version applies to --target etcd or zookeeper, not {}",
                crate::targets::descriptor(other).name
            )))
        }
    };
    crate::install::choose(kind, Some(version))
        .map(drop)
        .map_err(|e| ConfigError(format!("--server-version {version}: {e}")))
}

/// The client protocol a target speaks.
pub fn family_of(target: TargetKind) -> ApiFamily {
    crate::targets::descriptor(target).family
}

use crate::targets::value_name;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use std::path::Path;

    fn config(args: &[&str]) -> Result<RunConfig, ConfigError> {
        let mut argv = vec!["coordbench", "run"];
        argv.extend_from_slice(args);
        let Command::Run(run) = Cli::try_parse_from(argv).expect("arguments parse").command else {
            panic!("`coordbench run` parsed as another command");
        };
        RunConfig::from_args(&run)
    }

    #[test]
    fn defaults_describe_a_closed_loop_lock_run_with_the_herd_free_recipe() {
        let c = config(&[]).unwrap();
        assert_eq!(
            (c.target.as_str(), c.workload.as_str(), c.recipe.as_str()),
            ("raft", "lock", "etcd-mutex")
        );
        assert_eq!((c.mode.as_str(), c.clients, c.conns), ("closed", 16, 1));
    }

    #[test]
    fn etcd_api_clients_share_connections_by_default_zookeeper_clients_do_not() {
        let conns = |args: &[&str]| config(args).unwrap().conns;
        assert_eq!(conns(&["--target", "etcd", "--clients", "64"]), 1);
        assert_eq!(conns(&["--target", "raft", "--clients", "65"]), 2);
        assert_eq!(
            conns(&["--target", "raft", "--clients", "64", "--conns", "64"]),
            64
        );
        assert_eq!(conns(&["--target", "zab", "--clients", "64"]), 64);
        assert_eq!(conns(&["--target", "null", "--clients", "8"]), 8);
    }

    #[test]
    fn combinations_that_make_no_sense_are_refused_in_one_line() {
        for args in [
            &["--recipe", "zk-recipe"][..],
            &["--workload", "kv-put", "--recipe", "naive"],
            &["--target", "null", "--endpoints", "127.0.0.1:1"],
            &["--ttl", "500ms"],
            &["--target", "zookeeper", "--recipe", "etcd-mutex"],
            &["--target", "zookeeper", "--clients", "16", "--conns", "4"],
            &["--zk-classpath", "/usr/share/java/zookeeper.jar"],
            &["--zk-client", "async"],
            &["--target", "etcd", "--engine-bin", "coordbench"],
            &["--engine-bin", "coordbench", "--endpoints", "127.0.0.1:1"],
            &["--target", "null", "--zk-client", "client"],
            &[
                "--target",
                "zookeeper",
                "--zk-client",
                "async",
                "--workload",
                "election",
            ],
            &[
                "--target",
                "zookeeper",
                "--zk-client",
                "async",
                "--workload",
                "config-watch",
            ],
            &["--pin-servers", "0", "--endpoints", "127.0.0.1:1"],
            &["--pin-client", "1000"],
            &["--target", "etcd", "--secure", "--endpoints", "127.0.0.1:1"],
            &["--target", "raft", "--secure", "true", "--user", "a:b"],
            &["--target", "null", "--secure"],
            &["--target", "etcd", "--user", "a:b"],
            &["--target", "zab", "--cacert", "/tmp/ca.pem"],
            &["--target", "zab", "--secure", "--endpoints", "127.0.0.1:1"],
            &["--target", "zab", "--zk-acl", "creator"],
            &["--target", "zab", "--zk-chroot", "/"],
            &["--target", "raft", "--zk-auth", "digest:a:b"],
            &["--sync-delay", "1ms"],
            &["--disk", "hdd", "--sync-delay", "2s"],
            &["--target", "null", "--net-delay", "5ms"],
            &["--net-delay-clients"],
            &["--fault", "kill-leader", "--cluster-size", "1"],
            &[
                "--fault",
                "restart-all,partition-random",
                "--cluster-size",
                "2",
            ],
            &["--fault", "kill-leader", "--endpoints", "127.0.0.1:1"],
            &["--target", "null", "--fault", "kill-leader"],
            &["--fault", "pause-leader,pause-leader"],
            &["--fault-duration", "2s"],
            &["--fault", "pause-random", "--fault-duration", "5ms"],
            &["--fault", "pause-random", "--fault-duration", "2m"],
            &[
                "--target",
                "zookeeper",
                "--zk-client",
                "async",
                "--workload",
                "kv-get",
            ],
            &[
                "--target",
                "zookeeper",
                "--zk-client",
                "async",
                "--ttl",
                "1s",
            ],
            &[
                "--target",
                "zookeeper",
                "--zk-client",
                "async",
                "--holder-pause",
                "3s",
                "--holder-pause-ratio",
                "0.2",
            ],
            &[
                "--target",
                "zookeeper",
                "--zk-client",
                "async",
                "--protect",
                "txn",
            ],
            &["--target", "zab", "--recipe", "naive", "--protect", "txn"],
            &["--target", "null", "--election-timeout", "150-300"],
            &["--heartbeat", "10ms", "--endpoints", "127.0.0.1:1"],
            &["--election-timeout", "150-300", "--heartbeat", "150ms"],
            &["--heartbeat", "1500us"],
            &[
                "--target",
                "etcd",
                "--election-timeout",
                "150-300",
                "--heartbeat",
                "50ms",
            ],
            &["--target", "zab", "--heartbeat", "2s"],
            &["--target", "redis", "--fault", "partition-leader"],
            &["--target", "redis", "--fault", "kill-leader"],
            &["--target", "postgres", "--cluster-size", "3"],
            &["--target", "redis", "--recipe", "advisory"],
            &["--target", "postgres", "--recipe", "naive"],
            &["--target", "postgres", "--workload", "election"],
            &["--target", "redis", "--workload", "register"],
            &["--target", "redis", "--secure"],
            &["--target", "postgres", "--election-timeout", "150-300"],
            &["--target", "postgres", "--disk", "ssd"],
        ] {
            let err = config(args).unwrap_err().to_string();
            assert!(!err.is_empty() && !err.contains('\n'), "{args:?}: {err}");
        }
    }

    #[test]
    fn redis_and_postgres_have_their_own_recipes_sizes_and_faults() {
        let redis = config(&["--target", "redis"]).unwrap();
        assert_eq!(
            (
                redis.recipe.as_str(),
                redis.cluster_size,
                redis.client_lib.as_str()
            ),
            ("set-nx", 3, "redis-rs")
        );
        let postgres = config(&["--target", "postgres", "--recipe", "lease-row"]).unwrap();
        assert_eq!(
            (postgres.recipe.as_str(), postgres.cluster_size),
            ("lease-row", 1)
        );
        // Independent servers: one instance can be killed or paused, with no quorum to keep.
        config(&[
            "--target",
            "redis",
            "--cluster-size",
            "1",
            "--fault",
            "pause-random",
        ])
        .unwrap();
        config(&["--target", "postgres", "--fault", "kill-random,restart-all"]).unwrap();
        let err = config(&["--target", "redis", "--fault", "partition-leader"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("independent"), "{err}");
    }

    #[test]
    fn holder_pauses_out_of_range_are_refused_by_the_parser() {
        for args in [
            &["--holder-pause", "0s", "--holder-pause-ratio", "0.2"][..],
            &["--holder-pause", "3s", "--holder-pause-ratio", "0"],
            &["--holder-pause", "3s", "--holder-pause-ratio", "1.5"],
            &["--protect", "lease"],
        ] {
            let argv = [&["coordbench", "run"][..], args].concat();
            assert!(Cli::try_parse_from(argv).is_err(), "{args:?}");
        }
    }

    #[test]
    fn holder_pauses_run_on_every_target_and_are_recorded() {
        let pause = ["--holder-pause", "3s", "--holder-pause-ratio", "0.2"];
        for target in ["null", "raft", "zab", "etcd", "zookeeper"] {
            let c =
                config(&[&["--target", target, "--protect", "txn"][..], &pause].concat()).unwrap();
            let w = &c.workload_options;
            assert_eq!(
                (w.holder_pause_ms, w.holder_pause_ratio, w.protect),
                (Some(3000.0), Some(0.2), Some("txn")),
                "{target}"
            );
        }
        // The naive recipe is fenced by tokens on ZooKeeper, and by txn on the etcd API.
        config(&["--target", "zab", "--recipe", "naive", "--protect", "token"]).unwrap();
        config(&["--recipe", "naive", "--protect", "txn"]).unwrap();
    }

    #[test]
    fn zookeeper_takes_its_own_recipe_names_and_short_ttls() {
        let c = config(&[
            "--target",
            "zookeeper",
            "--recipe",
            "naive",
            "--ttl",
            "500ms",
        ])
        .unwrap();
        assert_eq!(
            (c.target.as_str(), c.recipe.as_str(), c.ttl_ms),
            ("zookeeper", "naive", 500)
        );
        let c = config(&["--target", "zookeeper"]).unwrap();
        assert_eq!((c.recipe.as_str(), c.conns), ("zk-recipe", 16));
        let err = config(&["--target", "zookeeper", "--recipe", "etcd-mutex"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("zk-recipe or naive"), "{err}");
    }

    #[test]
    fn secure_and_zookeeper_access_are_recorded_without_the_password() {
        let secure = config(&["--target", "zab", "--secure"]).unwrap();
        assert!(secure.secure && secure.zk_access.digest.is_some());
        let plain = config(&["--target", "zookeeper", "--secure", "false"]).unwrap();
        assert!(!plain.secure && plain.zk_access.digest.is_none());
        assert_eq!(plain.zk_access_record.zk_acl.as_deref(), Some("open"));
        let attached = config(&[
            "--target",
            "zookeeper",
            "--endpoints",
            "127.0.0.1:1",
            "--zk-auth",
            "digest:alice:pw",
            "--zk-acl",
            "creator",
            "--zk-chroot",
            "/bench",
        ])
        .unwrap();
        let json = serde_json::to_string(&attached).unwrap();
        for field in [
            "\"zk_auth_scheme\":\"digest\"",
            "\"zk_auth_user\":\"alice\"",
            "\"zk_acl\":\"creator\"",
            "\"zk_chroot\":\"/bench\"",
        ] {
            assert!(json.contains(field), "{field} in {json}");
        }
        assert!(!json.contains("pw"), "{json}");
        let etcd = config(&["--target", "etcd", "--secure"]).unwrap();
        assert!(etcd.secure && etcd.etcd_security.user.is_some());
        let json = serde_json::to_string(&etcd).unwrap();
        assert!(
            json.contains("\"etcd_tls\":true") && json.contains("\"etcd_user\":\"coordbench\""),
            "{json}"
        );
        let password = etcd.etcd_security.user.as_ref().unwrap().password();
        assert!(!json.contains(password), "{json}");
    }

    #[test]
    fn the_client_library_is_recorded_for_every_target() {
        let lib = |args: &[&str]| config(args).map(|c| (c.client_lib, c.zk_client)).unwrap();
        assert_eq!(lib(&["--target", "null"]), ("null".into(), None));
        assert_eq!(lib(&[]), ("etcd-client".into(), None));
        assert_eq!(
            lib(&["--target", "zookeeper"]),
            ("zookeeper-client".into(), Some("client".into()))
        );
        let async_lock = config(&["--target", "zookeeper", "--zk-client", "async"]).unwrap();
        assert_eq!(
            (async_lock.client_lib.as_str(), async_lock.zk_client_kind),
            ("zookeeper-async", ZkClientArg::Async)
        );
        let serializable = [
            "--target",
            "zookeeper",
            "--zk-client",
            "async",
            "--workload",
            "kv-get",
            "--consistency",
            "serializable",
        ];
        assert_eq!(
            config(&serializable).unwrap().zk_client.as_deref(),
            Some("async")
        );
    }

    #[test]
    fn engine_bin_is_recorded_for_the_engines_and_refused_elsewhere_in_one_line() {
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().unwrap();
        for target in ["raft", "zab"] {
            let c = config(&["--target", target, "--engine-bin", exe]).unwrap();
            assert_eq!(c.engine_bin.as_deref(), Some(Path::new(exe)));
        }
        let refused = |args: &[&str], needle: &str| {
            let err = config(args).unwrap_err().to_string();
            assert!(
                err.contains(needle) && !err.contains('\n'),
                "{args:?}: {err}"
            );
        };
        refused(
            &["--target", "etcd", "--engine-bin", exe],
            "--engine-bin applies only to --target raft or zab",
        );
        refused(
            &["--engine-bin", exe, "--endpoints", "127.0.0.1:1"],
            "omit it with --endpoints",
        );
        refused(
            &["--engine-bin", "/nonexistent/coordbench"],
            "/nonexistent/coordbench",
        );
        let not_executable = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        refused(
            &["--target", "zab", "--engine-bin", not_executable],
            not_executable,
        );
        refused(
            &["--target", "etcd", "--etcd-bin", "/nonexistent/etcd"],
            "/nonexistent/etcd",
        );
    }

    #[test]
    fn fault_kinds_are_recorded_as_given_with_their_timing() {
        let c = config(&[
            "--fault",
            "partition-leader,kill-leader",
            "--fault-every",
            "2s",
        ])
        .unwrap();
        assert_eq!(c.fault.as_deref(), Some("partition-leader,kill-leader"));
        assert_eq!(
            c.fault_kinds,
            [FaultArg::PartitionLeader, FaultArg::KillLeader]
        );
        assert_eq!(
            (c.fault_every_ms, c.fault_duration_ms),
            (Some(2000), Some(1000))
        );
        let one = config(&["--fault", "restart-all", "--cluster-size", "1"]).unwrap();
        assert_eq!(one.fault_kinds, [FaultArg::RestartAll]);
        let none = config(&[]).unwrap();
        assert_eq!((none.fault, none.fault_duration_ms), (None, None));
    }

    #[test]
    fn election_timing_is_recorded_as_asked_for_every_started_target() {
        for target in ["raft", "zab", "etcd", "zookeeper"] {
            let c = config(&[
                "--target",
                target,
                "--election-timeout",
                "150ms-300ms",
                "--heartbeat",
                "15ms",
            ])
            .unwrap();
            assert_eq!(
                (c.election_timeout.as_deref(), c.heartbeat_ms),
                (Some("150-300"), Some(15)),
                "{target}"
            );
        }
        let c = config(&[]).unwrap();
        assert_eq!((c.election_timeout, c.heartbeat_ms), (None, None));
    }

    #[test]
    fn a_rate_makes_the_run_open_loop() {
        let c = config(&["--target", "null", "--rate", "500"]).unwrap();
        assert_eq!(c.mode, "open");
        assert_eq!(c.plan.mode, LoadMode::Open { rate: 500.0 });
    }
}
