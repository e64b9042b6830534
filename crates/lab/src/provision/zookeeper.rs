//! Starting local ZooKeeper: one standalone server, or an ensemble of N servers on
//! 127.0.0.1, each a JVM running `QuorumPeerMain` on a generated zoo.cfg; ready when every
//! server answers `ruok` and `srvr` shows one leader (or standalone mode).
//!
//! ZooKeeper's timing is in ticks and bounds the session timeouts it accepts, so the tick
//! and the session limits are derived from the run's TTL ([`Timing::for_ttl`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use coordbench_drivers::zookeeper::four_letter::{field, four_letter_word, version};

use super::disk::{self, DiskKind};
use super::executable::find_executable;
use super::process::Launch;
use super::zookeeper_tls::{self, SecureZk};
use super::{ports, Cluster, ClusterInfo, ClusterSpec, MemberInfo, ProvisionError};
use crate::election_timing::{EffectiveTiming, ElectionTiming};
use crate::install::{self, ServerKind};
use crate::netdelay::{Ends, Handshake};
use coordbench_drivers::zookeeper::ZkTls;
use coordbench_results::version::Version;
use coordbench_tls::RunCertificates;

const TARGET: &str = "zookeeper";
/// Debian's server jar; its manifest's Class-Path names the jars it depends on.
const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";
/// An slf4j binding that logs to stderr (Debian's jar lists slf4j-api but no binding, and
/// without one the server logs nothing at all).
const DEBIAN_LOG_BINDING: &str = "/usr/share/java/slf4j-simple.jar";
const MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
const JAR_HINT: &str =
    "run `coordbench install zookeeper 3.9.5`, install Debian's zookeeper package (apt-get install zookeeper) or pass --zk-classpath";
const JAVA_HINT: &str = "install a Java runtime (apt-get install zookeeper pulls one in)";
/// Bound on waiting for a leader: JVMs take seconds to start, elections a few ticks more.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);
/// Variables that would silently change the JVM's options or classpath.
const JVM_ENV: [&str; 4] = [
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
];

#[derive(Debug, Clone)]
pub struct ZkOptions {
    /// The server's classpath (`a.jar:dir/*`); `None`: the installation
    /// [`install::choose`] picks (coordbench's or Debian's).
    pub classpath: Option<String>,
    /// The release to launch (`--server-version`).
    pub version: Option<Version>,
    /// The java binary; `None` means `java` on PATH, else /usr/bin/java.
    pub java: Option<PathBuf>,
    /// JVM heap of each server (-Xms and -Xmx), MiB.
    pub heap_mb: u32,
    /// Require digest authentication from every client (`--secure`): ZooKeeper 3.8's
    /// `enforce.auth.enabled=true` with `enforce.auth.schemes=digest`; a connection that
    /// has not sent addauth is answered SESSION_CLOSED_REQUIRE_AUTH and closed.
    pub enforce_auth: bool,
    /// ZooKeeper's extended node types (`zookeeper.extendedTypesEnabled`): TTL nodes,
    /// which zab always serves; off by default, as in ZooKeeper.
    pub extended_types: bool,
    /// Serve clients over TLS only (`--secure`), see [`zookeeper_tls`].
    pub tls: Option<SecureZk>,
    /// The election timing the run asked for ([`Timing::for_run`] maps it).
    pub election_timing: ElectionTiming,
}

impl Default for ZkOptions {
    fn default() -> Self {
        ZkOptions {
            classpath: None,
            version: None,
            java: None,
            heap_mb: 512,
            enforce_auth: false,
            extended_types: false,
            tls: None,
            election_timing: ElectionTiming::default(),
        }
    }
}

/// ZooKeeper's timing for a session TTL: the TTL is the session timeout clients ask for,
/// and the tick is chosen so that it lies between 2 and 20 ticks (the range ZooKeeper
/// accepts by default) where the tick's bounds allow; the session limits are widened to
/// admit the TTL otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub tick_ms: u64,
    pub session_timeout_ms: u64,
    pub min_session_timeout_ms: u64,
    pub max_session_timeout_ms: u64,
    /// Ticks a follower may take to connect and sync to a new leader.
    pub init_limit: u64,
    /// Ticks a follower may lag before the leader drops it.
    pub sync_limit: u64,
}

impl Timing {
    /// tickTime = TTL/5 clamped to 50 ms..2 s: expiry is checked once per tick, so a short
    /// tick keeps expiry close to the TTL, while below 50 ms the server spends its time on
    /// session bookkeeping.
    pub fn for_ttl(ttl: Duration) -> Timing {
        let ttl_ms = (ttl.as_millis() as u64).max(1);
        let tick_ms = (ttl_ms / 5).clamp(50, 2000);
        Timing {
            tick_ms,
            session_timeout_ms: ttl_ms,
            min_session_timeout_ms: (2 * tick_ms).min(ttl_ms),
            max_session_timeout_ms: (20 * tick_ms).max(ttl_ms),
            // In wall time at least 10 s to sync and 2 s of lag, whatever the tick: a short
            // tick must not turn a JVM pause into a dropped follower.
            init_limit: 10_000u64.div_ceil(tick_ms).max(10),
            sync_limit: 2_000u64.div_ceil(tick_ms).max(5),
        }
    }

    /// The timing for a TTL and an election timing. ZooKeeper's leader pings every
    /// tickTime / 2 and a follower gives up on a silent leader after syncLimit ticks, so
    /// the heartbeat sets tickTime = 2 × heartbeat (a tenth of MIN when only a timeout is
    /// given) and MIN sets syncLimit = MIN / tickTime, rounded, at least 1. There is no
    /// random timeout (Fast Leader Election follows at once), so MAX cannot be met.
    /// initLimit keeps its 10 s in wall time; the session limits follow the new tick as in
    /// [`Timing::for_ttl`].
    pub fn for_run(ttl: Duration, timing: &ElectionTiming) -> Timing {
        let mut t = Timing::for_ttl(ttl);
        if timing.is_default() {
            return t;
        }
        let tick_ms = 2 * u64::from(timing.heartbeat_or((t.tick_ms / 2) as u32));
        let ttl_ms = t.session_timeout_ms;
        t.sync_limit = match timing.timeout {
            Some(range) => (u64::from(range.min_ms) as f64 / tick_ms as f64).round() as u64,
            None => 2_000u64.div_ceil(tick_ms),
        }
        .max(1);
        t.tick_ms = tick_ms;
        t.init_limit = 10_000u64.div_ceil(tick_ms).max(10).max(t.sync_limit);
        t.min_session_timeout_ms = (2 * tick_ms).min(ttl_ms);
        t.max_session_timeout_ms = (20 * tick_ms).max(ttl_ms);
        t
    }

    /// What the servers run with: a follower waits syncLimit ticks for its leader.
    pub fn effective_timing(&self, requested: &ElectionTiming) -> EffectiveTiming {
        let wait = self.sync_limit * self.tick_ms;
        EffectiveTiming {
            election_timeout_min_ms: wait,
            election_timeout_max_ms: wait,
            heartbeat_ms: self.tick_ms / 2,
            settings: format!(
                "tickTime={} syncLimit={} initLimit={}",
                self.tick_ms, self.sync_limit, self.init_limit
            ),
            note: None,
        }
        .noting(requested, || {
            format!(
                "ZooKeeper draws no random timeout: a follower gives up on a silent leader after syncLimit x tickTime = {wait} ms (MIN rounded to ticks; MAX cannot be set) and Fast Leader Election starts at once; the leader pings every tickTime / 2"
            )
        })
    }
}

/// The server classpath: the explicit one (every entry must exist; `dir/*` needs `dir`),
/// else Debian's jar plus its stderr log binding and the Netty jars its TLS listener needs.
pub fn resolve_classpath(explicit: Option<&str>) -> Result<String, ProvisionError> {
    let missing = |entry: &str| ProvisionError::BinaryNotFound {
        binary: format!("ZooKeeper classpath entry {entry}"),
        hint: JAR_HINT.to_string(),
    };
    match explicit {
        Some(classpath) => {
            let entries: Vec<&str> = classpath.split(':').filter(|e| !e.is_empty()).collect();
            if entries.is_empty() {
                return Err(missing("(empty --zk-classpath)"));
            }
            for entry in &entries {
                let path = Path::new(entry.strip_suffix("/*").unwrap_or(entry));
                if !path.exists() {
                    return Err(missing(entry));
                }
            }
            Ok(entries.join(":"))
        }
        None => {
            if !Path::new(DEBIAN_JAR).is_file() {
                return Err(ProvisionError::BinaryNotFound {
                    binary: format!("ZooKeeper jar {DEBIAN_JAR}"),
                    hint: JAR_HINT.to_string(),
                });
            }
            let mut classpath = DEBIAN_JAR.to_string();
            let extras =
                std::iter::once(DEBIAN_LOG_BINDING).chain(zookeeper_tls::DEBIAN_NETTY_JARS);
            for jar in extras.filter(|jar| Path::new(jar).is_file()) {
                classpath.push(':');
                classpath.push_str(jar);
            }
            Ok(classpath)
        }
    }
}

/// The classpath a run launches and where it came from (one line for run.json):
/// `--zk-classpath` when given, else the installation chosen for the version (or the
/// newest installed; Debian's classpath is assembled by [`resolve_classpath`]).
pub fn resolve_server(
    explicit: Option<&str>,
    version: Option<&Version>,
) -> Result<(String, String), ProvisionError> {
    if explicit.is_some() {
        let classpath = resolve_classpath(explicit)?;
        let source = format!("--zk-classpath {classpath}");
        return Ok((classpath, source));
    }
    match install::choose(ServerKind::Zookeeper, version) {
        Ok(Some(installation)) => {
            let classpath = match installation.zookeeper_classpath() {
                Some(classpath) => classpath,
                None => resolve_classpath(None)?,
            };
            Ok((classpath, installation.source()))
        }
        Ok(None) => resolve_classpath(None).map(|cp| (cp, "ZooKeeper jar".into())),
        Err(e) => Err(ProvisionError::Unsupported(e.to_string())),
    }
}

/// Finds java: an explicit path, else `java` on PATH, else /usr/bin/java.
pub fn resolve_java(explicit: Option<&Path>) -> Result<PathBuf, ProvisionError> {
    find_executable(explicit, "java", "/usr/bin/java").map_err(|tried| {
        ProvisionError::BinaryNotFound {
            binary: format!("java binary {}", tried.display()),
            hint: JAVA_HINT.to_string(),
        }
    })
}

/// Starts `spec.size` ZooKeeper servers (1 = standalone) and waits until they serve with one
/// leader.
///
/// Call from a tokio worker or the main thread (not `spawn_blocking`): servers die with the
/// thread that spawned them, see [`super::process`]. On any error everything started so far
/// is stopped before returning.
pub async fn start(spec: &ClusterSpec, opts: &ZkOptions) -> Result<Cluster, ProvisionError> {
    spec.refuse_auto_compaction(TARGET)?;
    if spec.size == 0 {
        return Err(ProvisionError::Unsupported(
            "a ZooKeeper cluster needs at least 1 server".into(),
        ));
    }
    if opts.heap_mb < 64 {
        return Err(ProvisionError::Unsupported(format!(
            "a ZooKeeper server needs at least 64 MiB of heap (got {} MiB)",
            opts.heap_mb
        )));
    }
    let java = resolve_java(opts.java.as_deref())?;
    let (classpath, source) = resolve_server(opts.classpath.as_deref(), opts.version.as_ref())?;
    let ports = ports::allocate(spec.base_port, 3 * spec.size)?;
    let root = disk::create_data_root(spec, TARGET)?;
    let key_store = match &opts.tls {
        Some(secure) => Some(zookeeper_tls::write_key_store(&secure.certs)?),
        None => None,
    };
    let ensemble = Ensemble {
        spec,
        opts,
        java,
        classpath,
        timing: Timing::for_run(spec.ttl, &opts.election_timing),
        ports,
        root_path: root.path.clone(),
        secure_port: key_store
            .as_deref()
            .zip(opts.tls.as_ref().map(|s| &s.certs)),
    };
    let mut info = ensemble.cluster_info();
    info.source = Some(source);
    // From here on, returning early drops `cluster`, which stops the servers started so far
    // and removes the data root.
    let mut cluster = Cluster::provisioned(info, Some(root), spec);
    let server_lines = ensemble.server_lines(&mut cluster).await?;
    for (i, lines) in server_lines.iter().enumerate() {
        ensemble.launch(&mut cluster, i, lines).await?;
    }

    let admin_tls = opts.tls.as_ref().map(|s| &s.client);
    let server_version = wait_ready(&mut cluster, admin_tls).await?;
    cluster.info_mut().version = Some(server_version);
    Ok(cluster)
}

/// What every server of one start shares: the JVM, the timing, the ports and the data root.
struct Ensemble<'a> {
    spec: &'a ClusterSpec,
    opts: &'a ZkOptions,
    java: PathBuf,
    classpath: String,
    timing: Timing,
    /// Server i listens for clients on ports[3i], for followers on ports[3i+1] and for
    /// election on ports[3i+2] (a standalone server uses only the first).
    ports: Vec<u16>,
    root_path: PathBuf,
    /// The key store and certificates of a TLS-only client port (`--secure`).
    secure_port: Option<(&'a Path, &'a RunCertificates)>,
}

impl Ensemble<'_> {
    /// Ports of server `i` (0-based): client, quorum, election.
    fn server_ports(&self, i: usize) -> (u16, u16, u16) {
        (
            self.ports[3 * i],
            self.ports[3 * i + 1],
            self.ports[3 * i + 2],
        )
    }

    /// zoo.cfg's forceSync: ZooKeeper skips syncs itself for nofsync.
    fn force_sync(&self) -> &'static str {
        if self.spec.disk == DiskKind::Nofsync {
            "no"
        } else {
            "yes"
        }
    }

    /// The ensemble as run.json describes it before its servers run: JVM and settings.
    fn cluster_info(&self) -> ClusterInfo {
        let (timing, opts) = (&self.timing, self.opts);
        let mut settings = vec![
            ("tickTime-ms".into(), timing.tick_ms.to_string()),
            (
                "session-timeout-ms".into(),
                timing.session_timeout_ms.to_string(),
            ),
            (
                "minSessionTimeout-ms".into(),
                timing.min_session_timeout_ms.to_string(),
            ),
            (
                "maxSessionTimeout-ms".into(),
                timing.max_session_timeout_ms.to_string(),
            ),
            ("initLimit-ticks".into(), timing.init_limit.to_string()),
            ("syncLimit-ticks".into(), timing.sync_limit.to_string()),
            ("forceSync".into(), self.force_sync().into()),
            ("fsync".into(), self.spec.fsync_label("off (forceSync=no)")),
            ("heap-mb".into(), opts.heap_mb.to_string()),
            (
                "snapCount".into(),
                self.spec
                    .snapshot_every
                    .map_or("100000 (default)".into(), |n| n.to_string()),
            ),
        ];
        if opts.enforce_auth {
            settings.push(("enforce.auth.schemes".into(), "digest".into()));
        }
        if opts.tls.is_some() {
            settings.push((
                "client-transport".into(),
                "TLS only (secureClientPort, Netty), client certificates required (CA generated per run); quorum and election plain TCP on 127.0.0.1".into(),
            ));
        }
        ClusterInfo::started(
            TARGET,
            self.spec,
            format!("{} -cp {}", self.java.display(), self.classpath),
            settings,
            timing.effective_timing(&opts.election_timing),
        )
    }

    /// server_lines[j]: the server.N lines of server j's zoo.cfg (none when standalone). Its
    /// own line is where it listens; with a network delay every other line points at a
    /// proxy route of the link j -> i (each server has its own zoo.cfg, so every link gets
    /// its own route). Election routes adapt the handshake, which names the dialer's own
    /// address for dialing back.
    async fn server_lines(
        &self,
        cluster: &mut Cluster,
    ) -> Result<Vec<Vec<String>>, ProvisionError> {
        let size = self.spec.size;
        let mut server_lines: Vec<Vec<String>> = vec![Vec::new(); size];
        if size == 1 {
            return Ok(server_lines);
        }
        for (j, lines) in server_lines.iter_mut().enumerate() {
            for i in 0..size {
                let (_, quorum, election) = self.server_ports(i);
                let (quorum, election) = if i == j {
                    (ports::local(quorum), ports::local(election))
                } else {
                    let link = format!("zk{}->zk{}", j + 1, i + 1);
                    let ends = Ends::Link { from: j, to: i };
                    (
                        cluster
                            .peer_route(format!("{link}:quorum"), ports::local(quorum), ends)
                            .await?,
                        cluster
                            .peer_route_with(
                                format!("{link}:election"),
                                ports::local(election),
                                ends,
                                Handshake::ZooKeeperElection,
                            )
                            .await?,
                    )
                };
                lines.push(format!("server.{}={quorum}:{}", i + 1, election.port()));
            }
        }
        Ok(server_lines)
    }

    /// Starts server `i` with `server_lines` in its zoo.cfg and adds it to `cluster`.
    async fn launch(
        &self,
        cluster: &mut Cluster,
        i: usize,
        server_lines: &[String],
    ) -> Result<(), ProvisionError> {
        let id = i + 1;
        let name = format!("zk{id}");
        let (client_port, quorum, election) = self.server_ports(i);
        // Fresh: an old data dir would bring back an old ensemble's state. ZooKeeper skips
        // syncs itself with forceSync=no; emulated kinds mount the delay.
        let member_dir = disk::member_dir(
            cluster,
            &self.root_path,
            &format!("zookeeper-{name}"),
            self.spec.sync_policy(true),
        )?;
        let config_file = self.write_config(id, &member_dir, client_port, server_lines)?;
        let log_file = self.spec.work_dir.join("logs").join(format!("zk-{id}.log"));
        let launch = Launch {
            program: self.java.clone(),
            args: jvm_args(self.opts.heap_mb, &self.classpath, &config_file),
            env_remove: JVM_ENV.iter().map(|k| k.to_string()).collect(),
            run_as: None,
        };
        let process = launch.spawn(&log_file).map_err(|e| {
            ProvisionError::spawn(
                e,
                format!("java binary {}", self.java.display()),
                JAVA_HINT,
                format!("starting ZooKeeper server {name}"),
            )
        })?;
        let client = cluster
            .client_route(format!("client->{name}"), ports::local(client_port))
            .await?;
        let member = MemberInfo {
            name,
            client_url: client.to_string(),
            peer_url: (self.spec.size > 1).then(|| format!("127.0.0.1:{quorum}:{election}")),
            data_dir: Some(member_dir),
            log_file: Some(log_file),
            pid: Some(process.pid()),
        };
        cluster.add_member(member, launch, process);
        Ok(())
    }

    /// Writes server `id`'s myid and zoo.cfg under `member_dir`; returns the zoo.cfg.
    fn write_config(
        &self,
        id: usize,
        member_dir: &Path,
        client_port: u16,
        server_lines: &[String],
    ) -> Result<PathBuf, ProvisionError> {
        let data_dir = member_dir.join("data");
        let log_dir = member_dir.join("datalog");
        for dir in [&data_dir, &log_dir] {
            std::fs::create_dir_all(dir)
                .map_err(|e| ProvisionError::io(format!("creating {}", dir.display()), e))?;
        }
        let write = |path: PathBuf, text: String| {
            std::fs::write(&path, text)
                .map_err(|e| ProvisionError::io(format!("writing {}", path.display()), e))
        };
        write(data_dir.join("myid"), format!("{id}\n"))?;
        let config_file = member_dir.join("zoo.cfg");
        let mut cfg = zoo_cfg(
            &self.timing,
            &data_dir,
            &log_dir,
            &zookeeper_tls::client_port_cfg(client_port, self.secure_port),
            self.force_sync(),
            server_lines,
            self.opts,
        );
        if let Some(every) = self.spec.snapshot_every {
            // ZooKeeper snapshots after a random count in [snapCount/2, snapCount].
            cfg.push_str(&format!("snapCount={every}\n"));
        }
        write(config_file.clone(), cfg)?;
        Ok(config_file)
    }
}

/// One server's zoo.cfg; `client_port_lines` from [`zookeeper_tls::client_port_cfg`].
fn zoo_cfg(
    timing: &Timing,
    data_dir: &Path,
    log_dir: &Path,
    client_port_lines: &str,
    force_sync: &str,
    server_lines: &[String],
    opts: &ZkOptions,
) -> String {
    let mut cfg = format!(
        "# Generated by coordbench for one run (timing derived from the run's TTL and election timing).\n\
         tickTime={}\ninitLimit={}\nsyncLimit={}\n\
         minSessionTimeout={}\nmaxSessionTimeout={}\n\
         dataDir={}\ndataLogDir={}\n{}\
         # One connection per client, all from 127.0.0.1: no per-address limit.\n\
         maxClientCnxns=0\n\
         forceSync={force_sync}\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=ruok,srvr,mntr,stat,conf,envi\n\
         autopurge.purgeInterval=0\n",
        timing.tick_ms,
        timing.init_limit,
        timing.sync_limit,
        timing.min_session_timeout_ms,
        timing.max_session_timeout_ms,
        data_dir.display(),
        log_dir.display(),
        client_port_lines,
    );
    if opts.enforce_auth {
        cfg.push_str("enforce.auth.enabled=true\nenforce.auth.schemes=digest\n");
    }
    // zoo.cfg keys ZooKeeper does not know become `zookeeper.<key>` system properties.
    if opts.extended_types {
        cfg.push_str("extendedTypesEnabled=true\n");
    }
    for line in server_lines {
        cfg.push_str(line);
        cfg.push('\n');
    }
    cfg
}

fn jvm_args(heap_mb: u32, classpath: &str, config_file: &Path) -> Vec<String> {
    vec![
        format!("-Xms{heap_mb}m"),
        format!("-Xmx{heap_mb}m"),
        // A server out of memory exits (and is reported) instead of limping on.
        "-XX:+ExitOnOutOfMemoryError".into(),
        "-Djava.net.preferIPv4Stack=true".into(),
        "-Dorg.slf4j.simpleLogger.showDateTime=true".into(),
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS".into(),
        "-cp".into(),
        classpath.to_string(),
        MAIN_CLASS.into(),
        config_file.display().to_string(),
    ]
}

/// Polls every server with `ruok` and `srvr` until all serve, with exactly one leader and
/// the rest followers (or one standalone server); fails at once if a server exits. Returns
/// the server version.
pub(super) async fn wait_ready(
    cluster: &mut Cluster,
    tls: Option<&ZkTls>,
) -> Result<String, ProvisionError> {
    let started = Instant::now();
    let endpoints = cluster.endpoints();
    let names = cluster.member_names();
    let mut detail;
    loop {
        cluster.check_alive()?;
        let mut modes = Vec::with_capacity(endpoints.len());
        let mut reported = String::new();
        detail = String::new();
        for (addr, name) in endpoints.iter().zip(&names) {
            match four_letter_word(addr, "ruok", tls).await {
                Ok(reply) if reply.trim() == "imok" => {}
                Ok(reply) => {
                    detail = format!(
                        "server {name} at {addr} answered ruok with {:?}",
                        reply.trim()
                    );
                    continue;
                }
                Err(e) => {
                    detail = format!("server {name} at {addr}: {e}");
                    continue;
                }
            }
            match four_letter_word(addr, "srvr", tls).await {
                Ok(reply) => match field(&reply, "Mode") {
                    Some(mode) => {
                        modes.push(mode.to_string());
                        reported = version(&reply).unwrap_or_default();
                    }
                    None => detail = format!("server {name} at {addr} is not serving yet"),
                },
                Err(e) => detail = format!("server {name} at {addr}: {e}"),
            }
        }
        if modes.len() == endpoints.len() {
            let leaders = modes.iter().filter(|m| *m == "leader").count();
            let followers = modes.iter().filter(|m| *m == "follower").count();
            let ready = if endpoints.len() == 1 {
                modes[0] == "standalone"
            } else {
                leaders == 1 && followers == endpoints.len() - 1
            };
            if ready {
                return Ok(reported);
            }
            detail =
                format!("servers report modes {modes:?}; want one leader and the rest followers");
        }
        if started.elapsed() >= READY_TIMEOUT {
            return Err(ProvisionError::NotReady {
                target: TARGET.to_string(),
                waited: READY_TIMEOUT,
                detail: format!("{detail}; server logs are in the work directory's logs/"),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_lies_within_2_to_20_ticks_where_the_tick_bounds_allow() {
        for ttl_ms in [500u64, 1000, 2000, 5000, 10_000] {
            let t = Timing::for_ttl(Duration::from_millis(ttl_ms));
            assert!(
                ttl_ms >= 2 * t.tick_ms && ttl_ms <= 20 * t.tick_ms,
                "{ttl_ms}: {t:?}"
            );
            assert_eq!(t.session_timeout_ms, ttl_ms);
        }
        assert_eq!(Timing::for_ttl(Duration::from_secs(10)).tick_ms, 2000);
        assert_eq!(Timing::for_ttl(Duration::from_secs(2)).tick_ms, 400);
    }

    #[test]
    fn extreme_ttls_widen_the_session_limits_instead() {
        let short = Timing::for_ttl(Duration::from_millis(60));
        assert_eq!(short.tick_ms, 50);
        assert!(short.min_session_timeout_ms <= 60);
        let long = Timing::for_ttl(Duration::from_secs(120));
        assert_eq!(long.tick_ms, 2000);
        assert!(long.max_session_timeout_ms >= 120_000);
        for t in [short, long] {
            assert!(
                t.init_limit * t.tick_ms >= 10_000 && t.sync_limit * t.tick_ms >= 2_000,
                "{t:?}"
            );
        }
    }

    fn timing(range: Option<&str>, heartbeat_ms: Option<u64>) -> ElectionTiming {
        ElectionTiming::new(
            range.map(|r| coordbench_results::timeout_range::TimeoutRange::parse(r).unwrap()),
            heartbeat_ms.map(Duration::from_millis),
        )
        .unwrap()
    }

    #[test]
    fn election_timing_sets_tick_time_and_sync_limit_in_zoo_cfg() {
        let ttl = Duration::from_secs(10);
        assert_eq!(
            Timing::for_run(ttl, &ElectionTiming::default()),
            Timing::for_ttl(ttl)
        );
        let t = Timing::for_run(ttl, &timing(Some("150-300"), Some(15)));
        assert_eq!((t.tick_ms, t.sync_limit, t.init_limit), (30, 5, 334));
        assert_eq!(
            (t.min_session_timeout_ms, t.max_session_timeout_ms),
            (60, 10_000)
        );
        let cfg = zoo_cfg(
            &t,
            Path::new("/d"),
            Path::new("/l"),
            &zookeeper_tls::client_port_cfg(2181, None),
            "yes",
            &[],
            &ZkOptions::default(),
        );
        for line in ["tickTime=30\n", "syncLimit=5\n", "initLimit=334\n"] {
            assert!(cfg.contains(line), "{line} in {cfg}");
        }
        let e = t.effective_timing(&timing(Some("150-300"), Some(15)));
        assert_eq!(
            (
                e.election_timeout_min_ms,
                e.election_timeout_max_ms,
                e.heartbeat_ms
            ),
            (150, 150, 15)
        );
        assert!(e.note.unwrap().contains("MAX cannot be set"));
        // MIN alone: heartbeat MIN / 10, so tickTime MIN / 5 and syncLimit 5.
        let t = Timing::for_run(ttl, &timing(Some("1000-2000"), None));
        assert_eq!((t.tick_ms, t.sync_limit), (200, 5));
        // A heartbeat alone keeps syncLimit at about 2 s.
        let t = Timing::for_run(ttl, &timing(None, Some(100)));
        assert_eq!((t.tick_ms, t.sync_limit), (200, 10));
        assert_eq!(t.effective_timing(&timing(None, Some(100))).note, None);
    }

    #[test]
    fn an_explicit_classpath_with_a_missing_entry_is_refused() {
        let err =
            resolve_classpath(Some("/nonexistent/zookeeper.jar:/nonexistent/lib/*")).unwrap_err();
        assert!(
            matches!(err, ProvisionError::BinaryNotFound { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("--zk-classpath"), "{err}");
    }
}
