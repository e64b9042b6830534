//! Who the driver's sessions are and what they may touch: the digest credentials every
//! session sends (addauth) before any request, the ACL of every node the workloads
//! create (open to anyone, or CREATOR_ALL: only sessions with the same credentials), and
//! the chroot all workload paths live under, and TLS to the servers' secure client port.
//! Every connection the driver opens is made by [`ZkAccess::connect`].

use coordbench_zk_proto::proto::{WireAcl, PERMS_ALL};

use super::client::{Client, Error, Options};
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
    /// The ACL as sent in a create.
    pub fn entries(self) -> Vec<WireAcl> {
        let (scheme, id) = match self {
            NodeAcl::Open => ("world", "anyone"),
            // ZooKeeper's CREATOR_ALL_ACL: Id("auth", ""), the creator's authenticated ids.
            NodeAcl::Creator => ("auth", ""),
        };
        vec![WireAcl {
            perms: PERMS_ALL,
            scheme: Some(scheme.into()),
            id: Some(id.into()),
        }]
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

    /// Connects to `cluster` with `options` completed by the run's credentials (addauth on
    /// every connection) and, when secured, TLS.
    pub(super) async fn connect(
        &self,
        mut options: Options,
        cluster: &str,
    ) -> Result<Client, Error> {
        options.digest = self.digest.clone();
        options.tls = self.tls.as_ref().map(ZkTls::config);
        Client::connect(cluster, options).await
    }

    /// Creates the chroot (and its ancestors) with the run's ACL if missing, through a
    /// session at the real root.
    pub(super) async fn ensure_chroot(&self, root: &Client) -> Result<(), Error> {
        let Some(chroot) = &self.chroot else {
            return Ok(());
        };
        root.mkdir(chroot, &self.acl.entries()).await
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
