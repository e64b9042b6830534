//! Where installed servers live and how they are described: one directory per server and
//! version under the cache (`~/.cache/coordbench/servers/etcd-3.6.16/`, outside any
//! checkout), holding what was built and a `provenance.json` that says what it was built
//! from, with what, and the sha256 of every file a run executes or loads.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::InstallError;
use coordbench_results::version::Version;

const PROVENANCE_FILE: &str = "provenance.json";

/// The servers coordbench installs and launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum ServerKind {
    Etcd,
    Zookeeper,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Etcd => "etcd",
            ServerKind::Zookeeper => "zookeeper",
        }
    }

    /// The variable that picks the version when a run names none (`COORDBENCH_ETCD_VERSION`).
    pub fn version_variable(self) -> &'static str {
        match self {
            ServerKind::Etcd => "COORDBENCH_ETCD_VERSION",
            ServerKind::Zookeeper => "COORDBENCH_ZOOKEEPER_VERSION",
        }
    }
}

/// The cache root: `$COORDBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/coordbench`, else
/// `$HOME/.cache/coordbench`.
pub fn cache_root() -> Result<PathBuf, InstallError> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var("COORDBENCH_CACHE_DIR") {
        return Ok(dir);
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Ok(dir.join("coordbench"));
    }
    var("HOME")
        .map(|home| home.join(".cache").join("coordbench"))
        .ok_or(InstallError::NoCacheDir)
}

/// `<cache>/servers/<kind>-<version>`: where one installed version lives.
pub fn install_dir(kind: ServerKind, version: &Version) -> Result<PathBuf, InstallError> {
    Ok(cache_root()?
        .join("servers")
        .join(format!("{}-{version}", kind.name())))
}

/// One dependency an installation was built from: a Go module or a Maven artifact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Component {
    /// `go.etcd.io/etcd/server/v3` or `org.apache.zookeeper:zookeeper`.
    pub name: String,
    pub version: String,
}

/// One file of an installation, as it was when installed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileDigest {
    /// Relative to the installation's directory.
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// What provenance.json holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Provenance {
    pub schema: String,
    pub server: String,
    pub version: String,
    /// "the Go module proxy" or "Maven Central".
    pub registry: String,
    /// The modules or artifacts named in the build (their own dependencies are in the
    /// go.sum or the jar list under `files`).
    pub components: Vec<Component>,
    /// `go version` or `java -version` and `mvn -v`, first lines.
    pub toolchain: String,
    pub installed_at: String,
    pub install_seconds: f64,
    pub files: Vec<FileDigest>,
}

impl Provenance {
    /// One line for run.json and summary.csv: where the server came from and its digest.
    pub fn summary(&self) -> String {
        let main = self
            .components
            .first()
            .map_or(String::new(), |c| format!("{} {}", c.name, c.version));
        let digest = self.files.first().map_or(String::new(), |f| {
            format!(
                "; {} sha256 {}",
                f.path,
                &f.sha256[..16.min(f.sha256.len())]
            )
        });
        format!(
            "coordbench install: {main} from {} ({}){digest}",
            self.registry, self.toolchain
        )
    }

    pub fn read(dir: &Path) -> Result<Provenance, InstallError> {
        let path = dir.join(PROVENANCE_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| InstallError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| InstallError::Corrupt {
            path: path.clone(),
            detail: e.to_string(),
        })
    }

    pub fn write(&self, dir: &Path) -> Result<(), InstallError> {
        let path = dir.join(PROVENANCE_FILE);
        let text = serde_json::to_string_pretty(self).expect("provenance serializes");
        std::fs::write(&path, text + "\n").map_err(|e| InstallError::io(&path, e))
    }
}

/// sha256 and size of each of `files` (paths relative to `dir`), in the order given.
pub fn digest_files(dir: &Path, files: &[String]) -> Result<Vec<FileDigest>, InstallError> {
    files
        .iter()
        .map(|rel| {
            let path = dir.join(rel);
            let bytes = std::fs::read(&path).map_err(|e| InstallError::io(&path, e))?;
            Ok(FileDigest {
                path: rel.clone(),
                sha256: Sha256::digest(&bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
                bytes: bytes.len() as u64,
            })
        })
        .collect()
}

/// Every installed version of `kind` in the cache whose provenance reads back, newest
/// first. A directory without provenance.json is an interrupted install and is skipped.
pub fn installed(kind: ServerKind) -> Result<Vec<(Version, PathBuf, Provenance)>, InstallError> {
    let servers = cache_root()?.join("servers");
    let entries = match std::fs::read_dir(&servers) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(InstallError::io(&servers, e)),
    };
    let prefix = format!("{}-", kind.name());
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(version) = name
            .strip_prefix(&prefix)
            .and_then(|v| v.parse::<Version>().ok())
        else {
            continue;
        };
        if let Ok(provenance) = Provenance::read(&entry.path()) {
            found.push((version, entry.path(), provenance));
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0));
    Ok(found)
}
