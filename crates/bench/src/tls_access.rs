//! The TLS options of `coordbench run` against clusters the user runs (`--endpoints`):
//! `--cacert`, `--cert`, `--key` and `--insecure-skip-tls-verify`, etcdctl's names, for
//! every target with TLS (etcd and raft over https://, ZooKeeper's secure client port and
//! zab's). The etcd and ZooKeeper access options ([`crate::etcd_access`],
//! [`crate::zk_access`]) check them against their target and turn them into their driver's
//! TLS.

use std::path::PathBuf;

use clap::Args;
use coordbench_tls::ClientTls;

/// The TLS options of `coordbench run`.
#[derive(Debug, Clone, Default, Args)]
pub struct TlsArgs {
    /// With --endpoints: verify the servers' certificates with this CA bundle (PEM); etcd
    /// and raft endpoints are then https:// (bare host:port too), ZooKeeper's and zab's
    /// are their secure client ports. Without it, servers are verified against the
    /// system's CAs.
    #[arg(long, value_name = "PEM")]
    pub cacert: Option<PathBuf>,

    /// With --endpoints: the client certificate (PEM) for servers that require one (etcd's
    /// --client-cert-auth, ZooKeeper's ssl.clientAuth=need). Needs --key.
    #[arg(long, value_name = "PEM")]
    pub cert: Option<PathBuf>,

    /// With --endpoints: the private key of --cert (PEM).
    #[arg(long, value_name = "PEM")]
    pub key: Option<PathBuf>,

    /// etcd, raft with --endpoints: accept any server certificate (labs only: encrypted,
    /// but the server is not authenticated).
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
}

impl TlsArgs {
    /// Whether any TLS option was given.
    pub fn given(&self) -> bool {
        self.cacert.is_some()
            || self.cert.is_some()
            || self.key.is_some()
            || self.insecure_skip_tls_verify
    }

    /// The client's TLS as the options say; checks what holds for every target.
    pub fn client_tls(&self) -> Result<ClientTls, String> {
        if self.insecure_skip_tls_verify && self.cacert.is_some() {
            return Err("--insecure-skip-tls-verify verifies nothing, so --cacert would be ignored; give one of them".into());
        }
        Ok(ClientTls {
            ca: self.cacert.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
            skip_verify: self.insecure_skip_tls_verify,
        })
    }
}
