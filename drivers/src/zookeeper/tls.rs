//! TLS to ZooKeeper's secure client port (`secureClientPort`, and the Zab engine's TLS
//! listener): one rustls configuration, from the run's CA and client certificate, for the
//! sessions' connections and the four-letter words provisioning, fault injection and
//! server counters send over the same port.

use std::sync::Arc;

use coordbench_tls::rustls::ClientConfig;
use coordbench_tls::{ClientTls, TlsError};

/// How the driver's connections verify ZooKeeper servers and prove who they are.
#[derive(Clone)]
pub struct ZkTls {
    /// The files it was made from (also what equality compares).
    source: ClientTls,
    config: Arc<ClientConfig>,
}

impl ZkTls {
    /// Reads the CA (or the system's bundle) and the client certificate, and checks that
    /// the key fits the certificate.
    pub fn new(tls: &ClientTls) -> Result<ZkTls, TlsError> {
        // ZooKeeper's protocol is not negotiated by ALPN.
        let config = coordbench_tls::without_alpn(&*coordbench_tls::client_config(tls)?);
        Ok(ZkTls {
            source: tls.clone(),
            config,
        })
    }

    /// The rustls configuration of every connection to a secure client port.
    pub(super) fn config(&self) -> Arc<ClientConfig> {
        self.config.clone()
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
