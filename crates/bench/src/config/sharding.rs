//! `--shard`, `--run-id`, `--start-at` and `--rendezvous` checked against the rest of a
//! run: whatever a shard cannot do exactly as its part of one process's run is refused here,
//! in one line.

use coordbench_results::kinds::{value_name, TargetKind, WorkloadKind};

use crate::args::RunArgs;
use crate::shard::{Part, Sharding, StartRule};

/// The workloads whose shards together do exactly what one process does: each client's
/// operations depend only on its (global) number, election observers are split like
/// clients, and lock sections and leaderships carry fencing tokens the merge orders them by.
const SHARDABLE: [WorkloadKind; 5] = [
    WorkloadKind::KvPut,
    WorkloadKind::KvGet,
    WorkloadKind::KvMixed,
    WorkloadKind::Lock,
    WorkloadKind::Election,
];

/// `--shard` and its start options checked against the rest of the run: `None` for an
/// ordinary run; an error names what to fix.
pub fn sharding_of(args: &RunArgs, clients: usize) -> Result<Option<Sharding>, String> {
    let s = &args.sharding;
    let Some(part) = s.shard else {
        return match (s.rendezvous, s.start_at.is_some(), s.run_id.is_some()) {
            (true, _, _) => Err("--rendezvous needs --shard I/N".into()),
            (_, true, _) => Err("--start-at needs --shard I/N".into()),
            (_, _, true) => Err("--run-id needs --shard I/N".into()),
            _ => Ok(None),
        };
    };
    let run_id = s.run_id.clone().ok_or(
        "--shard needs --run-id ID, the same for every shard (e.g. --run-id bench-$(date +%s))",
    )?;
    check_run_id(&run_id)?;
    check_shardable(args, part, clients)?;
    let start = if s.rendezvous {
        if !rendezvous_target(args.load.target) {
            return Err(format!(
                "--rendezvous meets through etcd, raft, zookeeper or zab, not --target {}; use --start-at TIME",
                value_name(args.load.target)
            ));
        }
        StartRule::Rendezvous {
            run_id: run_id.clone(),
            part,
            timeout: s.rendezvous_timeout,
        }
    } else if let Some(at) = s.start_at {
        StartRule::At(at)
    } else {
        StartRule::Now
    };
    Ok(Some(Sharding {
        part,
        run_id,
        start,
    }))
}

fn rendezvous_target(target: TargetKind) -> bool {
    matches!(
        target,
        TargetKind::Etcd | TargetKind::Raft | TargetKind::Zookeeper | TargetKind::Zab
    )
}

fn check_run_id(id: &str) -> Result<(), String> {
    let fine = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if fine {
        Ok(())
    } else {
        Err(format!(
            "--run-id `{id}`: use 1 to 64 letters, digits, - and _"
        ))
    }
}

/// What a shard cannot do as its exact part of one process's run.
fn check_shardable(args: &RunArgs, part: Part, clients: usize) -> Result<(), String> {
    if !SHARDABLE.contains(&args.load.workload) {
        return Err(format!(
            "--shard runs the kv-put, kv-get, kv-mixed, lock and election workloads, not --workload {}",
            value_name(args.load.workload)
        ));
    }
    if clients < part.count {
        return Err(format!(
            "--shard {part}: {clients} clients cannot be split over {} shards; give --clients {} or more",
            part.count, part.count
        ));
    }
    if !args.faults.fault.is_empty() {
        return Err("--fault cannot be used with --shard: faults need the cluster a run started, and shards share one they attach to".into());
    }
    if args.lock.writes_resource() {
        return Err("--holder-pause and --protect cannot be used with --shard (their resource lives in each process)".into());
    }
    if args.load.target == TargetKind::Null {
        if matches!(
            args.load.workload,
            WorkloadKind::Lock | WorkloadKind::Election
        ) {
            return Err("--target null keeps its locks and elections in each process, so shards would not contend; shard them on a shared target (--endpoints)".into());
        }
    } else if !args.attach.attached() {
        return Err(format!(
            "--shard needs the target every shard shares: start it (e.g. `coordbench serve {}` members, see README) and pass --endpoints",
            value_name(args.load.target)
        ));
    }
    Ok(())
}
