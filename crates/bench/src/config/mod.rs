//! A validated run configuration: the command line checked for combinations that make no
//! sense, with every value the results need to describe themselves. Stored in run.json.

pub mod record;
mod sharding;

use std::path::PathBuf;
use std::time::Duration;

use coordbench_drivers::{zookeeper_async, ApiFamily, Consistency, LockRecipe};

use crate::args::cluster::Placement;
use crate::args::RunArgs;
use crate::etcd_access::{self, EtcdAccessRecord};
use crate::runner::{LoadMode, LoadPlan};
use crate::shard::{Part, Sharding, StartRule};
use crate::workload_options::{self, WorkloadOptions};
use crate::zk_access::{self as access, ZkAccessRecord};
use coordbench_drivers::etcd::EtcdSecurity;
use coordbench_drivers::zookeeper::ZkAccess;
use coordbench_lab::affinity::CpuList;
use coordbench_lab::election_timing::ElectionTiming;
use coordbench_lab::provision::DiskKind;
use coordbench_results::kinds::{
    ConsistencyArg, ProtectArg, TargetKind, WorkloadKind, ZkClientArg,
};

/// A configuration error: one line that says what to change.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// Everything that defines a run, as the run uses it: each value once, typed. run.json
/// keeps its [`record::ConfigRecord`] ([`RunConfig::record`]).
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub target: TargetKind,
    pub workload: WorkloadKind,
    /// zookeeper: the client library (`--zk-client`); the default elsewhere.
    pub zk_client: ZkClientArg,
    /// lock, election: the recipe (the family's default unless `--recipe`).
    pub lock_recipe: LockRecipe,
    pub read_consistency: Consistency,
    /// Clients, loop, window, timeouts and the shard's part.
    pub plan: LoadPlan,
    pub conns: usize,
    /// `--ops` as given (election's budget is `plan.max_ops`).
    pub ops: Option<u64>,
    /// `--op-timeout` as given (`plan.op_timeout` adds a holder pause to it).
    pub op_timeout: Duration,
    pub keys: usize,
    pub value_size: usize,
    pub locks: usize,
    /// election, discovery, config-watch, lock and barrier options.
    pub workload_options: WorkloadOptions,
    pub hold: Duration,
    pub cluster_size: usize,
    pub disk: DiskKind,
    /// Non-empty when attached to a cluster the user runs.
    pub endpoints: Vec<String>,
    /// etcd, zookeeper: the release asked for (`--server-version`).
    pub server_version: Option<coordbench_results::version::Version>,
    pub etcd_bin: Option<PathBuf>,
    pub zk_classpath: Option<String>,
    /// raft, zab: the coordbench binary the members run from (`--engine-bin`).
    pub engine_bin: Option<PathBuf>,
    /// Whether coordbench starts the cluster secured (`--secure`).
    pub secure: bool,
    /// zookeeper, zab: the driver's credentials, ACLs and chroot, and their record.
    pub zk_access: ZkAccess,
    pub zk_access_record: ZkAccessRecord,
    /// etcd, raft: the driver's TLS and user (`--secure`: TLS is added once the run's
    /// certificates are generated), and their record (never a password or key).
    pub etcd_security: EtcdSecurity,
    pub etcd_access_record: EtcdAccessRecord,
    pub base_port: Option<u16>,
    /// Emulated disks: the delay per sync (the profile's unless `--sync-delay`).
    pub sync_delay: Option<Duration>,
    /// One-way delay (and jitter) between members through the proxy, if any.
    pub net_delay: Option<coordbench_lab::netdelay::NetDelay>,
    /// Whether clients' traffic to members is delayed too.
    pub net_delay_clients: bool,
    pub election_timing: ElectionTiming,
    pub seed: u64,
    pub pin_client: Option<CpuList>,
    pub pin_servers: Option<CpuList>,
    /// The faults to inject (`--fault`), if any.
    pub faults: Option<crate::fault::FaultPlan>,
    /// Keys written, watchers and sessions held before the window (`--preload-*`).
    pub preload: crate::preload::Preload,
    /// null: the injected service time, if any (`--service-time`).
    pub null_service: Option<crate::targets::null::NullServiceRecord>,
    /// `--shard` and its start rule (run.json records them apart, as `shard`).
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

/// What the checks of a command line found, before it is assembled into a [`RunConfig`].
struct Checked {
    lock_recipe: LockRecipe,
    workload_options: WorkloadOptions,
    shape: workload_options::Shape,
    election_timing: ElectionTiming,
    zk_client_kind: ZkClientArg,
    zk: access::ResolvedAccess,
    etcd: etcd_access::ResolvedEtcdAccess,
    sharding: Option<Sharding>,
    plan: LoadPlan,
}

impl RunConfig {
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        let family = family_of(args.target);
        let lock_recipe = family
            .parse_recipe(args.recipe.as_deref())
            .map_err(ConfigError)?;
        let (workload_options, shape) = workload_options::resolve(args).map_err(ConfigError)?;
        validate_target(args)?;
        let placement = Placement {
            target: args.target,
            starts_servers: args.starts_servers(),
            attached: !args.endpoints.is_empty(),
        };
        let election_timing = args.cluster.check(placement).map_err(ConfigError)?;
        let zk_client_kind = validate_zk_client(args)?;
        validate_holder_pauses(args, family, lock_recipe, zk_client_kind)?;
        validate_secure(args)?;
        let zk = access::resolve(
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
        let sharding = sharding::sharding_of(args, shape.clients).map_err(ConfigError)?;
        let plan = load_plan(args, &shape, &workload_options, sharding.as_ref());
        let checked = Checked {
            lock_recipe,
            workload_options,
            shape,
            election_timing,
            zk_client_kind,
            zk,
            etcd,
            sharding,
            plan,
        };
        Self::assemble(args, checked)
    }

    /// The configuration of a checked command line: every value the run uses and the
    /// record run.json keeps of it.
    fn assemble(args: &RunArgs, checked: Checked) -> Result<Self, ConfigError> {
        let Checked {
            lock_recipe,
            workload_options,
            shape,
            election_timing,
            zk_client_kind,
            zk,
            etcd,
            sharding,
            plan,
        } = checked;
        let read_consistency = match args.consistency {
            ConsistencyArg::Linearizable => Consistency::Linearizable,
            ConsistencyArg::Serializable => Consistency::Serializable,
        };
        let faults = args.faults.plan(args.seed);
        Ok(RunConfig {
            target: args.target,
            workload: args.workload,
            zk_client: zk_client_kind,
            lock_recipe,
            read_consistency,
            plan,
            conns: shape.conns,
            ops: args.ops,
            op_timeout: args.op_timeout,
            keys: args.keys.map_or(
                default_keys(args.workload, args.preload.preload_keys),
                |k| k as usize,
            ),
            value_size: args.value_size as usize,
            locks: args.locks as usize,
            workload_options,
            hold: args.hold,
            cluster_size: args.cluster_size(),
            disk: args.cluster.disk,
            endpoints: args.endpoints.clone(),
            server_version: args.cluster.server_version.clone(),
            etcd_bin: args.cluster.etcd_bin.clone(),
            zk_classpath: args.cluster.zk_classpath.clone(),
            engine_bin: args.cluster.engine_bin.clone(),
            secure: args.secure,
            zk_access: zk.access,
            zk_access_record: zk.record,
            etcd_security: etcd.security,
            etcd_access_record: etcd.record,
            base_port: args.cluster.base_port,
            sync_delay: args.cluster.emulated_sync_delay(),
            net_delay: args.cluster.net_delay,
            net_delay_clients: args.cluster.net_delay_clients,
            election_timing,
            seed: args.seed,
            pin_client: args.generator.pin_client.clone(),
            pin_servers: args.cluster.pin_servers.clone(),
            faults,
            preload: crate::preload::Preload::of(&args.preload),
            null_service: crate::targets::null::service_record(args).map_err(ConfigError)?,
            sharding,
        })
    }

    /// What run.json keeps of this configuration.
    pub fn record(&self) -> record::ConfigRecord {
        record::ConfigRecord::of(self)
    }

    /// The API family of the target.
    pub fn family(&self) -> ApiFamily {
        family_of(self.target)
    }

    /// True when the run uses a cluster the user runs.
    pub fn attached(&self) -> bool {
        !self.endpoints.is_empty()
    }

    /// The faults to inject (`--fault`), if any.
    pub fn fault_plan(&self) -> Option<crate::fault::FaultPlan> {
        self.faults.clone()
    }
}

/// What the target itself refuses, and the options that apply to other targets only.
fn validate_target(args: &RunArgs) -> Result<(), ConfigError> {
    let target = crate::targets::descriptor(args.target);
    target.check(args).map_err(ConfigError)?;
    args.generator.check().map_err(ConfigError)?;
    args.faults
        .check(args.target, !args.endpoints.is_empty(), args.cluster_size())
        .map_err(ConfigError)?;
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
    Ok(())
}

/// `--zk-client`: the ZooKeeper client library, and what zookeeper-async cannot do.
fn validate_zk_client(args: &RunArgs) -> Result<ZkClientArg, ConfigError> {
    if family_of(args.target) != ApiFamily::ZooKeeper && args.zk_client.is_some() {
        return Err(ConfigError(
            "--zk-client applies only to --target zookeeper".into(),
        ));
    }
    let kind = args.zk_client.unwrap_or_default();
    if kind != ZkClientArg::Async {
        return Ok(kind);
    }
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
    Ok(kind)
}

/// How the runner drives the load: clients, open or closed loop, the window, timeouts and
/// the shard's part.
fn load_plan(
    args: &RunArgs,
    shape: &workload_options::Shape,
    workload_options: &WorkloadOptions,
    sharding: Option<&Sharding>,
) -> LoadPlan {
    let mode = match shape.rate {
        Some(rate) => LoadMode::Open { rate },
        None => LoadMode::Closed,
    };
    // A barrier run counts every barrier from the first, and lasts until all are passed.
    let (warmup, duration) = if args.workload == WorkloadKind::Barrier {
        (Duration::ZERO, workload_options::BARRIER_TIME_LIMIT)
    } else {
        (args.warmup, args.duration)
    };
    LoadPlan {
        clients: shape.clients,
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
        part: sharding.map_or(Part::WHOLE, |s| s.part),
        start: sharding.map_or(StartRule::Now, |s| s.start.clone()),
    }
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

/// The client protocol a target speaks.
pub fn family_of(target: TargetKind) -> ApiFamily {
    crate::targets::descriptor(target).family
}

use coordbench_results::kinds::value_name;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_run_args;
    use coordbench_results::kinds::FaultArg;
    use std::path::Path;

    fn config(args: &[&str]) -> Result<RunConfig, ConfigError> {
        let mut argv = vec!["coordbench-run"];
        argv.extend_from_slice(args);
        let run = parse_run_args(argv).expect("arguments parse");
        RunConfig::from_args(&run)
    }

    fn record(args: &[&str]) -> Result<record::ConfigRecord, ConfigError> {
        config(args).map(|c| c.record())
    }

    #[test]
    fn reports_name_every_family_s_herd_free_recipe() {
        use coordbench_results::axis::HERD_FREE_RECIPES;
        let families = [ApiFamily::Etcd, ApiFamily::ZooKeeper, ApiFamily::Null];
        let names = families.map(|f| f.herd_free_name().expect("a herd-free recipe"));
        assert_eq!(names, HERD_FREE_RECIPES);
    }

    #[test]
    fn defaults_describe_a_closed_loop_lock_run_with_the_herd_free_recipe() {
        let c = record(&[]).unwrap();
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
        let redis = record(&["--target", "redis"]).unwrap();
        assert_eq!(
            (
                redis.recipe.as_str(),
                redis.cluster_size,
                redis.client_lib.as_str()
            ),
            ("set-nx", 3, "redis-rs")
        );
        let postgres = record(&["--target", "postgres", "--recipe", "lease-row"]).unwrap();
        assert_eq!(
            (postgres.recipe.as_str(), postgres.cluster_size),
            ("lease-row", 1)
        );
        // Independent servers: one instance can be killed or paused, with no quorum to keep.
        record(&[
            "--target",
            "redis",
            "--cluster-size",
            "1",
            "--fault",
            "pause-random",
        ])
        .unwrap();
        record(&["--target", "postgres", "--fault", "kill-random,restart-all"]).unwrap();
        let err = record(&["--target", "redis", "--fault", "partition-leader"])
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
            let argv = [&["coordbench-run"][..], args].concat();
            assert!(parse_run_args(argv).is_err(), "{args:?}");
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
        let c = record(&[
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
        let c = record(&["--target", "zookeeper"]).unwrap();
        assert_eq!((c.recipe.as_str(), c.conns), ("zk-recipe", 16));
        let err = record(&["--target", "zookeeper", "--recipe", "etcd-mutex"])
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
        let attached = record(&[
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
        let json = serde_json::to_string(&etcd.record()).unwrap();
        assert!(
            json.contains("\"etcd_tls\":true") && json.contains("\"etcd_user\":\"coordbench\""),
            "{json}"
        );
        let password = etcd.etcd_security.user.as_ref().unwrap().password();
        assert!(!json.contains(password), "{json}");
    }

    #[test]
    fn the_client_library_is_recorded_for_every_target() {
        let lib = |args: &[&str]| record(args).map(|c| (c.client_lib, c.zk_client)).unwrap();
        assert_eq!(lib(&["--target", "null"]), ("null".into(), None));
        assert_eq!(lib(&[]), ("etcd-client".into(), None));
        assert_eq!(
            lib(&["--target", "zookeeper"]),
            ("zookeeper-client".into(), Some("client".into()))
        );
        let async_lock = record(&["--target", "zookeeper", "--zk-client", "async"]).unwrap();
        assert_eq!(
            (
                async_lock.client_lib.as_str(),
                async_lock.zk_client.as_deref()
            ),
            ("zookeeper-async", Some("async"))
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
            record(&serializable).unwrap().zk_client.as_deref(),
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
        let c = record(&[
            "--fault",
            "partition-leader,kill-leader",
            "--fault-every",
            "2s",
        ])
        .unwrap();
        assert_eq!(c.fault.as_deref(), Some("partition-leader,kill-leader"));
        assert_eq!(
            (c.fault_every_ms, c.fault_duration_ms),
            (Some(2000), Some(1000))
        );
        let one = config(&["--fault", "restart-all", "--cluster-size", "1"]).unwrap();
        let kinds = one.faults.map(|f| f.kinds);
        assert_eq!(kinds.as_deref(), Some(&[FaultArg::RestartAll][..]));
        let two = config(&["--fault", "partition-leader,kill-leader"]).unwrap();
        let kinds = two.faults.map(|f| f.kinds);
        assert_eq!(
            kinds.as_deref(),
            Some(&[FaultArg::PartitionLeader, FaultArg::KillLeader][..])
        );
        let none = record(&[]).unwrap();
        assert_eq!((none.fault, none.fault_duration_ms), (None, None));
    }

    #[test]
    fn election_timing_is_recorded_as_asked_for_every_started_target() {
        for target in ["raft", "zab", "etcd", "zookeeper"] {
            let c = record(&[
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
        let c = record(&[]).unwrap();
        assert_eq!((c.election_timeout, c.heartbeat_ms), (None, None));
    }

    #[test]
    fn a_rate_makes_the_run_open_loop() {
        let c = config(&["--target", "null", "--rate", "500"]).unwrap();
        assert_eq!(c.record().mode, "open");
        assert_eq!(c.plan.mode, LoadMode::Open { rate: 500.0 });
    }
}
