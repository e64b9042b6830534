//! Starting a local etcd cluster: members m1..mN on 127.0.0.1, ready when every member
//! answers Status and all agree on a leader. Secured (`--secure`): clients are served over
//! TLS only and must present a certificate signed by the run's CA, and auth is enabled
//! once the cluster is ready (`etcd_auth`); peer traffic stays plain HTTP on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use coordbench_drivers::etcd::{connect_client, EtcdSecurity, EtcdUser};
use coordbench_tls::rustls::ClientConfig;
use coordbench_tls::RunCertificates;
use etcd_client::Client;

use super::disk::{self, DiskKind};
use super::executable::find_executable;
use super::process::Launch;
use super::{ports, Cluster, ClusterInfo, ClusterSpec, MemberInfo, ProvisionError};
use crate::election_timing::{EffectiveTiming, ElectionTiming};
use crate::install::{self, ServerKind};
use crate::netdelay::Ends;
use coordbench_results::version::Version;

const TARGET: &str = "etcd";
const INSTALL_HINT: &str =
    "run `coordbench install etcd 3.6.16`, install Debian's etcd-server package (apt-get install etcd-server) or pass --etcd-bin PATH";
/// Bound on waiting for a leader; a healthy local cluster elects one in a few seconds.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);
/// Per-request bound while polling, so a member that accepts but never answers cannot
/// stall the wait past `READY_TIMEOUT`.
const STATUS_TIMEOUT: Duration = Duration::from_secs(1);
/// `etcd --help` should print instantly; bound it in case the binary is something else.
const HELP_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// The etcd server binary; `None`: the installation [`install::choose`] picks.
    pub binary: Option<PathBuf>,
    /// The release to launch (`--server-version`), from coordbench's installs or Debian's.
    pub version: Option<Version>,
    /// `--heartbeat-interval`: also etcd's Raft tick.
    pub heartbeat_ms: u64,
    /// `--election-timeout`: T of etcd's random timeout in [T, 2T).
    pub election_ms: u64,
    /// The election timing the run asked for (what [`EtcdOptions::with_timing`] mapped).
    pub requested: ElectionTiming,
    /// Start it secured (`--secure`); `None`: plain HTTP for clients, no auth.
    pub secure: Option<SecureEtcd>,
}

/// A secured cluster: the run's certificates, TLS as its clients use it, and the user the
/// run's clients authenticate as (created with a role granting readwrite on every key).
#[derive(Debug, Clone)]
pub struct SecureEtcd {
    pub certs: RunCertificates,
    pub tls: Arc<ClientConfig>,
    pub user: EtcdUser,
    /// etcd's `--auth-token-ttl`: a simple token is dropped this long after its last use
    /// (`None`: etcd's default, 300 s); clients then re-authenticate.
    pub token_ttl: Option<Duration>,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            binary: None,
            version: None,
            heartbeat_ms: 100,
            election_ms: 1000,
            requested: ElectionTiming::default(),
            secure: None,
        }
    }
}

/// etcd's largest `--election-timeout`, ms.
const MAX_ELECTION_MS: u64 = 50_000;

impl EtcdOptions {
    /// etcd's flags for `timing`: `--heartbeat-interval` is the heartbeat (a tenth of MIN
    /// when only a timeout is given) and `--election-timeout` is MIN. etcd then waits a
    /// random whole number of heartbeat ticks in [T, 2T), T = MIN in whole heartbeats, so
    /// MAX cannot be set: it is 2T less one tick. Errors are one line (etcd refuses a
    /// timeout under 5 heartbeats or over 50 s).
    pub fn with_timing(mut self, timing: &ElectionTiming) -> Result<Self, String> {
        self.requested = *timing;
        if timing.is_default() {
            return Ok(self);
        }
        self.heartbeat_ms = u64::from(timing.heartbeat_or(self.heartbeat_ms as u32));
        self.election_ms = timing
            .timeout
            .map_or(self.election_ms, |t| u64::from(t.min_ms));
        if self.election_ms < 5 * self.heartbeat_ms {
            return Err(format!(
                "etcd needs an election timeout of at least 5 heartbeats: MIN {} ms with --heartbeat {} ms (etcd refuses to start); lengthen MIN or shorten --heartbeat",
                self.election_ms, self.heartbeat_ms
            ));
        }
        if self.election_ms > MAX_ELECTION_MS {
            return Err(format!(
                "etcd takes an election timeout of at most {MAX_ELECTION_MS} ms (got MIN {} ms)",
                self.election_ms
            ));
        }
        Ok(self)
    }

    /// The flags that set etcd's election timing.
    pub fn timing_args(&self) -> [String; 2] {
        [
            format!("--heartbeat-interval={}", self.heartbeat_ms),
            format!("--election-timeout={}", self.election_ms),
        ]
    }

    /// What etcd runs with: T = `--election-timeout` in whole heartbeat ticks, a timeout
    /// from T to 2T − 1 ticks.
    pub fn effective_timing(&self) -> EffectiveTiming {
        let hb = self.heartbeat_ms.max(1);
        let ticks = self.election_ms / hb;
        let effective = EffectiveTiming {
            election_timeout_min_ms: ticks * hb,
            election_timeout_max_ms: (2 * ticks).saturating_sub(1) * hb,
            heartbeat_ms: hb,
            settings: self.timing_args().join(" "),
            note: None,
        };
        let (min, max) = (
            effective.election_timeout_min_ms,
            effective.election_timeout_max_ms,
        );
        effective.noting(&self.requested, || {
            format!(
                "etcd draws its timeout from [T, 2T) in heartbeat ticks with T = --election-timeout: only MIN can be set (rounded down to whole heartbeats); it runs {min}-{max} ms"
            )
        })
    }
}

/// Finds the etcd binary: an explicit path must be an executable file (a bare name is
/// looked up on PATH); with none, `etcd` on PATH, else /usr/bin/etcd.
pub fn resolve_binary(explicit: Option<&Path>) -> Result<PathBuf, ProvisionError> {
    find_executable(explicit, "etcd", "/usr/bin/etcd").map_err(|tried| {
        ProvisionError::BinaryNotFound {
            binary: format!("etcd binary {}", tried.display()),
            hint: INSTALL_HINT.to_string(),
        }
    })
}

/// The etcd a run launches and where it came from (one line for run.json): `--etcd-bin`
/// when given, else the installation chosen for the version (or the newest installed).
pub fn resolve_server(
    explicit: Option<&Path>,
    version: Option<&Version>,
) -> Result<(PathBuf, String), ProvisionError> {
    if explicit.is_some() {
        let binary = resolve_binary(explicit)?;
        let source = format!("--etcd-bin {}", binary.display());
        return Ok((binary, source));
    }
    match install::choose(ServerKind::Etcd, version) {
        Ok(Some(installation)) => Ok((installation.etcd_binary(), installation.source())),
        Ok(None) => Err(ProvisionError::BinaryNotFound {
            binary: "etcd (none installed)".into(),
            hint: INSTALL_HINT.to_string(),
        }),
        Err(e) => Err(ProvisionError::Unsupported(e.to_string())),
    }
}

/// Flags of the installed etcd that change how it is launched, read from `etcd --help`
/// (flag sets differ across 3.4/3.5/3.6 and there is no machine-readable list).
#[derive(Debug, Clone, Copy)]
struct Capabilities {
    no_fsync: bool,
    logger: bool,
}

async fn capabilities(binary: &Path) -> Result<Capabilities, ProvisionError> {
    let out = tokio::process::Command::new(binary)
        .arg("--help")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(HELP_TIMEOUT, out).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProvisionError::BinaryNotFound {
                binary: format!("etcd binary {}", binary.display()),
                hint: INSTALL_HINT.to_string(),
            })
        }
        Ok(Err(e)) => return Err(ProvisionError::io(format!("running {} --help", binary.display()), e)),
        Err(_) => {
            return Err(ProvisionError::Unsupported(format!(
                "{} --help did not finish within {}s; is it an etcd server binary? pass --etcd-bin PATH",
                binary.display(),
                HELP_TIMEOUT.as_secs()
            )))
        }
    };
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    if !text.contains("--initial-cluster") {
        return Err(ProvisionError::Unsupported(format!(
            "{} does not look like an etcd server (its --help lacks --initial-cluster); pass --etcd-bin PATH",
            binary.display()
        )));
    }
    Ok(Capabilities {
        no_fsync: text.contains("--unsafe-no-fsync"),
        logger: text.contains("--logger"),
    })
}

/// Starts an etcd cluster of `spec.size` members and waits until it has a leader.
///
/// Call from a tokio worker or the main thread (not `spawn_blocking`): members die with
/// the thread that spawned them, see [`super::process`]. On any error everything started
/// so far is stopped before returning.
pub async fn start(spec: &ClusterSpec, opts: &EtcdOptions) -> Result<Cluster, ProvisionError> {
    if spec.size == 0 {
        return Err(ProvisionError::Unsupported(
            "an etcd cluster needs at least 1 member".into(),
        ));
    }
    if opts.heartbeat_ms == 0 || opts.election_ms < 5 * opts.heartbeat_ms {
        return Err(ProvisionError::Unsupported(format!(
            "etcd needs a non-zero heartbeat and an election timeout at least 5x the heartbeat (got {} ms and {} ms)",
            opts.heartbeat_ms, opts.election_ms
        )));
    }
    let (binary, source) = resolve_server(opts.binary.as_deref(), opts.version.as_ref())?;
    let caps = capabilities(&binary).await?;

    // Member i listens for clients on ports[2i] and for peers on ports[2i+1].
    let ports = ports::allocate(spec.base_port, 2 * spec.size)?;
    let root = disk::create_data_root(spec, TARGET)?;
    let root_path = root.path.clone();
    let mut info = cluster_info(spec, opts, caps, &binary);
    info.source = Some(source);
    // From here on, returning early drops `cluster`, which stops the members started so far
    // and removes a tmpfs data root.
    let mut cluster = Cluster::provisioned(info, Some(root), spec);
    let urls = Urls::route(&mut cluster, &ports, opts.secure.is_some()).await?;
    let members = Members {
        spec,
        opts,
        caps,
        binary,
        root_path,
        urls,
        token: cluster_token(),
        // ETCD_* variables in the user's environment would silently override our flags' intent.
        env_remove: std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| k.starts_with("ETCD_"))
            .collect(),
    };
    for i in 0..spec.size {
        members.launch(&mut cluster, i)?;
    }

    // Before auth is enabled, members answer Status over TLS to anyone with a client
    // certificate; then the run's user is set up.
    let security = EtcdSecurity {
        tls: opts.secure.as_ref().map(|s| s.tls.clone()),
        user: opts.secure.as_ref().map(|s| s.user.clone()),
    };
    let version = super::etcd_auth::ready_and_secured(&mut cluster, TARGET, &security).await?;
    cluster.info_mut().version = Some(version);
    Ok(cluster)
}

/// A token unique to this start, which keeps members from joining a stale cluster's peers.
fn cluster_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("coordbench-{}-{nanos}", std::process::id())
}

/// Where each member listens and what it advertises, by member index.
struct Urls {
    listen_client: Vec<String>,
    listen_peer: Vec<String>,
    client: Vec<String>,
    peer: Vec<String>,
    /// `--initial-cluster`: every member's name and advertised peer URL.
    initial_cluster: String,
}

impl Urls {
    /// The URLs of members listening on `ports` (member i: clients on ports[2i], peers on
    /// ports[2i+1]), advertised through `cluster`'s routes. With a network delay every
    /// member reaches member i through one proxy route: etcd derives member ids from the
    /// advertised peer URLs, so all must agree on them, which rules out a route per
    /// (from, to) link. The proxy tells the dialers apart by the process holding each
    /// connection's other end (`netdelay::MemberPids`).
    async fn route(
        cluster: &mut Cluster,
        ports: &[u16],
        secure: bool,
    ) -> Result<Urls, ProvisionError> {
        let client_scheme = if secure { "https" } else { "http" };
        let size = ports.len() / 2;
        let mut urls = Urls {
            listen_client: Vec::with_capacity(size),
            listen_peer: Vec::with_capacity(size),
            client: Vec::with_capacity(size),
            peer: Vec::with_capacity(size),
            initial_cluster: String::new(),
        };
        for i in 0..size {
            let (client_port, peer_port) = (ports[2 * i], ports[2 * i + 1]);
            let peer = cluster
                .peer_route(
                    format!("->m{}", i + 1),
                    ports::local(peer_port),
                    Ends::AnyTo(i),
                )
                .await?;
            let client = cluster
                .client_route(format!("client->m{}", i + 1), ports::local(client_port))
                .await?;
            urls.listen_client
                .push(format!("{client_scheme}://127.0.0.1:{client_port}"));
            urls.listen_peer
                .push(format!("http://127.0.0.1:{peer_port}"));
            urls.peer.push(format!("http://{peer}"));
            urls.client.push(format!("{client_scheme}://{client}"));
        }
        urls.initial_cluster = (0..size)
            .map(|i| format!("m{}={}", i + 1, urls.peer[i]))
            .collect::<Vec<_>>()
            .join(",");
        Ok(urls)
    }
}

/// What every member of one start shares: the binary and its flags, the URLs, the token.
struct Members<'a> {
    spec: &'a ClusterSpec,
    opts: &'a EtcdOptions,
    caps: Capabilities,
    binary: PathBuf,
    root_path: PathBuf,
    urls: Urls,
    token: String,
    env_remove: Vec<String>,
}

impl Members<'_> {
    /// Starts member `i` and adds it to `cluster`.
    fn launch(&self, cluster: &mut Cluster, i: usize) -> Result<(), ProvisionError> {
        let name = format!("m{}", i + 1);
        // Fresh: `--initial-cluster-state new` on an old data dir would resume the old
        // cluster. etcd 3.4 has no --unsafe-no-fsync: its nofsync runs on no-op syncs of
        // the sync-delay filesystem instead, as do the emulated kinds with their delay.
        let data_dir = disk::member_dir(
            cluster,
            &self.root_path,
            &format!("etcd-{name}"),
            self.spec.sync_policy(self.caps.no_fsync),
        )?;
        let log_file = self
            .spec
            .work_dir
            .join("logs")
            .join(format!("etcd-{name}.log"));
        let launch = Launch {
            program: self.binary.clone(),
            args: self.args(i, &name, &data_dir),
            env_remove: self.env_remove.clone(),
            run_as: None,
        };
        let process = launch.spawn(&log_file).map_err(|e| {
            ProvisionError::spawn(
                e,
                format!("etcd binary {}", self.binary.display()),
                INSTALL_HINT,
                format!("starting etcd member {name}"),
            )
        })?;
        let member = MemberInfo {
            name,
            client_url: self.urls.client[i].clone(),
            peer_url: Some(self.urls.peer[i].clone()),
            data_dir: Some(data_dir),
            log_file: Some(log_file),
            pid: Some(process.pid()),
        };
        cluster.add_member(member, launch, process);
        Ok(())
    }

    /// Member `i`'s command line.
    fn args(&self, i: usize, name: &str, data_dir: &Path) -> Vec<String> {
        let (urls, opts) = (&self.urls, self.opts);
        let mut args: Vec<String> = vec![
            format!("--name={name}"),
            format!("--data-dir={}", data_dir.display()),
            format!("--listen-client-urls={}", urls.listen_client[i]),
            format!("--advertise-client-urls={}", urls.client[i]),
            format!("--listen-peer-urls={}", urls.listen_peer[i]),
            format!("--initial-advertise-peer-urls={}", urls.peer[i]),
            format!("--initial-cluster={}", urls.initial_cluster),
            format!("--initial-cluster-token={}", self.token),
            "--initial-cluster-state=new".into(),
        ];
        args.extend(opts.timing_args());
        if self.caps.logger {
            // 3.4 defaults to the deprecated capnslog; zap gives one JSON line per event.
            args.push("--logger=zap".into());
            args.push("--log-outputs=stderr".into());
        }
        if self.spec.disk == DiskKind::Nofsync && self.caps.no_fsync {
            args.push("--unsafe-no-fsync".into());
        }
        if let Some(every) = self.spec.snapshot_every {
            args.push(format!("--snapshot-count={every}"));
        }
        args.extend(self.spec.auto_compaction_args().0);
        if let Some(secure) = &opts.secure {
            args.extend(client_tls_args(&secure.certs));
            if let Some(ttl) = secure.token_ttl {
                args.push(format!("--auth-token-ttl={}", ttl.as_secs().max(1)));
            }
        }
        args
    }
}

/// The cluster as run.json describes it before its members run: binary and settings.
fn cluster_info(
    spec: &ClusterSpec,
    opts: &EtcdOptions,
    caps: Capabilities,
    binary: &Path,
) -> ClusterInfo {
    let fsync = spec.fsync_label(if caps.no_fsync {
        "off (--unsafe-no-fsync)"
    } else {
        "off (sync-delay filesystem: syncs acknowledged, not done)"
    });
    let mut settings = vec![
        (
            "heartbeat-interval-ms".into(),
            opts.heartbeat_ms.to_string(),
        ),
        ("election-timeout-ms".into(), opts.election_ms.to_string()),
        ("fsync".into(), fsync),
    ];
    if let Some(every) = spec.snapshot_every {
        settings.push(("snapshot-count".into(), every.to_string()));
    }
    settings.extend(spec.auto_compaction_args().1);
    if opts.secure.is_some() {
        settings.push(("client-transport".into(), SECURE_TRANSPORT.into()));
        settings.push(("auth".into(), super::etcd_auth::DESCRIPTION.into()));
    }
    ClusterInfo::started(
        TARGET,
        spec,
        binary.display().to_string(),
        settings,
        opts.effective_timing(),
    )
}

/// What run.json's settings say of a secured cluster's client transport.
const SECURE_TRANSPORT: &str =
    "TLS, client certificates required (CA generated per run); peers plain HTTP on 127.0.0.1";

/// etcd's flags for TLS to clients with client certificates verified by the run's CA.
fn client_tls_args(certs: &RunCertificates) -> [String; 4] {
    [
        format!("--cert-file={}", certs.server_cert.display()),
        format!("--key-file={}", certs.server_key.display()),
        "--client-cert-auth".into(),
        format!("--trusted-ca-file={}", certs.ca.display()),
    ]
}

/// Polls every member's Status until all answer with the same non-zero leader; fails at once
/// if a member exits. Returns the server version. Serves any cluster that speaks etcd's v3
/// API (etcd itself, the built-in Raft engine), secured ones through `security`.
pub(super) async fn wait_ready(
    cluster: &mut Cluster,
    target: &str,
    security: &EtcdSecurity,
) -> Result<String, ProvisionError> {
    let started = Instant::now();
    let endpoints = cluster.endpoints();
    let names = cluster.member_names();
    let mut clients: Vec<Option<Client>> = vec![None; endpoints.len()];
    let mut detail;
    loop {
        cluster.check_alive()?;
        let mut leaders = Vec::with_capacity(endpoints.len());
        let mut version = String::new();
        detail = String::new();
        for (i, url) in endpoints.iter().enumerate() {
            if clients[i].is_none() {
                match connect_client(std::slice::from_ref(url), security, STATUS_TIMEOUT).await {
                    Ok(c) => clients[i] = Some(c),
                    Err(e) => {
                        detail = format!("member {} at {url}: {e}", names[i]);
                        continue;
                    }
                }
            }
            let Some(client) = clients[i].as_mut() else {
                continue;
            };
            match tokio::time::timeout(STATUS_TIMEOUT, client.status()).await {
                Ok(Ok(status)) => {
                    leaders.push(status.leader());
                    version = status.version().to_string();
                }
                Ok(Err(e)) => {
                    detail = format!("member {} at {url} did not answer Status: {e}", names[i]);
                    clients[i] = None;
                }
                Err(_) => {
                    detail = format!(
                        "member {} at {url} did not answer Status within {:?}",
                        names[i], STATUS_TIMEOUT
                    );
                    clients[i] = None;
                }
            }
        }
        if leaders.len() == endpoints.len() {
            let first = leaders[0];
            if first != 0 && leaders.iter().all(|&l| l == first) {
                return Ok(version);
            }
            detail =
                format!("members report leaders {leaders:x?} (0 = none yet); no agreed leader");
        }
        if started.elapsed() >= READY_TIMEOUT {
            return Err(ProvisionError::NotReady {
                target: target.to_string(),
                waited: READY_TIMEOUT,
                detail: format!("{detail}; member logs are in the work directory's logs/"),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_results::timeout_range::TimeoutRange;

    fn timing(range: Option<&str>, heartbeat_ms: Option<u64>) -> ElectionTiming {
        ElectionTiming::new(
            range.map(|r| TimeoutRange::parse(r).unwrap()),
            heartbeat_ms.map(Duration::from_millis),
        )
        .unwrap()
    }

    #[test]
    fn the_default_is_etcds_own_and_met_exactly() {
        let o = EtcdOptions::default()
            .with_timing(&ElectionTiming::default())
            .unwrap();
        assert_eq!(
            o.timing_args(),
            ["--heartbeat-interval=100", "--election-timeout=1000"]
        );
        let e = o.effective_timing();
        assert_eq!(
            (
                e.election_timeout_min_ms,
                e.election_timeout_max_ms,
                e.heartbeat_ms
            ),
            (1000, 1900, 100)
        );
        assert_eq!(e.note, None);
    }

    #[test]
    fn min_maps_to_election_timeout_and_max_is_noted_when_etcd_cannot_meet_it() {
        let o = EtcdOptions::default()
            .with_timing(&timing(Some("150ms-300ms"), Some(15)))
            .unwrap();
        assert_eq!(
            o.timing_args(),
            ["--heartbeat-interval=15", "--election-timeout=150"]
        );
        let e = o.effective_timing();
        assert_eq!(
            (e.election_timeout_min_ms, e.election_timeout_max_ms),
            (150, 285)
        );
        assert!(e.note.unwrap().contains("only MIN can be set"));
        // No heartbeat asked for: a tenth of MIN.
        let o = EtcdOptions::default()
            .with_timing(&timing(Some("150-155"), None))
            .unwrap();
        assert_eq!(
            o.timing_args(),
            ["--heartbeat-interval=15", "--election-timeout=150"]
        );
        // Only a heartbeat: etcd's 1 s timeout stays.
        let o = EtcdOptions::default()
            .with_timing(&timing(None, Some(50)))
            .unwrap();
        assert_eq!(
            o.timing_args(),
            ["--heartbeat-interval=50", "--election-timeout=1000"]
        );
        assert_eq!(o.effective_timing().note, None);
    }

    #[test]
    fn timing_etcd_refuses_is_refused_in_one_line() {
        for (range, hb) in [
            (Some("150-300"), Some(40)),
            (None, Some(300)),
            (Some("55000-60000"), None),
        ] {
            let err = EtcdOptions::default()
                .with_timing(&timing(range, hb))
                .unwrap_err();
            assert!(err.contains("etcd") && !err.contains('\n'), "{err}");
        }
    }
}
