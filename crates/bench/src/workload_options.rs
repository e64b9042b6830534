//! The options of the lock (holder pauses, protection), election, discovery and
//! config-watch workloads: which apply to which workload, their defaults, and how they
//! shape the load plan (clients, rate, op budget, connections). Stored in run.json beside
//! the rest of the configuration.

use coordbench_drivers::ApiFamily;
use coordbench_results::kinds::value_name;
use coordbench_workloads::pause::HolderPause;
use coordbench_workloads::resource::Protection;
use serde::Serialize;

use crate::args::RunArgs;
use coordbench_results::kinds::{ProtectArg, WorkloadKind};

/// config-watch: the writer's default updates per second.
pub const DEFAULT_UPDATE_RATE: f64 = 10.0;
/// barrier: default barriers (the ZooKeeper paper's Table 3 starts at 200).
pub const DEFAULT_BARRIERS: u64 = 200;
/// barrier: the longest a barrier run's window may last.
pub const BARRIER_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);
/// kv-mixed: the default probability that an operation is a read.
pub const DEFAULT_READ_RATIO: f64 = 0.5;
/// discovery: default registrations + deregistrations per second.
pub const DEFAULT_CHURN: f64 = 20.0;

/// Workload-specific options; `None` / 0 where they do not apply.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkloadOptions {
    /// election: won elections after which the window ends.
    pub elections: Option<u64>,
    /// election: how long a leader leads, ms.
    pub term_ms: Option<f64>,
    /// election: leaders crash instead of resigning.
    pub crash_leader: bool,
    /// discovery: changes per second.
    pub churn: Option<f64>,
    /// discovery: instances that crash instead of deregistering.
    pub crash_instances: usize,
    /// election: observers; discovery, config-watch: watchers.
    pub watchers: Option<usize>,
    /// discovery, config-watch: sessions the watchers are spread over.
    pub watch_sessions: Option<usize>,
    /// barrier: barriers every client passes.
    pub barriers: Option<u64>,
    /// kv-mixed: the probability that an operation is a read (`--read-ratio`).
    pub read_ratio: Option<f64>,
    /// kv-put: every write creates a new key (`--create-keys`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub create_keys: bool,
    /// register: the linearizability check's wall-clock bound, ms.
    pub check_budget_ms: Option<u64>,
    /// lock: how long a paused holder freezes, ms (`--holder-pause`).
    pub holder_pause_ms: Option<f64>,
    /// lock: the fraction of acquisitions that pause (`--holder-pause-ratio`).
    pub holder_pause_ratio: Option<f64>,
    /// lock: `none`, `token` or `txn` (`--protect`).
    pub protect: Option<&'static str>,
    #[serde(skip)]
    pub holder_pause: Option<HolderPause>,
    #[serde(skip)]
    pub protection: Protection,
}

/// What the workload decides about the load plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub clients: usize,
    pub conns: usize,
    pub rate: Option<f64>,
    pub max_ops: Option<u64>,
}

/// The workload-specific options: each flag, whether a command line gives it, and the
/// workloads that take it. The one list of which workload takes which option.
type GivenOption = (&'static str, fn(&RunArgs) -> bool, &'static [WorkloadKind]);

const WORKLOAD_SPECIFIC: &[GivenOption] = {
    use WorkloadKind::{Barrier, ConfigWatch, Discovery, Election, KvMixed, KvPut, Lock};
    &[
        ("--read-ratio", |a| a.read_ratio.is_some(), &[KvMixed]),
        ("--create-keys", |a| a.create_keys, &[KvPut]),
        ("--recipe", |a| a.recipe.is_some(), &[Lock, Election]),
        ("--elections", |a| a.elections.is_some(), &[Election]),
        ("--holder-pause", |a| a.holder_pause.is_some(), &[Lock]),
        (
            "--holder-pause-ratio",
            |a| a.holder_pause_ratio.is_some(),
            &[Lock],
        ),
        ("--protect", |a| a.protect.is_some(), &[Lock]),
        ("--crash-leader", |a| a.crash_leader, &[Election]),
        ("--barriers", |a| a.barriers.is_some(), &[Barrier]),
        ("--instances", |a| a.instances.is_some(), &[Discovery]),
        ("--churn", |a| a.churn.is_some(), &[Discovery]),
        ("--crash-instances", |a| a.crash_instances > 0, &[Discovery]),
        (
            "--watchers",
            |a| a.watchers.is_some(),
            &[Election, Discovery, ConfigWatch],
        ),
    ]
};

/// Checks that every workload option given applies to the chosen workload and resolves
/// the defaults. Errors are one line naming the option.
pub fn resolve(args: &RunArgs) -> Result<(WorkloadOptions, Shape), String> {
    check_applies(args)?;
    check_budgets(args)?;
    let default_conns = args.conns.map(|c| c as usize);
    let mut options = WorkloadOptions {
        create_keys: args.create_keys,
        ..WorkloadOptions::default()
    };
    let mut shape = Shape {
        clients: args.clients as usize,
        conns: default_conns.unwrap_or_else(|| shared_conns(args)),
        rate: args.rate,
        max_ops: args.ops,
    };
    match args.workload {
        WorkloadKind::Lock => lock_options(args, &mut options)?,
        WorkloadKind::Election => {
            options.elections = args.elections;
            options.term_ms = Some(args.term.as_secs_f64() * 1000.0);
            options.crash_leader = args.crash_leader;
            options.watchers = Some(args.watchers.map_or(2, |v| v as usize));
            shape.max_ops = args.elections.or(args.ops);
        }
        WorkloadKind::Discovery => discovery_options(args, &mut options, &mut shape)?,
        WorkloadKind::ConfigWatch => {
            let watchers = args.watchers.map_or(100, |v| v as usize);
            let sessions = default_conns.unwrap_or(watchers.min(16)).min(watchers);
            options.watchers = Some(watchers);
            options.watch_sessions = Some(sessions);
            shape.clients = 1;
            shape.conns = sessions;
            shape.rate = Some(args.rate.unwrap_or(DEFAULT_UPDATE_RATE));
        }
        WorkloadKind::Register => {
            options.check_budget_ms = Some(args.check_budget.as_millis() as u64);
        }
        WorkloadKind::Barrier => {
            let barriers = args.barriers.unwrap_or(DEFAULT_BARRIERS);
            options.barriers = Some(barriers);
            // Every client passes every barrier: one op each.
            shape.max_ops = Some(barriers.saturating_mul(u64::from(args.clients)));
        }
        WorkloadKind::KvMixed => {
            options.read_ratio = Some(args.read_ratio.unwrap_or(DEFAULT_READ_RATIO))
        }
        WorkloadKind::KvPut | WorkloadKind::KvGet => {}
    }
    Ok((options, shape))
}

/// Refuses a workload-specific option given to another workload.
fn check_applies(args: &RunArgs) -> Result<(), String> {
    for (flag, given, allowed) in WORKLOAD_SPECIFIC {
        if given(args) && !allowed.contains(&args.workload) {
            let names: Vec<String> = allowed.iter().map(|w| value_name(*w)).collect();
            let names = match names.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, rest)) if rest.len() == 1 => format!("{} or {last}", rest[0]),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => String::new(),
            };
            return Err(format!("{flag} applies only to --workload {names}"));
        }
    }
    Ok(())
}

/// The workloads whose length or pace is their own: --ops and --rate do not apply.
fn check_budgets(args: &RunArgs) -> Result<(), String> {
    if args.workload == WorkloadKind::Barrier && (args.ops.is_some() || args.rate.is_some()) {
        return Err("a barrier run is as long as its --barriers; omit --ops and --rate".into());
    }
    if args.elections.is_some() && args.ops.is_some() {
        return Err("--elections is the op budget of an election run; omit --ops".into());
    }
    if args.workload == WorkloadKind::Discovery && args.rate.is_some() {
        return Err("discovery is paced by --churn (changes per second); omit --rate".into());
    }
    Ok(())
}

/// lock: holder pauses and the protected resource's fencing.
fn lock_options(args: &RunArgs, options: &mut WorkloadOptions) -> Result<(), String> {
    options.holder_pause = holder_pause(args)?;
    options.holder_pause_ms = options
        .holder_pause
        .map(|p| p.duration.as_secs_f64() * 1000.0);
    options.holder_pause_ratio = options.holder_pause.map(|p| p.ratio);
    options.protection = match args.protect {
        None | Some(ProtectArg::None) => Protection::None,
        Some(ProtectArg::Token) => Protection::Token,
        Some(ProtectArg::Txn) => Protection::Txn,
    };
    // Recorded when pauses or protection were asked for; plain lock runs keep the
    // configuration they always had, so they compare with earlier results.
    options.protect = (options.holder_pause.is_some() || args.protect.is_some())
        .then(|| options.protection.name());
    Ok(())
}

/// discovery: instances (the clients), their churn and crashes, and the watchers.
fn discovery_options(
    args: &RunArgs,
    options: &mut WorkloadOptions,
    shape: &mut Shape,
) -> Result<(), String> {
    let default_conns = args.conns.map(|c| c as usize);
    let instances = args.instances.unwrap_or(args.clients) as usize;
    if args.crash_instances as usize > instances {
        return Err(format!(
            "--crash-instances {} exceeds the {instances} instances",
            args.crash_instances
        ));
    }
    let watchers = args.watchers.map_or(4, |v| v as usize);
    options.churn = Some(args.churn.unwrap_or(DEFAULT_CHURN));
    options.crash_instances = args.crash_instances as usize;
    options.watchers = Some(watchers);
    options.watch_sessions = Some(default_conns.unwrap_or(watchers).min(watchers));
    shape.clients = instances;
    shape.conns = default_conns.unwrap_or(instances);
    shape.rate = options.churn;
    Ok(())
}

/// `--holder-pause` and `--holder-pause-ratio`, which need each other.
fn holder_pause(args: &RunArgs) -> Result<Option<HolderPause>, String> {
    match (args.holder_pause, args.holder_pause_ratio) {
        (Some(duration), Some(ratio)) => Ok(Some(HolderPause { duration, ratio })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(
            "--holder-pause needs --holder-pause-ratio R: the fraction of acquisitions that pause, in (0, 1]".into(),
        ),
        (None, Some(_)) => Err(
            "--holder-pause-ratio needs --holder-pause D: how long a paused holder freezes".into(),
        ),
    }
}

/// Clients that share one gRPC connection when `--conns` is not given (etcd API).
pub const CLIENTS_PER_CONN: usize = 64;

/// The default connection count of the clients: on the etcd API one connection (balanced
/// over every endpoint) per [`CLIENTS_PER_CONN`] clients, as etcd's own benchmark tool shares
/// one. A connection per client costs the generator a write and a read syscall per request
/// (HTTP/2 can batch only the streams of one connection), about half its CPU per op; the
/// ZooKeeper drivers keep one session, so one connection, per client, and null has none.
fn shared_conns(args: &RunArgs) -> usize {
    let clients = args.clients as usize;
    match crate::config::family_of(args.target) {
        ApiFamily::Etcd => clients.div_ceil(CLIENTS_PER_CONN),
        ApiFamily::ZooKeeper | ApiFamily::Null | ApiFamily::Redis | ApiFamily::Postgres => clients,
    }
}

/// Workloads whose sessions each own what they hold (locks, candidacies), so a ZooKeeper
/// client cannot share one: `--conns` does not apply to them there.
pub fn sessions_are_per_client(w: WorkloadKind) -> bool {
    !matches!(w, WorkloadKind::Discovery | WorkloadKind::ConfigWatch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_run_args;

    fn resolved(args: &[&str]) -> Result<(WorkloadOptions, Shape), String> {
        let mut argv = vec!["coordbench-run"];
        argv.extend_from_slice(args);
        let run = parse_run_args(argv).expect("arguments parse");
        resolve(&run)
    }

    #[test]
    fn options_of_another_workload_are_refused_in_one_line() {
        for args in [
            &["--workload", "kv-put", "--recipe", "naive"][..],
            &["--workload", "lock", "--elections", "5"],
            &["--workload", "lock", "--crash-leader"],
            &["--workload", "election", "--churn", "5"],
            &["--workload", "lock", "--watchers", "5"],
            &["--workload", "config-watch", "--instances", "5"],
            &["--workload", "election", "--elections", "5", "--ops", "5"],
            &["--workload", "kv-put", "--holder-pause", "3s"],
            &["--workload", "kv-get", "--read-ratio", "0.5"],
            &["--workload", "kv-get", "--create-keys"],
            &["--workload", "lock", "--create-keys", "true"],
            &["--workload", "election", "--protect", "token"],
            &["--workload", "lock", "--holder-pause", "3s"],
            &["--workload", "lock", "--holder-pause-ratio", "0.2"],
            &["--workload", "discovery", "--rate", "5"],
            &[
                "--workload",
                "discovery",
                "--instances",
                "2",
                "--crash-instances",
                "3",
            ],
        ] {
            let err = resolved(args).unwrap_err();
            assert!(!err.is_empty() && !err.contains('\n'), "{args:?}: {err}");
        }
    }

    #[test]
    fn each_workload_shapes_the_plan() {
        let (o, s) = resolved(&["--workload", "election", "--elections", "7"]).unwrap();
        assert_eq!((o.watchers, s.max_ops, s.clients), (Some(2), Some(7), 16));
        let (o, s) = resolved(&["--workload", "discovery", "--instances", "8"]).unwrap();
        assert_eq!(
            (s.clients, s.rate, o.watch_sessions),
            (8, Some(DEFAULT_CHURN), Some(4))
        );
        let (o, s) = resolved(&["--workload", "config-watch", "--watchers", "2000"]).unwrap();
        assert_eq!(
            (s.clients, s.conns, s.rate),
            (1, 16, Some(DEFAULT_UPDATE_RATE))
        );
        assert_eq!((o.watchers, o.watch_sessions), (Some(2000), Some(16)));
        let (o, _) = resolved(&[
            "--workload",
            "lock",
            "--holder-pause",
            "3s",
            "--holder-pause-ratio",
            "0.2",
            "--protect",
            "txn",
        ])
        .unwrap();
        assert_eq!(
            (o.holder_pause_ms, o.holder_pause_ratio, o.protect),
            (Some(3000.0), Some(0.2), Some("txn"))
        );
        let (o, _) = resolved(&["--holder-pause", "1s", "--holder-pause-ratio", "1"]).unwrap();
        assert_eq!(o.protect, Some("none"));
        let (o, _) = resolved(&["--workload", "kv-mixed", "--read-ratio", "0.7"]).unwrap();
        assert_eq!(o.read_ratio, Some(0.7));
        let (o, _) = resolved(&["--workload", "kv-mixed"]).unwrap();
        assert_eq!(o.read_ratio, Some(DEFAULT_READ_RATIO));
        let (o, s) = resolved(&["--workload", "lock"]).unwrap();
        assert_eq!((o.holder_pause, o.protect), (None, None));
        assert_eq!((s.clients, s.conns, s.rate, s.max_ops), (16, 1, None, None));
    }
}
