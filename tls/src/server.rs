//! The server side (the Raft engine's gRPC listener): its certificate and key, and the CA
//! that must have signed every client's certificate.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

use crate::{pem, provider, TlsError, ALPN_H2};

/// A TLS listener's files, named as etcd names its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    /// The server certificate chain (`--cert-file`).
    pub cert: PathBuf,
    /// Its private key (`--key-file`).
    pub key: PathBuf,
    /// Clients must present a certificate signed by one of these CAs
    /// (`--trusted-ca-file`); `None`: no client certificates asked for.
    pub client_ca: Option<PathBuf>,
}

/// Builds the server configuration (ALPN h2; client certificates required and verified
/// when `client_ca` is given).
pub fn server_config(tls: &ServerTls) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &tls.client_ca {
        Some(ca) => {
            let roots = pem::roots("trusted CA (--trusted-ca-file)", ca)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Config(format!("client certificate verifier: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let chain = pem::certificates("server certificate (--cert-file)", &tls.cert)?;
    let key = pem::private_key("server key (--key-file)", &tls.key)?;
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Invalid {
            what: "server key (--key-file)",
            path: tls.key.clone(),
            detail: format!("does not fit the server certificate ({e})"),
        })?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}
