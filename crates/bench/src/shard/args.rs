//! The `coordbench run` options of a sharded run: which shard, the run it belongs to, and
//! how the shards start together.

use std::time::{Duration, SystemTime};

use clap::Args;

use super::Part;

#[derive(Debug, Clone, Args)]
pub struct ShardArgs {
    /// Run shard I of N (I from 0) of a run N processes share: this process runs the
    /// clients, open-loop start times (--rate) and operations (--ops) whose number is I
    /// modulo N, so the N shards together do what one process with the same options
    /// would. Needs --run-id and a shared target (--endpoints).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Part>,

    /// The run the shard belongs to, the same for every shard (letters, digits, - and _):
    /// recorded in run.json, the prefix of --rendezvous's barrier keys, and what
    /// `coordbench merge` checks.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,

    /// Start the measured run (warm-up first) at this wall-clock time, RFC 3339 (e.g.
    /// 2026-12-03T14:00:00Z), as an orchestrator sets it for every shard.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at, conflicts_with = "rendezvous")]
    pub start_at: Option<SystemTime>,

    /// Meet the other shards through the target itself (a barrier key per shard under the
    /// run id's prefix: etcd, raft, ZooKeeper, zab) and start when all are there.
    #[arg(long)]
    pub rendezvous: bool,

    /// How long a shard waits for the others at --rendezvous before it gives up (exit 2,
    /// naming the shards missing).
    #[arg(long, default_value = "60s", value_parser = parse_timeout)]
    pub rendezvous_timeout: Duration,
}

fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("{e}: write an RFC 3339 time, e.g. 2026-12-03T14:00:00Z"))
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    match coordbench_results::parse::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err("must be a duration greater than zero, e.g. 30s".into()),
    }
}
