//! The axes a sweep can vary and what each means: the `coordbench run` option it sets, the
//! summary.csv column it shows up in, and how charts label and scale it. Shared by the sweep
//! (building points) and the report (reading them back).

use std::time::Duration;

/// The value of an axis that does not apply to a point's target (`server_version` of
/// raft): the point runs without the option.
pub const NOT_APPLICABLE: &str = "-";

/// One swept dimension. The order of [`Axis::ALL`] is the order of the columns in a
/// sweep's summary.csv and in its point directory names, and the order in which a report
/// picks its x axis: the workload first (`raft-workload=lock-clients=4`), the server
/// binaries last, so two builds compared side by side split a chart's lines rather than
/// take its x axis whenever anything else varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Axis {
    Workload,
    ClusterSize,
    Ttl,
    Clients,
    Locks,
    State,
    Disk,
    NetDelay,
    ElectionTimeout,
    Heartbeat,
    ValueSize,
    Rate,
    ReadRatio,
    Recipe,
    Secure,
    ServerVersion,
    EtcdBin,
    ZkClasspath,
    EngineBin,
}

impl Axis {
    pub const ALL: [Axis; 19] = [
        Axis::Workload,
        Axis::ClusterSize,
        Axis::Ttl,
        Axis::Clients,
        Axis::Locks,
        Axis::State,
        Axis::Disk,
        Axis::NetDelay,
        Axis::ElectionTimeout,
        Axis::Heartbeat,
        Axis::ValueSize,
        Axis::Rate,
        Axis::ReadRatio,
        Axis::Recipe,
        Axis::Secure,
        Axis::ServerVersion,
        Axis::EtcdBin,
        Axis::ZkClasspath,
        Axis::EngineBin,
    ];

    /// The name in a spec's `[axes]` table and in a sweep's summary.csv.
    pub fn name(self) -> &'static str {
        match self {
            Axis::Workload => "workload",
            Axis::ClusterSize => "cluster_size",
            Axis::Ttl => "ttl",
            Axis::Clients => "clients",
            Axis::Locks => "locks",
            Axis::State => "state",
            Axis::Disk => "disk",
            Axis::NetDelay => "net_delay",
            Axis::ElectionTimeout => "election_timeout",
            Axis::Heartbeat => "heartbeat",
            Axis::ValueSize => "value_size",
            Axis::Rate => "rate",
            Axis::ReadRatio => "read_ratio",
            Axis::Recipe => "recipe",
            Axis::Secure => "secure",
            Axis::ServerVersion => "server_version",
            Axis::EtcdBin => "etcd_bin",
            Axis::ZkClasspath => "zk_classpath",
            Axis::EngineBin => "engine_bin",
        }
    }

    pub fn from_name(name: &str) -> Option<Axis> {
        Axis::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The `coordbench run` option the axis sets.
    pub fn flag(self) -> String {
        format!("--{}", self.name().replace('_', "-"))
    }

    /// The `coordbench run` arguments one value stands for: `--flag value`, except the
    /// state axis, whose `keys=N`, `watchers=N` and `sessions=N` set `--preload-keys N`,
    /// `--preload-watchers N` or `--preload-sessions N`.
    pub fn args(self, value: &str) -> Result<Vec<String>, String> {
        if self == Axis::ServerVersion && value == NOT_APPLICABLE {
            return Ok(Vec::new());
        }
        if self != Axis::State {
            return Ok(vec![self.flag(), value.to_string()]);
        }
        match value.split_once('=') {
            Some((kind @ ("keys" | "watchers" | "sessions"), n)) => {
                Ok(vec![format!("--preload-{kind}"), n.trim().to_string()])
            }
            _ => Err(format!(
                "state value '{value}': write keys=N, watchers=N or sessions=N"
            )),
        }
    }

    /// The column of a run's own summary.csv that holds the same figure, where there is
    /// one (a summary.csv concatenated from single runs has no axis columns). A run's
    /// summary.csv does not name the server binaries it ran.
    pub fn run_column(self) -> Option<&'static str> {
        match self {
            Axis::Ttl => Some("ttl_ms"),
            Axis::State
            | Axis::NetDelay
            | Axis::ElectionTimeout
            | Axis::Heartbeat
            | Axis::Secure
            | Axis::EtcdBin
            | Axis::ZkClasspath
            | Axis::EngineBin => None,
            other => Some(other.name()),
        }
    }

    /// Axis title on a chart, with its unit.
    pub fn label(self) -> &'static str {
        match self {
            Axis::Workload => "workload",
            Axis::ClusterSize => "cluster size (members)",
            Axis::Ttl => "session / lease TTL (ms)",
            Axis::Clients => "clients",
            Axis::Locks => "locks contended for",
            Axis::State => "state held (keys, watchers or sessions)",
            Axis::Disk => "disk",
            Axis::NetDelay => "one-way network delay (ms)",
            Axis::ElectionTimeout => "election timeout range (ms)",
            Axis::Heartbeat => "heartbeat interval (ms)",
            Axis::ValueSize => "value size (bytes)",
            Axis::Rate => "offered load (ops/s)",
            Axis::ReadRatio => "read ratio (kv-mixed: reads per operation)",
            Axis::Recipe => "lock recipe",
            Axis::Secure => "secured cluster (--secure)",
            Axis::ServerVersion => "server version",
            Axis::EtcdBin => "etcd binary",
            Axis::ZkClasspath => "ZooKeeper classpath",
            Axis::EngineBin => "engine binary (coordbench)",
        }
    }

    /// Workloads, disk kinds, recipes, server versions and binaries and timeout ranges
    /// (`150-300`) are names, not quantities: charts space them evenly (server versions in
    /// release order, see [`Axis::category_order`]).
    pub fn is_categorical(self) -> bool {
        matches!(
            self,
            Axis::Workload
                | Axis::State
                | Axis::ElectionTimeout
                | Axis::Disk
                | Axis::Recipe
                | Axis::Secure
                | Axis::ServerVersion
                | Axis::EtcdBin
                | Axis::ZkClasspath
                | Axis::EngineBin
        )
    }

    /// The order of a categorical axis's values on a chart: releases in release order
    /// (3.4.23 before 3.10.0), everything else as first seen.
    pub fn category_order(self, values: &mut [String]) {
        if self == Axis::ServerVersion {
            values.sort_by_cached_key(|v| v.parse::<crate::version::Version>().ok());
        }
    }

    /// A `server_version` value names a release for every target (`3.6.16`) or for one
    /// (`etcd@3.6.16`): the release `target` runs for it, or `None` when the value is
    /// another target's. A target without releases (the engines, redis, postgres) runs
    /// once, as [`NOT_APPLICABLE`], beside every release of the others.
    pub fn server_version_for<'v>(
        value: &'v str,
        target: &str,
        has_releases: bool,
    ) -> Option<&'v str> {
        if !has_releases {
            return Some(NOT_APPLICABLE);
        }
        match value.split_once('@') {
            Some((only, version)) => (only == target).then_some(version),
            None => Some(value),
        }
    }

    /// A value as a number in the unit of [`Axis::label`]: durations (`2s`, or `5ms,1ms` for
    /// delay and jitter) in milliseconds, everything else as written.
    pub fn numeric(self, value: &str) -> Option<f64> {
        if self.is_categorical() {
            return None;
        }
        let first = value.split(',').next().unwrap_or_default().trim();
        if let Ok(n) = first.parse::<f64>() {
            return Some(n);
        }
        humantime::parse_duration(first)
            .ok()
            .map(|d: Duration| d.as_secs_f64() * 1000.0)
    }
}

/// The recipe axis value meaning "the target's herd-free recipe" (etcd-mutex, zk-recipe).
pub const HERD_FREE: &str = "herd-free";

/// Each API family's herd-free recipe as its runs record it (etcd's, ZooKeeper's, the null
/// target's), which a report shows as [`HERD_FREE`]. The drivers own the recipes; a test in
/// the bench crate holds this list to them.
pub const HERD_FREE_RECIPES: [&str; 3] = ["etcd-mutex", "zk-recipe", "mutex"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_flags_and_numbers_round_trip() {
        for axis in Axis::ALL {
            assert_eq!(Axis::from_name(axis.name()), Some(axis));
        }
        assert_eq!(Axis::ClusterSize.flag(), "--cluster-size");
        assert_eq!(Axis::Ttl.numeric("2s"), Some(2000.0));
        assert_eq!(Axis::Ttl.numeric("1500"), Some(1500.0));
        assert_eq!(Axis::NetDelay.numeric("5ms,1ms"), Some(5.0));
        assert_eq!(Axis::Disk.numeric("tmpfs"), None);
        assert_eq!(Axis::ReadRatio.flag(), "--read-ratio");
        assert_eq!(Axis::ReadRatio.numeric("0.7"), Some(0.7));
        assert_eq!(Axis::ReadRatio.run_column(), Some("read_ratio"));
        assert_eq!(Axis::ElectionTimeout.flag(), "--election-timeout");
        assert_eq!(Axis::ElectionTimeout.numeric("150-300"), None);
        assert_eq!(Axis::Heartbeat.numeric("15ms"), Some(15.0));
        assert_eq!(
            Axis::State.args("watchers=1000").unwrap(),
            ["--preload-watchers", "1000"]
        );
        assert_eq!(Axis::Clients.args("4").unwrap(), ["--clients", "4"]);
        assert!(Axis::State
            .args("leases=10")
            .unwrap_err()
            .contains("keys=N"));
    }

    #[test]
    fn workload_and_server_binaries_are_named_categorical_axes() {
        for (axis, name, flag) in [
            (Axis::Workload, "workload", "--workload"),
            (Axis::EtcdBin, "etcd_bin", "--etcd-bin"),
            (Axis::ZkClasspath, "zk_classpath", "--zk-classpath"),
            (Axis::EngineBin, "engine_bin", "--engine-bin"),
        ] {
            assert_eq!((axis.name(), axis.flag()), (name, flag.to_string()));
            assert_eq!(Axis::from_name(name), Some(axis));
            assert!(axis.is_categorical(), "{name}");
            // A path that happens to be a number is still a name.
            assert_eq!(axis.numeric("10"), None, "{name}");
        }
        assert_eq!(Axis::ALL[0], Axis::Workload);
        assert_eq!(Axis::ServerVersion.run_column(), Some("server_version"));
        let mut versions: Vec<String> = ["3.9.5", "3.10.0", "3.4.23"].map(String::from).to_vec();
        Axis::ServerVersion.category_order(&mut versions);
        assert_eq!(versions, ["3.4.23", "3.9.5", "3.10.0"]);
        assert_eq!(
            Axis::server_version_for("etcd@3.6.16", "etcd", true),
            Some("3.6.16")
        );
        assert_eq!(
            Axis::server_version_for("etcd@3.6.16", "zookeeper", true),
            None
        );
        assert_eq!(
            Axis::server_version_for("3.6.16", "zookeeper", true),
            Some("3.6.16")
        );
        assert_eq!(
            Axis::server_version_for("etcd@3.6.16", "raft", false),
            Some(NOT_APPLICABLE)
        );
        assert!(Axis::ServerVersion.args(NOT_APPLICABLE).unwrap().is_empty());
        assert_eq!(Axis::Workload.run_column(), Some("workload"));
        for axis in [Axis::EtcdBin, Axis::ZkClasspath, Axis::EngineBin] {
            assert_eq!(axis.run_column(), None, "{}", axis.name());
        }
    }
}
