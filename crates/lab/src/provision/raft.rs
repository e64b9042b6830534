//! Starts the built-in Raft engine as a local cluster: N `coordbench serve raft` processes
//! on 127.0.0.1, each with its own data directory, client (gRPC) and peer ports, and waits
//! until every member answers etcd's Status with the same leader, as for real etcd.
//!
//! The launcher ([`launch_members`]) is shared with the Zab engine (`provision::zab`),
//! which differs only in the subcommand, the client URL form and the readiness check.
//! Secured (`--secure`): members serve clients over TLS and require a client certificate
//! signed by the run's CA (`serve raft|zab --cert-file --key-file --trusted-ca-file`), and
//! on raft auth is then enabled for the run's user exactly as on etcd
//! (`etcd_auth::ready_and_secured`). Peer traffic stays plain on 127.0.0.1.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use coordbench_drivers::etcd::EtcdSecurity;
use coordbench_tls::RunCertificates;

use super::disk;
use super::executable::find_executable;
use super::process::Launch;
use super::{ports, Cluster, ClusterInfo, ClusterSpec, MemberInfo, ProvisionError};
use crate::election_timing::{EffectiveTiming, ElectionTiming};
use crate::netdelay::Ends;
use coordbench_results::timeout_range::TimeoutRange;

const TARGET: &str = "raft";

/// How the members of a built-in engine (Raft or Zab) are started.
#[derive(Debug, Clone)]
pub struct RaftOptions {
    /// The coordbench binary that serves a member (`--engine-bin`; default: this one, or the
    /// `coordbench` next to a test binary).
    pub binary: Option<PathBuf>,
    pub tick: Duration,
    pub heartbeat_ticks: u32,
    pub election_ticks_min: u32,
    pub election_ticks_max: u32,
    /// zab: members require digest authentication (`serve zab --enforce-auth`, as
    /// ZooKeeper's `enforce.auth.enabled`). raft is secured by `tls` and by auth for
    /// `client`'s user instead.
    pub secure: bool,
    /// The election timing the run asked for (what [`RaftOptions::with_timing`] mapped).
    pub requested: ElectionTiming,
    /// Serve clients over TLS with these certificates, client certificates required.
    pub tls: Option<RunCertificates>,
    /// raft: how provisioning reaches the members (TLS when `tls`), and the user auth is
    /// enabled for once they are ready (`None`: auth stays off).
    pub client: EtcdSecurity,
    /// zab: how provisioning's four-letter words reach the members (TLS when `tls`).
    pub zk_client: Option<coordbench_drivers::zookeeper::ZkTls>,
    /// raft: the members' `--auth-token-ttl` (`None`: etcd's default, 300 s).
    pub auth_token_ttl: Option<Duration>,
    /// Test-only: members answer one kind of request wrongly (`serve --wrong-answer`, a
    /// hidden flag), so that the differential tests can show they catch it.
    pub wrong_answer: Option<String>,
}

impl Default for RaftOptions {
    /// etcd's defaults in ticks of 10 ms: heartbeat 100 ms, election timeout 1–2 s.
    fn default() -> Self {
        RaftOptions {
            binary: None,
            tick: Duration::from_millis(10),
            heartbeat_ticks: 10,
            election_ticks_min: 100,
            election_ticks_max: 200,
            secure: false,
            requested: ElectionTiming::default(),
            tls: None,
            client: EtcdSecurity::default(),
            zk_client: None,
            auth_token_ttl: None,
            wrong_answer: None,
        }
    }
}

/// The longest tick the engines run with when a timing is asked for (their default).
const MAX_TICK_MS: u32 = 10;

impl RaftOptions {
    /// The longest election timeout a member may draw.
    pub fn election_timeout_max(&self) -> Duration {
        self.tick * self.election_ticks_max
    }

    /// The members' ticks for `timing`: a tick that divides MIN, MAX and the heartbeat
    /// (the largest up to 10 ms), so both are met exactly: raft draws its timeout
    /// uniformly from MIN to MAX in ticks; zab gives up on a silent leader after MIN
    /// (syncLimit) and bounds discovery and sync by MAX (initLimit). Without a timeout
    /// asked for, the default 1000-1990 ms stays; without a heartbeat, it is MIN / 10.
    pub fn with_timing(mut self, timing: &ElectionTiming) -> Result<Self, String> {
        self.requested = *timing;
        if timing.is_default() {
            return Ok(self);
        }
        let tick_ms = self.tick.as_millis() as u32;
        let range = timing.timeout_or(TimeoutRange {
            min_ms: tick_ms * self.election_ticks_min,
            max_ms: tick_ms * (self.election_ticks_max - 1),
        });
        let heartbeat = timing.heartbeat_or(tick_ms * self.heartbeat_ticks);
        timing.check_heartbeat_below(range.min_ms, heartbeat)?;
        let tick = common_tick(&[range.min_ms, range.max_ms, heartbeat]);
        (self.election_ticks_min, self.election_ticks_max) = range.ticks(u64::from(tick) * 1000);
        self.heartbeat_ticks = heartbeat / tick;
        self.tick = Duration::from_millis(u64::from(tick));
        Ok(self)
    }

    /// The `serve raft|zab` flags that set the election timing.
    pub fn timing_args(&self) -> [String; 4] {
        [
            format!("--tick={}ms", self.tick.as_millis()),
            format!("--heartbeat-ticks={}", self.heartbeat_ticks),
            format!("--election-ticks-min={}", self.election_ticks_min),
            format!("--election-ticks-max={}", self.election_ticks_max),
        ]
    }

    /// What the members of `engine` run with. raft: a timeout from MIN to MAX ticks (the
    /// core's range is [min, max) ticks); zab: no random timeout, a follower waits MIN.
    pub fn effective_timing(&self, engine: &str) -> EffectiveTiming {
        let tick = self.tick.as_millis() as u64;
        let min = tick * u64::from(self.election_ticks_min);
        let last = tick * u64::from(self.election_ticks_max.saturating_sub(1));
        let effective = EffectiveTiming {
            election_timeout_min_ms: min,
            election_timeout_max_ms: if engine == "zab" { min } else { last },
            heartbeat_ms: tick * u64::from(self.heartbeat_ticks),
            settings: self.timing_args().join(" "),
            note: None,
        };
        effective.noting(&self.requested, || {
            format!(
                "zab draws no random timeout: a follower gives up on a silent leader after syncLimit = MIN; MAX ({last} ms) is initLimit, the bound on discovery and sync after an election"
            )
        })
    }
}

/// The longest tick up to [`MAX_TICK_MS`] that divides every one of `ms`.
fn common_tick(ms: &[u32]) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = ms.iter().copied().fold(0, gcd).max(1);
    (1..=MAX_TICK_MS).rev().find(|t| g % t == 0).unwrap_or(1)
}

/// The binary that serves members: an explicit one (`--engine-bin`: an executable file, a
/// bare name looked up on PATH, as for `--etcd-bin`), else the running coordbench (under
/// whatever name it was copied to), else (when the running program is a test binary under
/// target/*/deps/) the coordbench beside it.
pub fn resolve_binary(explicit: Option<&Path>) -> Result<PathBuf, ProvisionError> {
    let not_found = |binary: &Path, hint: &str| ProvisionError::BinaryNotFound {
        binary: format!("coordbench binary {}", binary.display()),
        hint: format!(
            "{hint} (the raft and zab targets run members as `coordbench serve raft|zab`)"
        ),
    };
    if let Some(path) = explicit {
        return find_executable(Some(path), "coordbench", "coordbench").map_err(|tried| {
            not_found(&tried, "pass --engine-bin the path of a coordbench build")
        });
    }
    let current = std::env::current_exe()
        .map_err(|e| ProvisionError::io("locating the running binary", e))?;
    let is_test_binary = current
        .parent()
        .and_then(|dir| dir.file_name())
        .is_some_and(|dir| dir == "deps");
    if !is_test_binary {
        return Ok(current);
    }
    let beside = current
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("coordbench"))
        .filter(|p| p.is_file());
    beside.ok_or_else(|| not_found(Path::new("coordbench"), "build it with cargo build"))
}

/// The `serve` flags that make a member serve clients over TLS with `certs`, requiring
/// client certificates signed by the run's CA.
pub(super) fn serve_tls_args(certs: Option<&RunCertificates>) -> Vec<String> {
    certs.map_or_else(Vec::new, |certs| {
        vec![
            format!("--cert-file={}", certs.server_cert.display()),
            format!("--key-file={}", certs.server_key.display()),
            format!("--trusted-ca-file={}", certs.ca.display()),
        ]
    })
}

/// Starts `spec.size` members. Call from a tokio worker or the main thread (members die with
/// the thread that spawned them); on any error everything started so far is stopped.
pub async fn start(spec: &ClusterSpec, opts: &RaftOptions) -> Result<Cluster, ProvisionError> {
    let mut extra_args = serve_tls_args(opts.tls.as_ref());
    let snapshot_every = spec.snapshot_every.unwrap_or(RAFT_SNAPSHOT_EVERY);
    extra_args.push(format!("--snapshot-every={snapshot_every}"));
    let (compaction_args, compaction_settings) = spec.auto_compaction_args();
    extra_args.extend(compaction_args);
    if let Some(ttl) = opts.auth_token_ttl {
        extra_args.push(format!("--auth-token-ttl={}", ttl.as_secs().max(1)));
    }
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    let mut cluster = launch_members(spec, opts, TARGET, &extra_args, |addr| {
        format!("{scheme}://{addr}")
    })
    .await?;
    let settings = &mut cluster.info_mut().settings;
    settings.extend(snapshot_settings(snapshot_every));
    settings.extend(compaction_settings);
    if opts.tls.is_some() {
        settings.push((
            "client-transport".into(),
            "TLS, client certificates required (CA generated per run); peers plain TCP on 127.0.0.1".into(),
        ));
    }
    if opts.client.user.is_some() {
        settings.push(("auth".into(), super::etcd_auth::DESCRIPTION.into()));
    }
    let version = super::etcd_auth::ready_and_secured(&mut cluster, TARGET, &opts.client).await?;
    cluster.info_mut().version = Some(version);
    Ok(cluster)
}

/// The members' snapshot cadence as run.json records it (the rule of `serve
/// --snapshot-every`, at the engine's default, which the launcher does not override).
/// Entries between a raft member's snapshots in the clusters the lab starts: the engine's
/// own default, passed explicitly so the record states what ran.
pub const RAFT_SNAPSHOT_EVERY: u64 = 10_000;

pub(super) fn snapshot_settings(every: u64) -> [(String, String); 2] {
    [
        ("snapshot-every-entries".into(), every.to_string()),
        (
            "snapshot-min-log-fraction".into(),
            format!("1/{}", coordbench_node::SNAPSHOT_LOG_FRACTION),
        ),
    ]
}

/// Starts `spec.size` `coordbench serve <engine>` processes and returns them without
/// waiting for readiness. `extra_args` go to every member's command line; `client_url`
/// turns a client `host:port` into what the target's driver connects to.
pub(super) async fn launch_members(
    spec: &ClusterSpec,
    opts: &RaftOptions,
    engine: &str,
    extra_args: &[String],
    client_url: impl Fn(&str) -> String,
) -> Result<Cluster, ProvisionError> {
    if spec.size == 0 {
        return Err(ProvisionError::Unsupported(format!(
            "a {engine} cluster needs at least 1 member"
        )));
    }
    let binary = resolve_binary(opts.binary.as_deref())?;
    let mut extra_args = extra_args.to_vec();
    extra_args.extend(
        opts.wrong_answer
            .iter()
            .map(|w| format!("--wrong-answer={w}")),
    );
    let extra_args = extra_args.as_slice();
    let ports = ports::allocate(spec.base_port, 2 * spec.size)?;
    let root = disk::create_data_root(spec, engine)?;
    let members = EngineMembers {
        spec,
        opts,
        engine,
        extra_args,
        binary,
        ports,
        root_path: root.path.clone(),
    };
    // From here on, an early return drops `cluster`, which stops what was started.
    let mut cluster = Cluster::provisioned(members.cluster_info(), Some(root), spec);
    let peers = members.peer_lists(&mut cluster).await?;
    let clients = members.list(&|i| members.client(i));
    for (i, member_peers) in peers.iter().enumerate() {
        members
            .launch(&mut cluster, i, member_peers, &clients, &client_url)
            .await?;
    }
    Ok(cluster)
}

/// What every member of one [`launch_members`] shares: the engine, its binary and flags,
/// the ports and the data root.
struct EngineMembers<'a> {
    spec: &'a ClusterSpec,
    opts: &'a RaftOptions,
    engine: &'a str,
    extra_args: &'a [String],
    binary: PathBuf,
    /// Member i listens for clients on ports[2i] and for peers on ports[2i+1].
    ports: Vec<u16>,
    root_path: PathBuf,
}

impl EngineMembers<'_> {
    fn client(&self, i: usize) -> SocketAddr {
        ports::local(self.ports[2 * i])
    }

    fn peer(&self, i: usize) -> SocketAddr {
        ports::local(self.ports[2 * i + 1])
    }

    /// `--peers`/`--clients`: `id=address` of every member.
    fn list(&self, addr: &dyn Fn(usize) -> SocketAddr) -> String {
        (0..self.spec.size)
            .map(|i| format!("{}={}", i + 1, addr(i)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The cluster as run.json describes it before its members run: binary and settings.
    fn cluster_info(&self) -> ClusterInfo {
        let (spec, opts) = (self.spec, self.opts);
        // Emulated kinds: the member's own Disk adds the delay, so the sync probe cannot
        // see it.
        let fsync = spec.fsync_label("off");
        let settings = vec![
            ("tick-ms".into(), opts.tick.as_millis().to_string()),
            (
                "heartbeat-interval-ms".into(),
                (opts.tick * opts.heartbeat_ticks).as_millis().to_string(),
            ),
            (
                "election-timeout-ms".into(),
                format!(
                    "{}..{}",
                    (opts.tick * opts.election_ticks_min).as_millis(),
                    opts.election_timeout_max().as_millis()
                ),
            ),
            ("fsync".into(), fsync),
        ];
        ClusterInfo::started(
            self.engine,
            spec,
            self.binary.display().to_string(),
            settings,
            opts.effective_timing(self.engine),
        )
    }

    /// peers[j]: the --peers of member j: its own address, and with a network delay a
    /// proxy route of the link j -> i for every other member i.
    async fn peer_lists(&self, cluster: &mut Cluster) -> Result<Vec<String>, ProvisionError> {
        let size = self.spec.size;
        let mut peers = Vec::with_capacity(size);
        for j in 0..size {
            let mut routed = Vec::with_capacity(size);
            for i in 0..size {
                routed.push(if i == j {
                    self.peer(i)
                } else {
                    cluster
                        .peer_route(
                            format!("m{}->m{}", j + 1, i + 1),
                            self.peer(i),
                            Ends::Link { from: j, to: i },
                        )
                        .await?
                });
            }
            peers.push(self.list(&|i| routed[i]));
        }
        Ok(peers)
    }

    /// Starts member `i` with `peers` and `clients` (its --peers and --clients) and adds it
    /// to `cluster`.
    async fn launch(
        &self,
        cluster: &mut Cluster,
        i: usize,
        peers: &str,
        clients: &str,
        client_url: &impl Fn(&str) -> String,
    ) -> Result<(), ProvisionError> {
        let engine = self.engine;
        let name = format!("m{}", i + 1);
        // A member restores whatever its data directory holds: start from nothing.
        let data_dir =
            disk::member_dir(cluster, &self.root_path, &format!("{engine}-{name}"), None)?;
        let log_file = self
            .spec
            .work_dir
            .join("logs")
            .join(format!("{engine}-{name}.log"));
        let mut args: Vec<String> = vec![
            "serve".into(),
            engine.into(),
            format!("--id={}", i + 1),
            format!("--peers={peers}"),
            format!("--clients={clients}"),
            format!("--data-dir={}", data_dir.display()),
            format!("--disk={}", self.spec.engine_disk_arg()),
        ];
        args.extend(self.opts.timing_args());
        args.extend_from_slice(self.extra_args);
        let launch = Launch {
            program: self.binary.clone(),
            args,
            env_remove: Vec::new(),
            run_as: None,
        };
        let process = launch
            .spawn(&log_file)
            .map_err(|e| ProvisionError::io(format!("starting {engine} member {name}"), e))?;
        let routed_client = cluster
            .client_route(format!("client->{name}"), self.client(i))
            .await?;
        let member = MemberInfo {
            name,
            client_url: client_url(&routed_client.to_string()),
            peer_url: Some(format!("http://{}", self.peer(i))),
            data_dir: Some(data_dir),
            log_file: Some(log_file),
            pid: Some(process.pid()),
        };
        cluster.add_member(member, launch, process);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(range: Option<&str>, heartbeat_ms: Option<u64>) -> Result<RaftOptions, String> {
        let timing = ElectionTiming::new(
            range.map(|r| TimeoutRange::parse(r).unwrap()),
            heartbeat_ms.map(Duration::from_millis),
        )?;
        RaftOptions::default().with_timing(&timing)
    }

    #[test]
    fn the_default_keeps_ten_ms_ticks() {
        let o = mapped(None, None).unwrap();
        assert_eq!(
            o.timing_args(),
            [
                "--tick=10ms",
                "--heartbeat-ticks=10",
                "--election-ticks-min=100",
                "--election-ticks-max=200"
            ]
        );
        let e = o.effective_timing("raft");
        assert_eq!(
            (
                e.election_timeout_min_ms,
                e.election_timeout_max_ms,
                e.heartbeat_ms
            ),
            (1000, 1990, 100)
        );
        assert_eq!(e.note, None);
    }

    #[test]
    fn ranges_map_to_ticks_that_meet_them_exactly() {
        let o = mapped(Some("150-300"), Some(15)).unwrap();
        assert_eq!(
            o.timing_args(),
            [
                "--tick=5ms",
                "--heartbeat-ticks=3",
                "--election-ticks-min=30",
                "--election-ticks-max=61"
            ]
        );
        let e = o.effective_timing("raft");
        assert_eq!(
            (
                e.election_timeout_min_ms,
                e.election_timeout_max_ms,
                e.heartbeat_ms
            ),
            (150, 300, 15)
        );
        assert_eq!(e.note, None);
        let o = mapped(Some("150-155"), None).unwrap();
        assert_eq!(o.tick, Duration::from_millis(5));
        assert_eq!((o.election_ticks_min, o.election_ticks_max), (30, 32));
        let o = mapped(Some("151-300"), Some(15)).unwrap();
        assert_eq!(o.tick, Duration::from_millis(1));
        // zab waits MIN; MAX is its initLimit, which the note explains.
        let z = mapped(Some("150-300"), Some(15))
            .unwrap()
            .effective_timing("zab");
        assert_eq!(
            (z.election_timeout_min_ms, z.election_timeout_max_ms),
            (150, 150)
        );
        assert!(z.note.unwrap().contains("initLimit"));
    }

    #[test]
    fn a_heartbeat_alone_keeps_the_default_range() {
        let o = mapped(None, Some(25)).unwrap();
        let e = o.effective_timing("raft");
        assert_eq!(
            (
                e.election_timeout_min_ms,
                e.election_timeout_max_ms,
                e.heartbeat_ms
            ),
            (1000, 1990, 25)
        );
        assert!(mapped(None, Some(1000)).is_err());
    }
}
