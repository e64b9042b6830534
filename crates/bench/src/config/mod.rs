//! A validated run configuration: the command line checked for combinations that make no
//! sense, with every value the results need to describe themselves. Stored in run.json.
//! Each option group checks itself ([`crate::args`]); here the groups' checks run in order
//! and their results are assembled into one [`RunConfig`].

pub mod record;
mod sharding;

use std::path::PathBuf;
use std::time::Duration;

use coordbench_drivers::{ApiFamily, Consistency, LockRecipe};

use crate::args::attach::Access;
use crate::args::load::Shape;
use crate::args::workloads::WorkloadOptions;
use crate::args::RunArgs;
use crate::etcd_access::EtcdAccessRecord;
use crate::runner::LoadPlan;
use crate::shard::Sharding;
use crate::zk_access::ZkAccessRecord;
use coordbench_drivers::etcd::EtcdSecurity;
use coordbench_drivers::zookeeper::ZkAccess;
use coordbench_lab::affinity::CpuList;
use coordbench_lab::election_timing::ElectionTiming;
use coordbench_lab::provision::DiskKind;
use coordbench_results::kinds::{TargetKind, WorkloadKind, ZkClientArg};

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
    /// `--zk-heap`: started ZooKeeper members' heap, MiB.
    pub zk_heap_mb: Option<u32>,
    /// raft, zab: the coordbench binary the members run from (`--engine-bin`).
    pub engine_bin: Option<PathBuf>,
    /// Entries between a started member's snapshots (`--snapshot-every`).
    pub snapshot_every: Option<u64>,
    /// etcd, raft: the leader's automatic compaction (`--auto-compaction-*`); `None`: off.
    pub auto_compaction: Option<coordbench_lab::provision::AutoCompaction>,
    /// raft, zab: count the engine's deterministic cost after the window (`--engine-cost`),
    /// over this many writes (`--engine-cost-ops`).
    pub engine_cost: bool,
    pub engine_cost_ops: u64,
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

/// What the checks of a command line found, before it is assembled into a [`RunConfig`].
struct Checked {
    lock_recipe: LockRecipe,
    workload_options: WorkloadOptions,
    shape: Shape,
    election_timing: ElectionTiming,
    zk_client_kind: ZkClientArg,
    access: Access,
    sharding: Option<Sharding>,
    plan: LoadPlan,
}

impl RunConfig {
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        let checked = check(args).map_err(ConfigError)?;
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
            access,
            sharding,
            plan,
        } = checked;
        let load = &args.load;
        Ok(RunConfig {
            target: load.target,
            workload: load.workload,
            zk_client: zk_client_kind,
            lock_recipe,
            read_consistency: args.kv.read_consistency(),
            plan,
            conns: shape.conns,
            ops: load.ops,
            op_timeout: load.op_timeout,
            keys: args.kv.keys(load.workload, args.preload.preload_keys),
            value_size: args.kv.value_size as usize,
            locks: args.lock.locks as usize,
            workload_options,
            hold: args.lock.hold,
            cluster_size: args.cluster_size(),
            disk: args.cluster.disk,
            endpoints: args.attach.endpoints.clone(),
            server_version: args.cluster.server_version.clone(),
            etcd_bin: args.cluster.etcd_bin.clone(),
            zk_classpath: args.cluster.zk_classpath.clone(),
            zk_heap_mb: args.cluster.zk_heap,
            engine_bin: args.cluster.engine_bin.clone(),
            engine_cost: args.cluster.engine_cost,
            engine_cost_ops: args.cluster.engine_cost_ops,
            snapshot_every: args.cluster.snapshot_every,
            auto_compaction: args.cluster.auto_compaction().map_err(ConfigError)?,
            secure: args.attach.secure,
            zk_access: access.zk.access,
            zk_access_record: access.zk.record,
            etcd_security: access.etcd.security,
            etcd_access_record: access.etcd.record,
            base_port: args.cluster.base_port,
            sync_delay: args.cluster.emulated_sync_delay(),
            net_delay: args.cluster.net_delay,
            net_delay_clients: args.cluster.net_delay_clients,
            election_timing,
            seed: load.seed,
            pin_client: args.generator.pin_client.clone(),
            pin_servers: args.cluster.pin_servers.clone(),
            faults: args.faults.plan(load.seed),
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

/// Every group's checks, in the order that decides which error a command line with several
/// gets: the recipe, the workload's options, the target, the cluster, the client library,
/// fencing, `--secure`, access, `--ttl`, sharding.
fn check(args: &RunArgs) -> Result<Checked, String> {
    let load = &args.load;
    let family = load.family();
    let lock_recipe = args.lock.recipe(family)?;
    let (workload_options, shape) = args.workload_options()?;
    args.kv.check_consistency(family)?;
    check_target(args)?;
    let election_timing = args.cluster.check(args.placement())?;
    let zk_client_kind = args.attach.zk_client(load, args.kv.consistency)?;
    args.lock
        .check_fencing(family, lock_recipe, zk_client_kind)?;
    args.attach.check_secure(load.target)?;
    let access = args.attach.access(load.target, zk_client_kind)?;
    load.check_ttl()?;
    load.check_window()?;
    let sharding = sharding::sharding_of(args, shape.clients)?;
    let plan = load.plan(&shape, sharding.as_ref());
    Ok(Checked {
        lock_recipe,
        workload_options,
        shape,
        election_timing,
        zk_client_kind,
        access,
        sharding,
        plan,
    })
}

/// What the target itself refuses, and the options that apply to other targets only.
fn check_target(args: &RunArgs) -> Result<(), String> {
    let target = args.load.target;
    crate::targets::descriptor(target).check(args)?;
    args.generator.check()?;
    args.faults
        .check(target, args.attach.attached(), args.cluster_size())?;
    args.attach.check_endpoints(target)?;
    args.load.check_conns()
}

/// The client protocol a target speaks.
pub fn family_of(target: TargetKind) -> ApiFamily {
    crate::targets::descriptor(target).family
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_run_args;
    use crate::runner::LoadMode;
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
            &[
                "--target",
                "etcd",
                "--workload",
                "kv-get",
                "--consistency",
                "sync",
            ],
            &[
                "--target",
                "raft",
                "--workload",
                "register",
                "--consistency",
                "sync",
            ],
            &["--pin-client", "1000"],
            &["--duration", "5"],
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
            let w = &c.workload_options.lock;
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
            ("coordbench-zk-client".into(), Some("client".into()))
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
    fn a_bare_window_length_is_milliseconds_and_too_short_ones_say_so() {
        let err = config(&["--duration", "5"]).unwrap_err().to_string();
        assert!(err.contains("write 5s for seconds"), "{err}");
        assert_eq!(
            config(&["--duration", "1500"])
                .unwrap()
                .plan
                .duration
                .as_millis(),
            1500
        );
    }

    #[test]
    fn sync_reads_are_zookeeper_s_and_recorded_as_such() {
        for target in ["zookeeper", "zab"] {
            let c = config(&[
                "--target",
                target,
                "--workload",
                "register",
                "--consistency",
                "sync",
            ])
            .unwrap();
            assert_eq!(c.read_consistency, Consistency::Sync);
            let r = record(&[
                "--target",
                target,
                "--workload",
                "kv-get",
                "--consistency",
                "sync",
            ]);
            assert_eq!(r.unwrap().consistency, "sync");
        }
        let err = config(&[
            "--target",
            "etcd",
            "--workload",
            "kv-get",
            "--consistency",
            "sync",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("--consistency sync is ZooKeeper's"),
            "{err}"
        );
    }

    #[test]
    fn zk_heap_goes_to_started_zookeeper_members_only() {
        let c = config(&["--target", "zookeeper", "--zk-heap", "2048"]).unwrap();
        assert_eq!(c.zk_heap_mb, Some(2048));
        for args in [
            &["--target", "etcd", "--zk-heap", "2048"][..],
            &["--target", "zab", "--zk-heap", "2048"][..],
            &[
                "--target",
                "zookeeper",
                "--zk-heap",
                "2048",
                "--endpoints",
                "127.0.0.1:1",
            ][..],
        ] {
            let err = config(args).unwrap_err().to_string();
            assert!(
                err.contains("--zk-heap applies only to ZooKeeper members coordbench starts"),
                "{args:?}: {err}"
            );
        }
        let run = parse_run_args(["coordbench-run", "--target", "zookeeper", "--zk-heap", "32"]);
        assert!(run.is_err(), "a heap under 64 MiB is refused by the parser");
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
