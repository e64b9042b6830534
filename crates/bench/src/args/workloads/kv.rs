//! The kv workloads' options (kv-put, kv-get, kv-mixed; `--keys` and `--consistency` also
//! serve register): keys, value size, read consistency, kv-mixed's read ratio and kv-put's
//! creates, and what run.json records of them.

use clap::Args;
use coordbench_drivers::{ApiFamily, Consistency};
use coordbench_results::kinds::{ConsistencyArg, WorkloadKind};
use coordbench_results::parse::parse_read_ratio;
use serde::Serialize;

/// kv-mixed: the default probability that an operation is a read.
pub const DEFAULT_READ_RATIO: f64 = 0.5;

#[derive(Debug, Clone, Args)]
#[command(
    next_help_heading = "kv workloads (kv-put, kv-get, kv-mixed; --keys and --consistency also register)"
)]
pub struct KvOptions {
    /// kv workloads: number of distinct keys (default 1000); register: keys the clients
    /// share (default 4).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub keys: Option<u64>,

    /// kv workloads: value size in bytes.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    pub value_size: u64,

    /// kv-get, kv-mixed and register: read consistency (linearizable: etcd's quorum read,
    /// on ZooKeeper a check-only multi before getData; serializable: from the member's local
    /// state; sync, ZooKeeper only: sync() then getData, not linearizable on the leader).
    #[arg(long, value_enum, default_value = "linearizable")]
    pub consistency: ConsistencyArg,

    /// kv-mixed: the probability that an operation is a read (else a write), in [0, 1],
    /// drawn per operation from --seed (default 0.5).
    #[arg(long, value_parser = parse_read_ratio)]
    pub read_ratio: Option<f64>,

    /// kv-put: every write creates a key no one wrote before (the ZooKeeper paper's Table 2
    /// creates): one create request on the ZooKeeper API, a put of a new key elsewhere;
    /// nothing is preloaded and --keys does not apply.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true",
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub create_keys: bool,
}

/// What run.json keeps of the kv options beside `keys`, `value_size` and `consistency`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KvRecord {
    /// kv-mixed: the probability that an operation is a read (`--read-ratio`).
    pub read_ratio: Option<f64>,
    /// kv-put: every write creates a new key (`--create-keys`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub create_keys: bool,
}

impl KvOptions {
    /// `--keys`, or its default: the kv workloads spread over many keys (the preloaded
    /// ones, with `--preload-keys`), the register workload makes its clients contend on a
    /// few.
    pub fn keys(&self, workload: WorkloadKind, preload_keys: Option<u64>) -> usize {
        match (self.keys, workload, preload_keys) {
            (Some(k), _, _) => k as usize,
            (None, WorkloadKind::Register, _) => 4,
            (None, _, Some(n)) => n as usize,
            (None, _, None) => 1000,
        }
    }

    /// `--consistency`, as the drivers take it.
    pub fn read_consistency(&self) -> Consistency {
        match self.consistency {
            ConsistencyArg::Linearizable => Consistency::Linearizable,
            ConsistencyArg::Serializable => Consistency::Serializable,
            ConsistencyArg::Sync => Consistency::Sync,
        }
    }

    /// `--consistency sync` is ZooKeeper's sync(), which the other APIs do not have.
    pub fn check_consistency(&self, family: ApiFamily) -> Result<(), String> {
        if self.consistency == ConsistencyArg::Sync && family != ApiFamily::ZooKeeper {
            return Err(
                "--consistency sync is ZooKeeper's sync() then getData; use linearizable or serializable with this target".into(),
            );
        }
        Ok(())
    }

    /// The record: kv-mixed's read ratio (its default filled in), kv-put's creates.
    pub(super) fn record(&self, workload: WorkloadKind) -> KvRecord {
        KvRecord {
            read_ratio: (workload == WorkloadKind::KvMixed)
                .then(|| self.read_ratio.unwrap_or(DEFAULT_READ_RATIO)),
            create_keys: self.create_keys,
        }
    }
}
