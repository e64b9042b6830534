//! `coordbench install`: real servers at the versions people run, built from the
//! registries this machine reaches (etcd from the Go module proxy, ZooKeeper from Maven
//! Central) into a cache outside the checkout, each with its provenance; and the choice of
//! which installed server a run launches (`--server-version`, else
//! `COORDBENCH_ETCD_VERSION` / `COORDBENCH_ZOOKEEPER_VERSION`, else the newest installed,
//! Debian's packages included).
//!
//! Layering: this module knows where servers are and how to build them; `provision`
//! launches what it chooses.

pub mod cache;
pub mod etcd;
pub mod system;
pub mod toolchain;
pub mod zookeeper;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;

pub use cache::{Provenance, ServerKind};
use coordbench_results::version::Version;
use system::SystemServer;

use coordbench_results::outcome::{Outcome, UsageError};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{tool} not found; {hint}")]
    ToolMissing { tool: String, hint: String },
    #[error("{0}")]
    NotServed(String),
    #[error("{what} (log: {})", .log.display())]
    BuildFailed { what: String, log: PathBuf },
    #[error("{server} {version} is not installed; run `coordbench install {server} {version}` (installed: {installed})")]
    NotInstalled {
        server: &'static str,
        version: Version,
        installed: String,
    },
    #[error("{variable}: {detail}")]
    BadVariable {
        variable: &'static str,
        detail: String,
    },
    #[error("no cache directory: set COORDBENCH_CACHE_DIR or HOME")]
    NoCacheDir,
    #[error("{}: unreadable ({detail}); remove that directory and install again", .path.display())]
    Corrupt { path: PathBuf, detail: String },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl InstallError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        InstallError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What a build step reports to the installer: the provenance it cannot know itself.
pub struct Built {
    pub registry: &'static str,
    pub components: Vec<cache::Component>,
    pub toolchain: String,
    /// Files to digest, relative to the installation, the one a run executes first.
    pub files: Vec<String>,
}

/// A server a run can launch: installed by coordbench, or the system's.
#[derive(Debug, Clone)]
pub struct Installation {
    pub kind: ServerKind,
    pub version: Option<Version>,
    pub origin: Origin,
}

#[derive(Debug, Clone)]
pub enum Origin {
    Cache {
        dir: PathBuf,
        provenance: Box<Provenance>,
    },
    System(SystemServer),
}

impl Installation {
    /// One line for run.json: where this server came from.
    pub fn source(&self) -> String {
        match &self.origin {
            Origin::Cache { provenance, .. } => provenance.summary(),
            Origin::System(s) => s.origin.clone(),
        }
    }

    /// Its directory (installed) or binary or jar (system).
    pub fn location(&self) -> &Path {
        match &self.origin {
            Origin::Cache { dir, .. } => dir,
            Origin::System(s) => &s.location,
        }
    }

    /// etcd's server binary.
    pub fn etcd_binary(&self) -> PathBuf {
        match &self.origin {
            Origin::Cache { dir, .. } => dir.join(etcd::SERVER_BINARY),
            Origin::System(s) => s.location.clone(),
        }
    }

    /// etcdctl beside the server: the installed one, else the system's on PATH.
    pub fn etcdctl_binary(&self) -> Option<PathBuf> {
        match &self.origin {
            Origin::Cache { dir, .. } => Some(dir.join(etcd::ETCDCTL_BINARY)),
            Origin::System(_) => {
                crate::provision::executable::find_executable(None, "etcdctl", "/usr/bin/etcdctl")
                    .ok()
            }
        }
    }

    /// ZooKeeper's classpath; `None` for Debian's, whose classpath the launcher assembles.
    pub fn zookeeper_classpath(&self) -> Option<String> {
        match &self.origin {
            Origin::Cache { dir, .. } => Some(zookeeper::classpath(dir)),
            Origin::System(_) => None,
        }
    }

    fn version_text(&self) -> String {
        self.version
            .as_ref()
            .map_or("unknown".into(), Version::to_string)
    }
}

/// Every server of `kind` a run could launch, newest first (an installed build before the
/// system's of the same version).
pub fn installations(kind: ServerKind) -> Result<Vec<Installation>, InstallError> {
    let mut all: Vec<Installation> = cache::installed(kind)?
        .into_iter()
        .map(|(version, dir, provenance)| Installation {
            kind,
            version: Some(version),
            origin: Origin::Cache {
                dir,
                provenance: Box::new(provenance),
            },
        })
        .collect();
    let system = match kind {
        ServerKind::Etcd => system::etcd(),
        ServerKind::Zookeeper => system::zookeeper(),
    };
    all.extend(system.map(|s| Installation {
        kind,
        version: s.version.clone(),
        origin: Origin::System(s),
    }));
    // Stable: of equal versions the installed build stays first.
    all.sort_by(|a, b| b.version.cmp(&a.version));
    Ok(all)
}

/// The server a run launches: the version asked for, else the one in the kind's variable,
/// else the newest installed. `Ok(None)`: nothing is installed at all.
pub fn choose(
    kind: ServerKind,
    requested: Option<&Version>,
) -> Result<Option<Installation>, InstallError> {
    let from_variable = match requested {
        Some(_) => None,
        None => variable_version(kind)?,
    };
    let wanted = requested.or(from_variable.as_ref());
    let all = installations(kind)?;
    let Some(wanted) = wanted else {
        return Ok(all.into_iter().next());
    };
    let listed = all
        .iter()
        .map(|i| i.version_text())
        .collect::<Vec<_>>()
        .join(", ");
    all.into_iter()
        .find(|i| i.version.as_ref() == Some(wanted))
        .map(Some)
        .ok_or_else(|| InstallError::NotInstalled {
            server: kind.name(),
            version: wanted.clone(),
            installed: if listed.is_empty() {
                "none".into()
            } else {
                listed
            },
        })
}

fn variable_version(kind: ServerKind) -> Result<Option<Version>, InstallError> {
    let variable = kind.version_variable();
    match std::env::var(variable) {
        Ok(text) if !text.trim().is_empty() => text
            .parse()
            .map(Some)
            .map_err(|detail| InstallError::BadVariable { variable, detail }),
        _ => Ok(None),
    }
}

/// Installs `version` of `kind` unless it is in the cache already. Returns the
/// installation and whether it was built now.
pub async fn install(
    kind: ServerKind,
    version: &Version,
) -> Result<(Installation, bool), InstallError> {
    let dir = cache::install_dir(kind, version)?;
    if let Ok(provenance) = Provenance::read(&dir) {
        if provenance
            .files
            .first()
            .is_some_and(|f| dir.join(&f.path).is_file())
        {
            let origin = Origin::Cache {
                dir,
                provenance: Box::new(provenance),
            };
            return Ok((
                Installation {
                    kind,
                    version: Some(version.clone()),
                    origin,
                },
                false,
            ));
        }
    }
    let parent = dir.parent().expect("install dirs sit under servers/");
    let logs = parent.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| InstallError::io(&logs, e))?;
    let log = logs.join(format!("{}-{version}.log", kind.name()));
    let _ = std::fs::remove_file(&log);
    // A build of its own, renamed into place whole: an interrupted or concurrent install
    // never leaves a half-built directory where a run would look.
    let staging = parent.join(format!(
        ".{}-{version}.{}.partial",
        kind.name(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    let started = Instant::now();
    let built = match kind {
        ServerKind::Etcd => etcd::build(version, &staging, &log).await,
        ServerKind::Zookeeper => zookeeper::build(version, &staging, &log).await,
    };
    let built = match built {
        Ok(built) => built,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    let provenance = Provenance {
        schema: coordbench_results::schema::PROVENANCE_SCHEMA.into(),
        server: kind.name().into(),
        version: version.to_string(),
        registry: built.registry.into(),
        components: built.components,
        toolchain: built.toolchain,
        installed_at: coordbench_results::time::now_rfc3339(),
        install_seconds: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        files: cache::digest_files(&staging, &built.files)?,
    };
    provenance.write(&staging)?;
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::rename(&staging, &dir).is_err() {
        // Another install of the same version won the race; its copy serves.
        let _ = std::fs::remove_dir_all(&staging);
    }
    let provenance = Provenance::read(&dir)?;
    let origin = Origin::Cache {
        dir,
        provenance: Box::new(provenance),
    };
    Ok((
        Installation {
            kind,
            version: Some(version.clone()),
            origin,
        },
        true,
    ))
}

/// `coordbench install`.
#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// The server to install.
    #[arg(value_enum, required_unless_present = "list")]
    pub server: Option<ServerKind>,

    /// Release(s) to install, e.g. 3.6.16 (etcd 3.5 and later; ZooKeeper 3.8.3 and later).
    #[arg(value_parser = parse_version, required_unless_present = "list")]
    pub versions: Vec<Version>,

    /// List the installed servers (coordbench's and Debian's); `*` marks what a run
    /// launches when it names no version.
    #[arg(long, conflicts_with_all = ["server", "versions"])]
    pub list: bool,
}

fn parse_version(text: &str) -> Result<Version, String> {
    text.parse()
}

pub async fn run(args: InstallArgs) -> Result<Outcome, UsageError> {
    // clap keeps --list apart from a server.
    let Some(kind) = args.server else {
        print!("{}", list_table()?);
        return Ok(Outcome::Complete);
    };
    for version in &args.versions {
        let (installation, built) = install(kind, version).await.map_err(UsageError::from)?;
        let dir = installation.location().display();
        match (&installation.origin, built) {
            (Origin::Cache { provenance, .. }, true) => println!(
                "installed {} {version} in {:.0} s: {dir} ({})",
                kind.name(),
                provenance.install_seconds,
                provenance.summary()
            ),
            _ => println!("{} {version} is installed: {dir}", kind.name()),
        }
    }
    Ok(Outcome::Complete)
}

/// The `--list` table: every installation of every server.
fn list_table() -> Result<String, InstallError> {
    let mut rows = vec![["", "server", "version", "location", "source"].map(String::from)];
    for kind in [ServerKind::Etcd, ServerKind::Zookeeper] {
        let default = choose(kind, None)
            .ok()
            .flatten()
            .map(|i| i.location().to_path_buf());
        for i in installations(kind)? {
            let mark = if default.as_deref() == Some(i.location()) {
                "*"
            } else {
                ""
            };
            rows.push([
                mark.into(),
                kind.name().into(),
                i.version_text(),
                i.location().display().to_string(),
                i.source(),
            ]);
        }
    }
    if rows.len() == 1 {
        return Ok("no servers installed; coordbench install etcd 3.6.16 (or zookeeper 3.9.5) installs one\n".into());
    }
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        for (c, width) in widths.iter().enumerate() {
            out.push_str(&format!("{:width$}  ", row[c]));
        }
        out.push_str(&row[4]);
        out.push('\n');
    }
    Ok(out)
}
