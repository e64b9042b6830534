//! The cluster coordbench starts: its size, where members keep their data, the network
//! between them, election timing, which server binary or release runs, ports and pinning;
//! with their checks (each applies only to members coordbench starts).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use coordbench_lab::affinity::CpuList;
use coordbench_lab::election_timing::ElectionTiming;
use coordbench_lab::netdelay::NetDelay;
use coordbench_lab::provision::{self, AutoCompaction, DiskKind};
use coordbench_results::kinds::TargetKind;
use coordbench_results::parse::parse_positive_duration;
use coordbench_results::timeout_range::TimeoutRange;
use coordbench_results::version::Version;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Cluster")]
pub struct ClusterOptions {
    /// Members of the cluster coordbench starts (default 3; postgres: 1). redis: N
    /// independent instances (no replication), which Redlock locks a majority of.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub cluster_size: Option<u32>,

    /// Where started members keep their data: tmpfs (/dev/shm), disk (the local
    /// filesystem, synced), nofsync (local filesystem, syncs skipped), or an emulated disk
    /// (tmpfs + a delay per sync): hdd, ssd, nvme.
    #[arg(long, value_enum, default_value = "disk")]
    pub disk: DiskKind,

    /// With --disk hdd|ssd|nvme: the delay added to every sync instead of the profile's
    /// (hdd 8ms, ssd 750us, nvme 75us).
    #[arg(long, value_parser = coordbench_results::parse::parse_duration)]
    pub sync_delay: Option<Duration>,

    /// One-way delay between started members, through a TCP proxy: DELAY or DELAY,JITTER
    /// (e.g. 5ms or 5ms,1ms).
    #[arg(long, value_parser = parse_net_delay, value_name = "DELAY[,JITTER]")]
    pub net_delay: Option<NetDelay>,

    /// Also delay traffic between clients and members (with --net-delay).
    #[arg(long)]
    pub net_delay_clients: bool,

    /// Started clusters: the election timeout range, MIN-MAX (150-300 or 150ms-300ms),
    /// mapped onto each target's own settings; what a target cannot meet exactly is noted in
    /// run.json (docs/reference.md, Election timing).
    #[arg(long, value_name = "MIN-MAX", value_parser = parse_timeout_range)]
    pub election_timeout: Option<TimeoutRange>,

    /// Started clusters: the leader's heartbeat interval, a whole number of ms: 15 or 15ms
    /// (default with --election-timeout: MIN / 10; else the target's own).
    #[arg(long, value_parser = parse_positive_duration)]
    pub heartbeat: Option<Duration>,

    /// etcd, zookeeper: the server release to start, installed by `coordbench install` or
    /// Debian's (default: $COORDBENCH_ETCD_VERSION or $COORDBENCH_ZOOKEEPER_VERSION, else
    /// the newest installed; `coordbench install --list` shows them).
    #[arg(long, value_name = "VERSION", value_parser = parse_server_version)]
    pub server_version: Option<Version>,

    /// The etcd binary to start (default: the installed etcd --server-version picks).
    #[arg(long, conflicts_with = "server_version")]
    pub etcd_bin: Option<PathBuf>,

    /// The ZooKeeper server classpath to start (default: the installed ZooKeeper
    /// --server-version picks).
    #[arg(long, conflicts_with = "server_version")]
    pub zk_classpath: Option<String>,

    /// zookeeper: each member's JVM heap (-Xms and -Xmx), MiB (default 512). A million
    /// 256-byte znodes need about 2048.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(64..=262_144))]
    pub zk_heap: Option<u32>,

    /// raft, zab: the coordbench binary that runs the members (`serve raft|zab`), e.g. another
    /// version to compare (default: this one).
    #[arg(long)]
    pub engine_bin: Option<PathBuf>,

    /// Entries (transactions) between a member's snapshots, for the started cluster: raft
    /// and zab --snapshot-every, etcd --snapshot-count, ZooKeeper snapCount (default: each
    /// one's own: raft 10,000, zab and ZooKeeper 100,000, etcd its release's). A restarted
    /// member replays the log since its last snapshot: fewer bound its rejoin in long fault
    /// runs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(100..=100_000_000))]
    pub snapshot_every: Option<u64>,

    /// etcd, raft: how --auto-compaction-retention is read (etcd's flag): periodic, a span
    /// of time (the default); revision, a number of revisions.
    #[arg(long, value_name = "MODE", value_parser = ["periodic", "revision"])]
    pub auto_compaction_mode: Option<String>,

    /// etcd, raft: the started cluster's leader compacts the history automatically,
    /// keeping this much; given to etcd and `serve raft` as their
    /// --auto-compaction-retention. periodic: a duration P (30s, 5m, 1h30m) or a bare
    /// number of hours; every P (hourly when P is over an hour) the leader compacts to the
    /// revision of about P ago. revision: a number N; every 5 minutes the leader compacts
    /// to the current revision - N. 0: never (both servers' default). Compaction bounds
    /// the snapshot a restarted member loads or is sent in long runs.
    #[arg(long, value_name = "RETENTION")]
    pub auto_compaction_retention: Option<String>,

    /// raft, zab: after the window, count the instructions the engine binary spends per
    /// committed write on a seeded simulated workload (`coordbench simulate cost`, under
    /// valgrind) and record it as engine_instructions_per_op: a figure that repeats exactly,
    /// for gates.
    #[arg(long)]
    pub engine_cost: bool,

    /// --engine-cost: writes per counted run (compare counts only at the same number;
    /// repeated counts agree to 0.2% at the default, 0.6% at 200).
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub engine_cost_ops: u64,

    /// First port for started members (default: free ports).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1024..))]
    pub base_port: Option<u16>,

    /// Pin every member coordbench starts to these CPUs (not with --endpoints).
    #[arg(long, value_name = "CPUS")]
    pub pin_servers: Option<CpuList>,
}

/// Where the cluster's members run, as the checks need it.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    pub target: TargetKind,
    /// coordbench starts the members (not attached, not null).
    pub starts_servers: bool,
    /// `--endpoints`: a cluster the user runs.
    pub attached: bool,
}

impl ClusterOptions {
    /// `--cluster-size`, or the target's default.
    pub fn size(&self, target: TargetKind) -> usize {
        self.cluster_size.map_or(
            crate::targets::descriptor(target).default_cluster_size,
            |n| n as usize,
        )
    }

    /// Emulated disks: the delay each sync gets (`--sync-delay`, else the profile's).
    pub fn emulated_sync_delay(&self) -> Option<Duration> {
        self.disk
            .is_emulated()
            .then(|| self.sync_delay.unwrap_or(self.disk.sync_delay()))
    }

    /// Every check of the group; the election timing asked for when they pass.
    pub fn check(&self, at: Placement) -> Result<ElectionTiming, String> {
        self.check_emulation(at)?;
        self.check_binaries(at)?;
        if let Some(list) = &self.pin_servers {
            list.check_available()
                .map_err(|e| format!("--pin-servers: {e}"))?;
            if !at.starts_servers {
                return Err("--pin-servers applies only to members coordbench starts; omit it with --endpoints or --target null".into());
            }
        }
        if at.target != TargetKind::Zookeeper && self.zk_classpath.is_some() {
            return Err("--zk-classpath applies only to --target zookeeper".into());
        }
        if self.zk_heap.is_some() && !(at.target == TargetKind::Zookeeper && at.starts_servers) {
            return Err("--zk-heap applies only to ZooKeeper members coordbench starts (--target zookeeper without --endpoints)".into());
        }
        self.check_auto_compaction(at)?;
        self.election_timing(at)
    }

    /// `--auto-compaction-mode` and `--auto-compaction-retention`, read as etcd reads them;
    /// `None` when not given or 0 (off).
    pub fn auto_compaction(&self) -> Result<Option<AutoCompaction>, String> {
        let mode = self.auto_compaction_mode.as_deref();
        match (mode, &self.auto_compaction_retention) {
            (_, Some(retention)) => {
                AutoCompaction::parse(mode.unwrap_or("periodic"), retention)
                    .map_err(|e| format!("--auto-compaction-retention: {e}"))
            }
            (Some(_), None) => Err("--auto-compaction-mode needs --auto-compaction-retention (how much history to keep)".into()),
            (None, None) => Ok(None),
        }
    }

    /// `--auto-compaction-*` shapes etcd and raft clusters coordbench starts.
    fn check_auto_compaction(&self, at: Placement) -> Result<(), String> {
        if self.auto_compaction_mode.is_none() && self.auto_compaction_retention.is_none() {
            return Ok(());
        }
        if !matches!(at.target, TargetKind::Etcd | TargetKind::Raft) {
            let name = crate::targets::descriptor(at.target).name;
            return Err(provision::auto_compaction_refused(name));
        }
        if !at.starts_servers {
            return Err("--auto-compaction-mode and --auto-compaction-retention apply to clusters coordbench starts; omit them with --endpoints".into());
        }
        self.auto_compaction().map(drop)
    }

    /// `--sync-delay` and `--net-delay` shape clusters coordbench starts, and only where
    /// they mean something.
    fn check_emulation(&self, at: Placement) -> Result<(), String> {
        if self.sync_delay.is_some() && !self.disk.is_emulated() {
            return Err("--sync-delay applies only to --disk hdd, ssd or nvme".into());
        }
        if self.sync_delay.is_some_and(|d| d > Duration::from_secs(1)) {
            return Err("--sync-delay must be at most 1s".into());
        }
        if self.net_delay.is_some() && !at.starts_servers {
            return Err("--net-delay applies only to clusters coordbench starts; omit it with --endpoints or --target null".into());
        }
        if self.net_delay_clients && self.net_delay.is_none() {
            return Err("--net-delay-clients needs --net-delay DELAY".into());
        }
        Ok(())
    }

    /// `--election-timeout` and `--heartbeat`, mapped onto the target's own settings.
    fn election_timing(&self, at: Placement) -> Result<ElectionTiming, String> {
        let timing = ElectionTiming::new(self.election_timeout, self.heartbeat)?;
        if timing.is_default() {
            return Ok(timing);
        }
        if !at.starts_servers {
            return Err("--election-timeout and --heartbeat apply to clusters coordbench starts; omit them with --endpoints or --target null".into());
        }
        crate::targets::check_election_timing(at.target, &timing)?;
        Ok(timing)
    }

    /// `--engine-bin` applies to raft or zab members coordbench starts. An explicit server
    /// binary that will be started (`--engine-bin`, `--etcd-bin`) must be an executable, so
    /// a bad path is refused before anything starts (in a sweep: before its first point).
    fn check_binaries(&self, at: Placement) -> Result<(), String> {
        if self.engine_bin.is_some() && at.attached {
            return Err(
                "--engine-bin applies only to members coordbench starts; omit it with --endpoints"
                    .into(),
            );
        }
        if at.attached {
            if self.server_version.is_some() {
                return Err(
                    "--server-version picks a server coordbench starts; omit it with --endpoints"
                        .into(),
                );
            }
            return Ok(());
        }
        self.check_server_version(at.target)?;
        let found = match (at.target, &self.engine_bin, &self.etcd_bin) {
            (kind, Some(bin), _) if crate::targets::descriptor(kind).engine => {
                provision::raft::resolve_binary(Some(bin)).map(drop)
            }
            (TargetKind::Etcd, _, Some(bin)) => {
                provision::etcd::resolve_binary(Some(bin)).map(drop)
            }
            _ => Ok(()),
        };
        found.map_err(|e| e.to_string())
    }

    /// `--server-version` names a release of etcd or ZooKeeper that is installed; refused
    /// before anything starts otherwise, with the install command in the message.
    fn check_server_version(&self, target: TargetKind) -> Result<(), String> {
        let Some(version) = &self.server_version else {
            return Ok(());
        };
        let kind = match target {
            TargetKind::Etcd => coordbench_lab::install::ServerKind::Etcd,
            TargetKind::Zookeeper => coordbench_lab::install::ServerKind::Zookeeper,
            other => {
                return Err(format!(
                    "--server-version applies to --target etcd or zookeeper, not {}",
                    crate::targets::descriptor(other).name
                ))
            }
        };
        coordbench_lab::install::choose(kind, Some(version))
            .map(drop)
            .map_err(|e| format!("--server-version {version}: {e}"))
    }
}

fn parse_net_delay(s: &str) -> Result<NetDelay, String> {
    s.parse()
}

fn parse_timeout_range(s: &str) -> Result<TimeoutRange, String> {
    TimeoutRange::parse(s)
}

fn parse_server_version(text: &str) -> Result<Version, String> {
    text.parse()
}
