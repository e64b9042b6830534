//! The etcd targets' access options: the TLS options ([`TlsArgs`]) and `--user`
//! (etcdctl's names) against clusters the user runs, and what `--secure` means for etcd
//! and raft. Turns them into the driver's
//! [`EtcdSecurity`] and into what run.json records ([`EtcdAccessRecord`]: whether TLS was
//! used, whether a CA and a client certificate were given, the user name; never a
//! password or a key). The one place that knows these options.

use clap::Args;
use coordbench_drivers::etcd::{EtcdSecurity, EtcdUser};
use serde::Serialize;

use crate::tls_access::TlsArgs;
use coordbench_results::kinds::TargetKind;

/// Where `--user NAME` takes the password from.
pub const PASSWORD_ENV: &str = "COORDBENCH_ETCD_PASSWORD";

/// The etcd user `--secure` creates and runs as; its password is drawn per run.
pub const SECURE_USER: &str = "coordbench";

/// The etcd access options of `coordbench run` (TLS is [`TlsArgs`], shared with the
/// ZooKeeper API).
#[derive(Debug, Clone, Default, Args)]
pub struct EtcdAccessArgs {
    /// etcd with --endpoints: authenticate as this etcd user: NAME:PASSWORD, or NAME with
    /// the password in $COORDBENCH_ETCD_PASSWORD (kept out of shell history and run.json).
    #[arg(long, value_name = "NAME[:PASSWORD]")]
    pub user: Option<String>,
}

/// What run.json records about access to the etcd API (all false/null when unused).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct EtcdAccessRecord {
    /// Clients talked to the members over TLS.
    pub etcd_tls: bool,
    /// A CA to verify the members by was given (or generated, with --secure).
    pub etcd_tls_ca: bool,
    /// Clients presented a certificate.
    pub etcd_tls_client_cert: bool,
    /// Server certificates were not verified (--insecure-skip-tls-verify).
    pub etcd_tls_skip_verify: bool,
    /// The etcd user the clients authenticated as.
    pub etcd_user: Option<String>,
}

/// The options resolved: the driver's security (for `--secure`, TLS is added once the
/// run's certificates exist) and its record.
#[derive(Debug, Clone, Default)]
pub struct ResolvedEtcdAccess {
    pub security: EtcdSecurity,
    pub record: EtcdAccessRecord,
}

/// Checks the options against the target, the endpoints and `--secure`, reads the
/// certificate files and resolves the password. Errors are one line naming the option.
/// `password_env` is the value of [`PASSWORD_ENV`].
pub fn resolve(
    args: &EtcdAccessArgs,
    tls_args: &TlsArgs,
    target: TargetKind,
    endpoints: &[String],
    secure: bool,
    password_env: Option<String>,
) -> Result<ResolvedEtcdAccess, String> {
    let etcd_api = crate::config::family_of(target) == coordbench_drivers::ApiFamily::Etcd;
    if !etcd_api {
        if args.user.is_some() {
            return Err(
                "--user applies only to --target etcd (ZooKeeper's credentials are --zk-auth)"
                    .into(),
            );
        }
        return Ok(ResolvedEtcdAccess::default());
    }
    let given = tls_args.given() || args.user.is_some();
    if secure {
        if given {
            return Err("--secure generates the run's certificates and user; omit --cacert, --cert, --key and --user (they are for --endpoints)".into());
        }
        return Ok(secured());
    }
    let https = scheme_is_https(endpoints)?;
    if given && endpoints.is_empty() {
        return Err("--cacert, --cert, --key and --user are for clusters you run (--endpoints); secure a cluster coordbench starts with --secure".into());
    }
    let client_tls = tls_args.client_tls()?;
    if tls_args.given() && https == Some(false) {
        return Err("--cacert, --cert, --key and --insecure-skip-tls-verify need https:// endpoints (or bare host:port)".into());
    }
    let tls = (tls_args.given() || https == Some(true)).then_some(client_tls);
    let config = tls
        .as_ref()
        .map(coordbench_tls::client_config)
        .transpose()
        .map_err(|e| e.to_string())?;
    let user = args
        .user
        .as_deref()
        .map(|u| parse_user(u, password_env))
        .transpose()?;
    Ok(ResolvedEtcdAccess {
        record: EtcdAccessRecord {
            etcd_tls: tls.is_some(),
            etcd_tls_ca: tls_args.cacert.is_some(),
            etcd_tls_client_cert: tls_args.cert.is_some(),
            etcd_tls_skip_verify: tls_args.insecure_skip_tls_verify,
            etcd_user: user.as_ref().map(|u| u.name.clone()),
        },
        security: EtcdSecurity { tls: config, user },
    })
}

/// `--secure`: TLS with a generated CA and client certificate, and auth with a user whose
/// password is drawn now, on both targets (etcd and the Raft engine).
fn secured() -> ResolvedEtcdAccess {
    let user = Some(EtcdUser::new(
        SECURE_USER,
        coordbench_lab::secret::generated_password(),
    ));
    ResolvedEtcdAccess {
        record: EtcdAccessRecord {
            etcd_tls: true,
            etcd_tls_ca: true,
            etcd_tls_client_cert: true,
            etcd_tls_skip_verify: false,
            etcd_user: user.as_ref().map(|u| u.name.clone()),
        },
        security: EtcdSecurity { tls: None, user },
    }
}

/// Whether the endpoints are https:// (`None`: all bare host:port, or none given); mixed
/// schemes are refused.
fn scheme_is_https(endpoints: &[String]) -> Result<Option<bool>, String> {
    let mut seen = None;
    for e in endpoints {
        let https = if e.starts_with("https://") {
            true
        } else if e.starts_with("http://") {
            false
        } else {
            continue;
        };
        if seen.is_some_and(|s| s != https) {
            return Err(
                "--endpoints mixes http:// and https://; a cluster is served one way".into(),
            );
        }
        seen = Some(https);
    }
    Ok(seen)
}

/// `NAME:PASSWORD`, or `NAME` with the password from the environment.
fn parse_user(user: &str, password_env: Option<String>) -> Result<EtcdUser, String> {
    let (name, password) = match user.split_once(':') {
        Some((name, password)) => (name, password.to_string()),
        None => (
            user,
            password_env.filter(|p| !p.is_empty()).ok_or_else(|| {
                format!("--user {user} has no password: append :PASSWORD or set {PASSWORD_ENV}")
            })?,
        ),
    };
    if name.is_empty() || password.is_empty() {
        return Err("--user needs a non-empty name and password (NAME:PASSWORD)".into());
    }
    Ok(EtcdUser::new(name, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attached(
        args: &EtcdAccessArgs,
        endpoints: &[&str],
        env: Option<&str>,
    ) -> Result<ResolvedEtcdAccess, String> {
        let endpoints: Vec<String> = endpoints.iter().map(|e| e.to_string()).collect();
        resolve(
            args,
            &TlsArgs::default(),
            TargetKind::Etcd,
            &endpoints,
            false,
            env.map(str::to_string),
        )
    }

    #[test]
    fn the_user_comes_from_the_flag_or_the_environment_and_only_its_name_is_recorded() {
        let args = EtcdAccessArgs {
            user: Some("alice:pw".into()),
        };
        let r = attached(&args, &["127.0.0.1:2379"], None).unwrap();
        assert_eq!(r.security.user.as_ref().map(|u| u.password()), Some("pw"));
        let json = serde_json::to_string(&r.record).unwrap();
        assert!(
            json.contains("\"etcd_user\":\"alice\"") && !json.contains("pw"),
            "{json}"
        );
        assert!(!format!("{:?}", r.security).contains("pw"));
        let args = EtcdAccessArgs {
            user: Some("alice".into()),
        };
        let r = attached(&args, &["127.0.0.1:2379"], Some("s3")).unwrap();
        assert_eq!(r.security.user.unwrap().password(), "s3");
        assert!(attached(&args, &["127.0.0.1:2379"], None)
            .unwrap_err()
            .contains(PASSWORD_ENV));
    }

    #[test]
    fn a_user_for_the_raft_engine_is_taken_as_for_etcd() {
        let args = EtcdAccessArgs {
            user: Some("alice:pw".into()),
        };
        let endpoints = ["https://127.0.0.1:2379".to_string()];
        let none = TlsArgs::default();
        for target in [TargetKind::Raft, TargetKind::Etcd] {
            let r = resolve(&args, &none, target, &endpoints, false, None).unwrap();
            assert_eq!(r.record.etcd_user.as_deref(), Some("alice"));
        }
    }

    #[test]
    fn secure_draws_a_user_per_run_for_etcd_and_raft() {
        let a = resolve(
            &EtcdAccessArgs::default(),
            &TlsArgs::default(),
            TargetKind::Etcd,
            &[],
            true,
            None,
        )
        .unwrap();
        let b = resolve(
            &EtcdAccessArgs::default(),
            &TlsArgs::default(),
            TargetKind::Etcd,
            &[],
            true,
            None,
        )
        .unwrap();
        assert_eq!(a.record.etcd_user.as_deref(), Some(SECURE_USER));
        assert_ne!(a.security.user, b.security.user, "a password per run");
        let raft = resolve(
            &EtcdAccessArgs::default(),
            &TlsArgs::default(),
            TargetKind::Raft,
            &[],
            true,
            None,
        )
        .unwrap();
        assert!(
            raft.record.etcd_user.as_deref() == Some(SECURE_USER)
                && raft.record.etcd_tls
                && raft.record.etcd_tls_client_cert
        );
    }

    #[test]
    fn bad_combinations_are_one_line_errors() {
        let ca = TlsArgs {
            cacert: Some("/nonexistent/ca.pem".into()),
            ..TlsArgs::default()
        };
        let cert_only = TlsArgs {
            cacert: Some("/nonexistent/ca.pem".into()),
            insecure_skip_tls_verify: true,
            ..TlsArgs::default()
        };
        let none = TlsArgs::default();
        let user = EtcdAccessArgs {
            user: Some("alice:pw".into()),
        };
        let no_user = EtcdAccessArgs::default();
        for (args, tls, target, endpoints, secure, needle) in [
            (
                &user,
                &none,
                TargetKind::Zookeeper,
                vec!["h:1"],
                false,
                "only to --target etcd",
            ),
            (
                &no_user,
                &ca,
                TargetKind::Etcd,
                vec![],
                true,
                "omit --cacert",
            ),
            (
                &no_user,
                &ca,
                TargetKind::Etcd,
                vec![],
                false,
                "--endpoints",
            ),
            (
                &no_user,
                &ca,
                TargetKind::Etcd,
                vec!["http://h:1"],
                false,
                "need https://",
            ),
            (
                &no_user,
                &ca,
                TargetKind::Etcd,
                vec!["https://h:1"],
                false,
                "/nonexistent/ca.pem",
            ),
            (
                &no_user,
                &cert_only,
                TargetKind::Raft,
                vec!["https://h:1"],
                false,
                "give one of them",
            ),
            (
                &no_user,
                &none,
                TargetKind::Etcd,
                vec!["https://h:1", "http://h:2"],
                false,
                "mixes",
            ),
        ] {
            let endpoints: Vec<String> = endpoints.iter().map(|e| e.to_string()).collect();
            let e = resolve(args, tls, target, &endpoints, secure, None).unwrap_err();
            assert!(e.contains(needle) && !e.contains('\n'), "{needle}: {e}");
        }
    }
}
