//! Each workload's own options, one group per workload as `run --help` shows them
//! ([`kv`], [`register`], [`lock`], [`barrier`], [`election`], [`discovery`], [`watch`]):
//! each group owns its flags, its checks, its part of run.json's `config` and how it
//! shapes the load plan. Here: `WORKLOAD_SPECIFIC`, the one list of which workload takes
//! which option, and [`RunArgs::workload_options`], which resolves the chosen workload's
//! group.

pub mod barrier;
pub mod discovery;
pub mod election;
pub mod kv;
pub mod lock;
pub mod register;
pub mod watch;

use coordbench_results::kinds::{value_name, WorkloadKind};
use serde::Serialize;

use super::load::Shape;
use super::RunArgs;

/// The workload-specific part of run.json's `config`: every group's record, `None` / 0
/// where it does not apply. The field order is the file's.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkloadOptions {
    #[serde(flatten)]
    pub election: election::ElectionRecord,
    #[serde(flatten)]
    pub discovery: discovery::DiscoveryRecord,
    #[serde(flatten)]
    pub watch: watch::WatchRecord,
    #[serde(flatten)]
    pub barrier: barrier::BarrierRecord,
    #[serde(flatten)]
    pub kv: kv::KvRecord,
    #[serde(flatten)]
    pub register: register::RegisterRecord,
    #[serde(flatten)]
    pub lock: lock::LockRecord,
}

/// A workload-specific option: its flag, whether a command line gives it, and the
/// workloads that take it.
type GivenOption = (&'static str, fn(&RunArgs) -> bool, &'static [WorkloadKind]);

/// The one list of which workload takes which option (options with a default every
/// workload accepts are not in it). Checked in this order, so that of two misplaced
/// options the same one is named first.
const WORKLOAD_SPECIFIC: &[GivenOption] = {
    use WorkloadKind::{Barrier, ConfigWatch, Discovery, Election, KvMixed, KvPut, Lock};
    &[
        ("--read-ratio", |a| a.kv.read_ratio.is_some(), &[KvMixed]),
        ("--create-keys", |a| a.kv.create_keys, &[KvPut]),
        ("--recipe", |a| a.lock.recipe.is_some(), &[Lock, Election]),
        (
            "--elections",
            |a| a.election.elections.is_some(),
            &[Election],
        ),
        ("--holder-pause", |a| a.lock.holder_pause.is_some(), &[Lock]),
        (
            "--holder-pause-ratio",
            |a| a.lock.holder_pause_ratio.is_some(),
            &[Lock],
        ),
        ("--protect", |a| a.lock.protect.is_some(), &[Lock]),
        ("--crash-leader", |a| a.election.crash_leader, &[Election]),
        ("--barriers", |a| a.barrier.barriers.is_some(), &[Barrier]),
        (
            "--instances",
            |a| a.discovery.instances.is_some(),
            &[Discovery],
        ),
        ("--churn", |a| a.discovery.churn.is_some(), &[Discovery]),
        (
            "--crash-instances",
            |a| a.discovery.crash_instances > 0,
            &[Discovery],
        ),
        (
            "--watchers",
            |a| a.watch.watchers.is_some(),
            &[Election, Discovery, ConfigWatch],
        ),
    ]
};

impl RunArgs {
    /// Checks that every workload-specific option given applies to the chosen workload,
    /// and resolves that workload's group: its record (defaults filled in) and how it
    /// shapes the load plan. Errors are one line naming the option.
    pub fn workload_options(&self) -> Result<(WorkloadOptions, Shape), String> {
        self.check_applies()?;
        let load = &self.load;
        // The workloads whose length or pace is their own.
        self.barrier.check_budget(load)?;
        self.election.check_budget(load)?;
        self.discovery.check_pace(load)?;
        let mut shape = load.shape();
        let mut options = WorkloadOptions {
            kv: self.kv.record(load.workload),
            ..WorkloadOptions::default()
        };
        match load.workload {
            WorkloadKind::Lock => options.lock = self.lock.resolve(&mut shape)?,
            WorkloadKind::Election => {
                options.election = self.election.resolve(&mut shape);
                options.watch = self.watch.observers();
            }
            WorkloadKind::Discovery => {
                options.discovery = self.discovery.resolve(load, &mut shape)?;
                options.watch = self.watch.discovery(load);
            }
            WorkloadKind::ConfigWatch => {
                options.watch = self.watch.config_watch(load, &mut shape);
            }
            WorkloadKind::Register => options.register = self.register.record(),
            WorkloadKind::Barrier => options.barrier = self.barrier.resolve(&mut shape),
            WorkloadKind::KvPut | WorkloadKind::KvGet | WorkloadKind::KvMixed => {}
        }
        Ok((options, shape))
    }

    /// Refuses a workload-specific option given to another workload.
    fn check_applies(&self) -> Result<(), String> {
        for (flag, given, allowed) in WORKLOAD_SPECIFIC {
            if given(self) && !allowed.contains(&self.load.workload) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_run_args;
    use std::time::Duration;

    fn resolved(args: &[&str]) -> Result<(WorkloadOptions, Shape), String> {
        let mut argv = vec!["coordbench-run"];
        argv.extend_from_slice(args);
        let run = parse_run_args(argv).expect("arguments parse");
        run.workload_options()
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
            &["--workload", "barrier", "--ops", "5"],
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
    fn of_two_misplaced_options_the_first_listed_is_named() {
        let err = resolved(&[
            "--workload",
            "kv-put",
            "--protect",
            "token",
            "--elections",
            "5",
        ])
        .unwrap_err();
        assert_eq!(err, "--elections applies only to --workload election");
        let err = resolved(&["--workload", "kv-get", "--watchers", "3"]).unwrap_err();
        assert_eq!(
            err,
            "--watchers applies only to --workload election, discovery or config-watch"
        );
    }

    #[test]
    fn each_workload_shapes_the_plan() {
        let (o, s) = resolved(&["--workload", "election", "--elections", "7"]).unwrap();
        assert_eq!(
            (o.watch.watchers, s.max_ops, s.clients),
            (Some(2), Some(7), 16)
        );
        let (o, s) = resolved(&["--workload", "discovery", "--instances", "8"]).unwrap();
        assert_eq!(
            (s.clients, s.rate, o.watch.watch_sessions),
            (8, Some(discovery::DEFAULT_CHURN), Some(4))
        );
        let (o, s) = resolved(&["--workload", "config-watch", "--watchers", "2000"]).unwrap();
        assert_eq!(
            (s.clients, s.conns, s.rate),
            (1, 16, Some(watch::DEFAULT_UPDATE_RATE))
        );
        assert_eq!(
            (o.watch.watchers, o.watch.watch_sessions),
            (Some(2000), Some(16))
        );
        let (o, s) = resolved(&[
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
            (
                o.lock.holder_pause_ms,
                o.lock.holder_pause_ratio,
                o.lock.protect
            ),
            (Some(3000.0), Some(0.2), Some("txn"))
        );
        // A paused holder's operation may take the pause on top of --op-timeout.
        assert_eq!(s.op_timeout, Duration::from_secs(8));
        let (o, _) = resolved(&["--holder-pause", "1s", "--holder-pause-ratio", "1"]).unwrap();
        assert_eq!(o.lock.protect, Some("none"));
        let (o, _) = resolved(&["--workload", "kv-mixed", "--read-ratio", "0.7"]).unwrap();
        assert_eq!(o.kv.read_ratio, Some(0.7));
        let (o, _) = resolved(&["--workload", "kv-mixed"]).unwrap();
        assert_eq!(o.kv.read_ratio, Some(kv::DEFAULT_READ_RATIO));
        let (o, s) = resolved(&["--workload", "lock"]).unwrap();
        assert_eq!((o.lock.holder_pause, o.lock.protect), (None, None));
        assert_eq!((s.clients, s.conns, s.rate, s.max_ops), (16, 1, None, None));
        let (o, s) = resolved(&["--workload", "barrier", "--clients", "4"]).unwrap();
        assert_eq!(o.barrier.barriers, Some(barrier::DEFAULT_BARRIERS));
        assert_eq!(
            (s.max_ops, s.warmup, s.duration),
            (Some(800), Duration::ZERO, barrier::BARRIER_TIME_LIMIT)
        );
    }

    #[test]
    fn the_record_keeps_run_json_s_field_order() {
        let (o, _) = resolved(&["--workload", "kv-put", "--create-keys"]).unwrap();
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(
            json,
            r#"{"elections":null,"term_ms":null,"crash_leader":false,"churn":null,"crash_instances":0,"watchers":null,"watch_sessions":null,"barriers":null,"read_ratio":null,"create_keys":true,"check_budget_ms":null,"holder_pause_ms":null,"holder_pause_ratio":null,"protect":null}"#
        );
    }
}
