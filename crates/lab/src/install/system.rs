//! The servers the operating system provides: Debian's etcd-server (`etcd` on PATH, else
//! /usr/bin/etcd) and zookeeper (/usr/share/java/zookeeper.jar). Their versions are read
//! from the server itself (`etcd --version`) or from the package database.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::provision::executable::find_executable;
use coordbench_results::version::Version;

/// Debian's ZooKeeper server jar.
pub const DEBIAN_ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// A server found on the system.
#[derive(Debug, Clone)]
pub struct SystemServer {
    pub version: Option<Version>,
    /// etcd's binary or ZooKeeper's jar.
    pub location: PathBuf,
    /// "Debian etcd-server 3.4.23-4+b4", or "etcd on PATH" when no package owns it.
    pub origin: String,
}

/// The etcd on PATH (else /usr/bin/etcd), if any.
pub fn etcd() -> Option<SystemServer> {
    let binary = find_executable(None, "etcd", "/usr/bin/etcd").ok()?;
    let output = Command::new(&binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("etcd Version:"))
        .and_then(|v| v.trim().parse().ok());
    let origin = debian_owner(&binary, "etcd-server")
        .unwrap_or_else(|| format!("etcd at {}", binary.display()));
    Some(SystemServer {
        version,
        location: binary,
        origin,
    })
}

/// Debian's ZooKeeper, if its jar is there.
pub fn zookeeper() -> Option<SystemServer> {
    let jar = Path::new(DEBIAN_ZOOKEEPER_JAR);
    if !jar.is_file() {
        return None;
    }
    let package = package_version("zookeeper");
    let version = package.as_deref().and_then(upstream_version);
    Some(SystemServer {
        version,
        location: jar.to_path_buf(),
        origin: package.map_or_else(
            || format!("ZooKeeper jar {DEBIAN_ZOOKEEPER_JAR}"),
            |v| format!("Debian zookeeper {v}"),
        ),
    })
}

/// "Debian PACKAGE VERSION" when `path` is the package's own file.
fn debian_owner(path: &Path, package: &str) -> Option<String> {
    let ours = path.starts_with("/usr/bin") || path.starts_with("/bin");
    ours.then(|| package_version(package))
        .flatten()
        .map(|v| format!("Debian {package} {v}"))
}

/// The installed version of a Debian package (`3.4.23-4+b4`), if dpkg knows it.
fn package_version(package: &str) -> Option<String> {
    let output = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", package])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
    (output.status.success() && !version.is_empty()).then_some(version)
}

/// The upstream release in a Debian version: `3.8.0-11+deb12u2` -> 3.8.0.
fn upstream_version(debian: &str) -> Option<Version> {
    let without_epoch = debian.split_once(':').map_or(debian, |(_, v)| v);
    let upstream = without_epoch.split('-').next()?;
    let upstream = upstream.split(['+', '~']).next()?;
    upstream.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn debian_versions_give_their_upstream_release() {
        let v = |s| super::upstream_version(s).map(|v| v.to_string());
        assert_eq!(v("3.8.0-11+deb12u2").as_deref(), Some("3.8.0"));
        assert_eq!(v("3.4.23-4+b4").as_deref(), Some("3.4.23"));
        assert_eq!(v("1:3.9.5+dfsg-1").as_deref(), Some("3.9.5"));
        assert_eq!(v("garbage"), None);
    }
}
