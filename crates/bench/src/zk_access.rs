//! The ZooKeeper targets' access options: `--zk-auth`, `--zk-acl`, `--zk-chroot`, the TLS
//! options against a secure client port ([`TlsArgs`]) and what `--secure` means for
//! zookeeper and zab. Turns them into the driver's [`ZkAccess`] and into what run.json
//! records ([`ZkAccessRecord`]: scheme, user, ACL mode, chroot, TLS; never the password).
//! The one place that knows these options for the ZooKeeper API.

use clap::{Args, ValueEnum};
use coordbench_drivers::zookeeper::access::parse_chroot;
use coordbench_drivers::zookeeper::{NodeAcl, ZkAccess, ZkTls};
use coordbench_lab::secret::generated_password;
use serde::Serialize;

use crate::tls_access::TlsArgs;
use coordbench_results::kinds::{TargetKind, ZkClientArg};

/// Where `--zk-auth digest:USER` takes the password from.
pub const PASSWORD_ENV: &str = "COORDBENCH_ZK_PASSWORD";

/// The user `--secure` authenticates as; its password is drawn per run.
pub const SECURE_USER: &str = "coordbench";

/// The ACL the workloads' nodes get (`--zk-acl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ZkAclArg {
    /// world:anyone with every permission (OPEN_ACL_UNSAFE).
    #[default]
    Open,
    /// CREATOR_ALL_ACL: only sessions with the run's credentials may touch them.
    Creator,
}

/// The ZooKeeper access options of `coordbench run`.
#[derive(Debug, Clone, Default, Args)]
pub struct ZkAccessArgs {
    /// zookeeper, zab: authenticate every session with ZooKeeper's digest scheme before
    /// any request: digest:USER:PASSWORD, or digest:USER with the password in
    /// $COORDBENCH_ZK_PASSWORD (kept out of shell history and run.json).
    #[arg(long, value_name = "digest:USER[:PASSWORD]")]
    pub zk_auth: Option<String>,

    /// zookeeper, zab: the ACL of every node the workloads create (creator: CREATOR_ALL,
    /// so other users cannot touch them; needs --zk-auth). Default: open.
    #[arg(long, value_enum)]
    pub zk_acl: Option<ZkAclArg>,

    /// zookeeper, zab: put every workload path under this znode (created if missing, as
    /// far as the ACL allows), e.g. /bench.
    #[arg(long, value_name = "/PATH")]
    pub zk_chroot: Option<String>,
}

/// What run.json records about access; absent fields were not used.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ZkAccessRecord {
    /// `digest` when sessions authenticated.
    pub zk_auth_scheme: Option<String>,
    pub zk_auth_user: Option<String>,
    /// `open` or `creator`; absent for targets without ZooKeeper's API.
    pub zk_acl: Option<String>,
    pub zk_chroot: Option<String>,
    /// Sessions and four-letter words go over TLS (the secure client port).
    pub zk_tls: bool,
    /// Clients presented a certificate.
    pub zk_tls_client_cert: bool,
}

/// The options resolved: the driver's access and its record.
#[derive(Debug, Clone, Default)]
pub struct ResolvedAccess {
    pub access: ZkAccess,
    pub record: ZkAccessRecord,
}

/// Checks the options against the target (and `--secure`) and resolves the password. Errors
/// are one line naming the option. `password_env` is the value of [`PASSWORD_ENV`].
pub fn resolve(
    args: &ZkAccessArgs,
    tls_args: &TlsArgs,
    target: TargetKind,
    zk_client: ZkClientArg,
    secure: bool,
    password_env: Option<String>,
) -> Result<ResolvedAccess, String> {
    let zk_api = crate::config::family_of(target) == coordbench_drivers::ApiFamily::ZooKeeper;
    let given = args.zk_auth.is_some() || args.zk_acl.is_some() || args.zk_chroot.is_some();
    if !zk_api {
        if given {
            return Err(
                "--zk-auth, --zk-acl and --zk-chroot apply only to --target zookeeper or zab"
                    .into(),
            );
        }
        return Ok(ResolvedAccess::default());
    }
    if (given || secure) && zk_client == ZkClientArg::Async {
        return Err("--zk-client async cannot authenticate (zookeeper-async does not re-send addauth after a reconnect, so its sessions would lose their credentials); omit --zk-client".into());
    }
    let tls = attached_tls(tls_args, zk_client, secure)?;
    let digest = match (&args.zk_auth, secure) {
        (Some(_), true) => {
            return Err("--secure generates the run's credentials; omit --zk-auth (use --zk-auth with --endpoints)".into())
        }
        (Some(auth), false) => Some(parse_digest(auth, password_env)?),
        (None, true) => Some(format!("{SECURE_USER}:{}", generated_password())),
        (None, false) => None,
    };
    let acl = match (args.zk_acl, secure) {
        (Some(ZkAclArg::Open), true) => {
            return Err("--secure puts CREATOR_ALL on every node; omit --zk-acl".into())
        }
        (Some(ZkAclArg::Creator), _) | (None, true) => ZkAclArg::Creator,
        (Some(ZkAclArg::Open), false) | (None, false) => ZkAclArg::Open,
    };
    if acl == ZkAclArg::Creator && digest.is_none() {
        return Err("--zk-acl creator needs --zk-auth (a node's creator is the credentials it was created with)".into());
    }
    let chroot = args
        .zk_chroot
        .as_deref()
        .map(parse_chroot)
        .transpose()
        .map_err(|e| format!("--zk-chroot: {e}"))?;
    let user = digest
        .as_deref()
        .and_then(|d| d.split_once(':'))
        .map(|(user, _)| user.to_string());
    Ok(ResolvedAccess {
        record: ZkAccessRecord {
            zk_auth_scheme: digest.as_ref().map(|_| "digest".to_string()),
            zk_auth_user: user,
            zk_acl: Some(acl_name(acl).to_string()),
            zk_chroot: chroot.clone(),
            // --secure's TLS is added once the run's certificates exist.
            zk_tls: secure || tls.is_some(),
            zk_tls_client_cert: secure || tls.as_ref().is_some_and(ZkTls::client_certificate),
        },
        access: ZkAccess {
            digest,
            acl: match acl {
                ZkAclArg::Open => NodeAcl::Open,
                ZkAclArg::Creator => NodeAcl::Creator,
            },
            chroot,
            tls,
        },
    })
}

/// TLS to the secure client ports of a cluster the user runs, from the TLS options.
fn attached_tls(
    tls_args: &TlsArgs,
    zk_client: ZkClientArg,
    secure: bool,
) -> Result<Option<ZkTls>, String> {
    if !tls_args.given() {
        return Ok(None);
    }
    if secure {
        return Err("--secure generates the run's certificates; omit --cacert, --cert and --key (they are for --endpoints)".into());
    }
    if zk_client == ZkClientArg::Async {
        return Err(
            "--zk-client async has no TLS (zookeeper-async speaks plain TCP only); omit --zk-client"
                .into(),
        );
    }
    let client = tls_args.client_tls()?;
    ZkTls::new(&client).map(Some).map_err(|e| e.to_string())
}

fn acl_name(acl: ZkAclArg) -> &'static str {
    match acl {
        ZkAclArg::Open => "open",
        ZkAclArg::Creator => "creator",
    }
}

/// `digest:USER:PASSWORD`, or `digest:USER` with the password from the environment, as
/// `USER:PASSWORD`.
fn parse_digest(auth: &str, password_env: Option<String>) -> Result<String, String> {
    let Some(rest) = auth.strip_prefix("digest:") else {
        return Err(
            "--zk-auth takes digest:USER:PASSWORD (the digest scheme is the one supported)".into(),
        );
    };
    let (user, password) = match rest.split_once(':') {
        Some((user, password)) => (user, password.to_string()),
        None => (
            rest,
            password_env.filter(|p| !p.is_empty()).ok_or_else(|| {
                format!("--zk-auth digest:{rest} has no password: append :PASSWORD or set {PASSWORD_ENV}")
            })?,
        ),
    };
    if user.is_empty() || password.is_empty() {
        return Err("--zk-auth needs a non-empty user and password (digest:USER:PASSWORD)".into());
    }
    Ok(format!("{user}:{password}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(auth: Option<&str>, acl: Option<ZkAclArg>, chroot: Option<&str>) -> ZkAccessArgs {
        ZkAccessArgs {
            zk_auth: auth.map(str::to_string),
            zk_acl: acl,
            zk_chroot: chroot.map(str::to_string),
        }
    }

    fn zk(a: &ZkAccessArgs, secure: bool, env: Option<&str>) -> Result<ResolvedAccess, String> {
        resolve(
            a,
            &TlsArgs::default(),
            TargetKind::Zookeeper,
            ZkClientArg::Client,
            secure,
            env.map(str::to_string),
        )
    }

    #[test]
    fn credentials_come_from_the_flag_or_the_environment_and_are_not_recorded() {
        let r = zk(
            &args(
                Some("digest:alice:pw"),
                Some(ZkAclArg::Creator),
                Some("/b/"),
            ),
            false,
            None,
        )
        .unwrap();
        assert_eq!(r.access.digest.as_deref(), Some("alice:pw"));
        assert_eq!(r.access.chroot.as_deref(), Some("/b"));
        let json = serde_json::to_string(&r.record).unwrap();
        assert!(
            json.contains("\"zk_auth_user\":\"alice\"") && !json.contains("pw"),
            "{json}"
        );
        let from_env = zk(&args(Some("digest:alice"), None, None), false, Some("s3")).unwrap();
        assert_eq!(from_env.access.digest.as_deref(), Some("alice:s3"));
        assert!(zk(&args(Some("digest:alice"), None, None), false, None)
            .unwrap_err()
            .contains(PASSWORD_ENV));
    }

    #[test]
    fn secure_generates_credentials_and_creator_acls() {
        let a = zk(&ZkAccessArgs::default(), true, None).unwrap();
        let b = zk(&ZkAccessArgs::default(), true, None).unwrap();
        assert_eq!(a.access.acl, NodeAcl::Creator);
        assert_eq!(a.record.zk_auth_user.as_deref(), Some(SECURE_USER));
        assert_ne!(a.access.digest, b.access.digest, "a password per run");
    }

    #[test]
    fn bad_combinations_are_one_line_errors() {
        for (a, secure, target, client, needle) in [
            (
                args(None, Some(ZkAclArg::Creator), None),
                false,
                TargetKind::Zab,
                ZkClientArg::Client,
                "needs --zk-auth",
            ),
            (
                args(Some("sasl:x"), None, None),
                false,
                TargetKind::Zab,
                ZkClientArg::Client,
                "digest:USER:PASSWORD",
            ),
            (
                args(None, None, Some("bench")),
                false,
                TargetKind::Zab,
                ZkClientArg::Client,
                "--zk-chroot",
            ),
            (
                args(Some("digest:a:b"), None, None),
                false,
                TargetKind::Etcd,
                ZkClientArg::Client,
                "only to --target zookeeper",
            ),
            (
                args(Some("digest:a:b"), None, None),
                false,
                TargetKind::Zookeeper,
                ZkClientArg::Async,
                "zookeeper-async",
            ),
            (
                args(Some("digest:a:b"), None, None),
                true,
                TargetKind::Zookeeper,
                ZkClientArg::Client,
                "omit --zk-auth",
            ),
        ] {
            let e = resolve(&a, &TlsArgs::default(), target, client, secure, None).unwrap_err();
            assert!(e.contains(needle) && !e.contains('\n'), "{e}");
        }
    }
}
