//! Who the driver's sessions are and what they may touch: the digest credentials every
//! session sends (addauth) before any request, the ACL of every node the workloads
//! create (open to anyone, or CREATOR_ALL: only sessions with the same credentials), and
//! the chroot all workload paths live under, and TLS to the servers' secure client port.
//! Every connection the driver opens is made by [`ZkAccess::connect`].

use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, Error};

use super::tls::ZkTls;

/// The ACL the driver gives the nodes it creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeAcl {
    /// world:anyone, all permissions (OPEN_ACL_UNSAFE).
    #[default]
    Open,
    /// CREATOR_ALL_ACL: all permissions for the creating session's authenticated ids.
    Creator,
}

impl NodeAcl {
    /// Create options for `mode` with this ACL.
    pub fn options(self, mode: CreateMode) -> CreateOptions<'static> {
        match self {
            NodeAcl::Open => mode.with_acls(Acls::anyone_all()),
            NodeAcl::Creator => mode.with_acls(Acls::creator_all()),
        }
    }
}

/// Credentials, node ACL, chroot and TLS of a run; `Default` is anonymous, open, at the
/// root, in plain TCP.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ZkAccess {
    /// `user:password` for the digest scheme.
    pub digest: Option<String>,
    pub acl: NodeAcl,
    /// An absolute path (not `/`) every workload path is under.
    pub chroot: Option<String>,
    /// Connections (sessions and four-letter words) go over TLS.
    pub tls: Option<ZkTls>,
}

/// Never prints the password.
impl std::fmt::Debug for ZkAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user = self
            .digest
            .as_deref()
            .map(|d| d.split_once(':').map_or(d, |(user, _)| user));
        f.debug_struct("ZkAccess")
            .field("digest_user", &user)
            .field("acl", &self.acl)
            .field("chroot", &self.chroot)
            .field("tls", &self.tls)
            .finish()
    }
}

impl ZkAccess {
    /// The connect string for `hosts` (comma-joined `host:port`), with the chroot.
    pub fn connect_string(&self, hosts: &str) -> String {
        match &self.chroot {
            Some(chroot) => format!("{hosts}{chroot}"),
            None => hosts.to_string(),
        }
    }

    /// Connects `connector` to `cluster` with the run's credentials (addauth first) and,
    /// when secured, over TLS.
    pub(super) async fn connect(
        &self,
        mut connector: zookeeper_client::Connector,
        cluster: &str,
    ) -> Result<Client, Error> {
        if let Some(digest) = &self.digest {
            connector = connector.with_auth("digest", digest.as_bytes());
        }
        match &self.tls {
            Some(tls) => {
                connector
                    .with_tls(tls.session_options())
                    .secure_connect(cluster)
                    .await
            }
            None => connector.connect(cluster).await,
        }
    }

    /// Creates the chroot (and its ancestors) with the run's ACL if missing, through a
    /// session at the real root.
    pub(super) async fn ensure_chroot(&self, root: &Client) -> Result<(), Error> {
        let Some(chroot) = &self.chroot else {
            return Ok(());
        };
        root.mkdir(chroot, &self.acl.options(CreateMode::Persistent))
            .await
    }
}

/// A chroot as users may give it: absolute, no trailing slash, not the root itself, no
/// empty, `.` or `..` segment. The error says what is wrong in one line.
pub fn parse_chroot(path: &str) -> Result<String, String> {
    let trimmed = path.trim_end_matches('/');
    if !path.starts_with('/') {
        return Err(format!(
            "{path:?} is not an absolute znode path (write e.g. /bench)"
        ));
    }
    if trimmed.is_empty() {
        return Err("the chroot cannot be the root itself; omit --zk-chroot".into());
    }
    if trimmed[1..]
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == ".." || s.contains('\0'))
    {
        return Err(format!(
            "{path:?} has an empty, '.' or '..' segment (write e.g. /bench/run1)"
        ));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chroots_are_absolute_paths_below_the_root() {
        assert_eq!(parse_chroot("/bench/").as_deref(), Ok("/bench"));
        assert_eq!(parse_chroot("/a/b").as_deref(), Ok("/a/b"));
        for bad in ["bench", "/", "//", "/a//b", "/a/../b", ""] {
            assert!(parse_chroot(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn debug_hides_the_password() {
        let access = ZkAccess {
            digest: Some("alice:s3cret".into()),
            ..ZkAccess::default()
        };
        let shown = format!("{access:?}");
        assert!(
            shown.contains("alice") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}
