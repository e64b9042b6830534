//! The kinds a run is made of: the target it measures, the workload it drives, the client
//! library, read consistency, lock protection and faults. The command line parses them
//! (with the `cli` feature, each is a `clap::ValueEnum` whose doc comments are the help),
//! and every record names them by [`value_name`].

#[cfg(feature = "cli")]
use clap::ValueEnum;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(ValueEnum))]
pub enum TargetKind {
    /// In-process target that does nothing: measures the load generator itself.
    Null,
    /// Real etcd: a local cluster of an installed release (`coordbench install`, or Debian's
    /// etcd-server package), or --endpoints.
    Etcd,
    /// Real ZooKeeper: a local ensemble of an installed release (`coordbench install`, or
    /// Debian's zookeeper package), or --endpoints.
    Zookeeper,
    /// The built-in Raft engine speaking etcd's v3 API: N `coordbench serve raft` processes.
    Raft,
    /// The built-in Zab engine speaking ZooKeeper's protocol: N `coordbench serve zab`
    /// processes.
    Zab,
    /// Redis: N independent redis-server instances (not replication; Redlock's setting)
    /// started from Debian's redis-server package, or --endpoints.
    Redis,
    /// PostgreSQL: one server started from Debian's postgresql package, or --endpoints.
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(ValueEnum))]
pub enum WorkloadKind {
    /// Writes of random keys.
    KvPut,
    /// Reads of random keys (see --consistency).
    KvGet,
    /// Reads (with probability --read-ratio, see --consistency) and writes of random keys.
    KvMixed,
    /// Clients contend for locks, hold, release (see --locks, --hold, --recipe).
    Lock,
    /// Clients campaign in one election; each leader leads for --term, then resigns (or
    /// crashes: --crash-leader); --watchers observers follow it.
    Election,
    /// --instances register and deregister at --churn changes/s; --watchers follow the
    /// membership.
    Discovery,
    /// One writer updates a config key at --rate; --watchers watchers over --conns sessions
    /// follow it.
    ConfigWatch,
    /// Clients read, write and compare-and-set a few keys (--keys, default 4); the history
    /// is checked for linearizability (history.jsonl, summary.csv `linearizable`).
    Register,
    /// --clients pass --barriers double barriers in sequence (enter: all clients arrive;
    /// leave: all clients depart); the window lasts until every barrier is passed.
    Barrier,
}

/// The ZooKeeper client library a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(ValueEnum))]
pub enum ZkClientArg {
    /// The driver's own client (recorded as coordbench-zk-client).
    #[default]
    Client,
    /// The zookeeper-async crate (silently replaces expired sessions; no sync()).
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(ValueEnum))]
pub enum ConsistencyArg {
    Linearizable,
    Serializable,
    // ZooKeeper only: sync() then getData (not linearizable for a session on the leader).
    // A plain comment: a doc comment would turn `--help`'s value list into one per line.
    Sync,
}

/// How a lock's protected resource fences stale holders (`--protect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(ValueEnum))]
pub enum ProtectArg {
    /// An in-process resource that accepts every write.
    None,
    /// An in-process resource that rejects a fencing token lower than the highest seen.
    Token,
    /// A key of the coordination service, written only while the writer holds the lock.
    Txn,
}

/// A fault `--fault` injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[cfg_attr(feature = "cli", derive(ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum FaultArg {
    /// SIGKILL the leader; restart it on its data once a new leader leads and writes resumed
    /// (and no sooner than --fault-duration).
    KillLeader,
    /// SIGKILL a uniformly random member; restart it on its data after --fault-duration.
    KillRandom,
    /// SIGSTOP the leader for --fault-duration, then SIGCONT.
    PauseLeader,
    /// SIGSTOP a uniformly random member for --fault-duration, then SIGCONT.
    PauseRandom,
    /// Cut the leader off from every other member for --fault-duration (it keeps its
    /// clients).
    PartitionLeader,
    /// Split the members into a random minority and majority for --fault-duration.
    PartitionRandom,
    /// SIGKILL every member at once; restart all on their data after --fault-duration.
    RestartAll,
}

impl FaultArg {
    /// Members a cluster needs for the kind: after one member fails, the rest must still
    /// hold a majority. Restarting everything needs no survivors.
    pub fn min_members(self) -> usize {
        match self {
            FaultArg::RestartAll => 1,
            _ => 3,
        }
    }

    /// Whether the kind cuts links (and so needs the members behind the proxy).
    pub fn is_partition(self) -> bool {
        matches!(self, FaultArg::PartitionLeader | FaultArg::PartitionRandom)
    }
}

#[cfg(feature = "cli")]
impl FaultArg {
    /// The name users type (`kill-leader`).
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

/// The name users type for `value` (`kv-put`, `kill-leader`), which records use too.
#[cfg(feature = "cli")]
pub fn value_name<T: ValueEnum>(value: T) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}
