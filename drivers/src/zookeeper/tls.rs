//! TLS to ZooKeeper's secure client port (`secureClientPort`, and the Zab engine's TLS
//! listener): the same CA and client certificate as two configurations, zookeeper-client's
//! `TlsOptions` for sessions and a rustls `ClientConfig` for the four-letter words
//! provisioning, fault injection and server counters send over the same port.

use std::path::Path;
use std::sync::Arc;

use coordbench_tls::rustls::ClientConfig;
use coordbench_tls::{ClientTls, TlsError};
use zookeeper_client::TlsOptions;

/// Where the system's CA bundle is on Debian (ca-certificates), the trust store when no
/// `--cacert` is given.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// How the driver's connections verify ZooKeeper servers and prove who they are.
#[derive(Clone)]
pub struct ZkTls {
    /// The files it was made from (also what equality compares).
    source: ClientTls,
    sessions: TlsOptions,
    admin: Arc<ClientConfig>,
}

impl ZkTls {
    /// Reads the CA (or the system's bundle) and the client certificate. zookeeper-client
    /// always verifies the server's chain, so `skip_verify` is refused.
    pub fn new(tls: &ClientTls) -> Result<ZkTls, TlsError> {
        if tls.skip_verify {
            return Err(TlsError::Config(
                "--insecure-skip-tls-verify is not available on the ZooKeeper API (zookeeper-client always verifies the server's certificate); pass the CA with --cacert".into(),
            ));
        }
        // zookeeper-client builds its rustls configuration from the process's default.
        coordbench_tls::install_default_provider();
        let ca = match &tls.ca {
            Some(ca) => coordbench_tls::pem_text("CA certificate (--cacert)", ca)?,
            None => coordbench_tls::pem_text(
                "system CA bundle (or pass --cacert)",
                Path::new(SYSTEM_ROOTS),
            )?,
        };
        let invalid =
            |what: &'static str, path: &Path, e: zookeeper_client::Error| TlsError::Invalid {
                what,
                path: path.to_path_buf(),
                detail: e.to_string(),
            };
        let mut sessions = TlsOptions::new().with_pem_ca(&ca).map_err(|e| {
            invalid(
                "CA certificate (--cacert)",
                tls.ca.as_deref().unwrap_or(Path::new(SYSTEM_ROOTS)),
                e,
            )
        })?;
        if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
            let cert_pem = coordbench_tls::pem_text("client certificate (--cert)", cert)?;
            let key_pem = coordbench_tls::pem_text("client key (--key)", key)?;
            sessions = sessions
                .with_pem_identity(&cert_pem, &key_pem)
                .map_err(|e| invalid("client certificate (--cert)", cert, e))?;
        }
        // Also checks what the sessions' options cannot: that the key fits the certificate.
        let admin = coordbench_tls::without_alpn(&*coordbench_tls::client_config(tls)?);
        Ok(ZkTls {
            source: tls.clone(),
            sessions,
            admin,
        })
    }

    /// zookeeper-client's options for a session's connections.
    pub(super) fn session_options(&self) -> TlsOptions {
        self.sessions.clone()
    }

    /// The rustls configuration of a four-letter word's connection.
    pub(super) fn admin_config(&self) -> Arc<ClientConfig> {
        self.admin.clone()
    }

    /// Whether a client certificate is presented.
    pub fn client_certificate(&self) -> bool {
        self.source.cert.is_some()
    }
}

impl PartialEq for ZkTls {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for ZkTls {}

/// Names the files, never their contents (the key).
impl std::fmt::Debug for ZkTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkTls")
            .field("ca", &self.source.ca)
            .field("cert", &self.source.cert)
            .finish()
    }
}
