//! The client side: what `--cacert`, `--cert`, `--key` and `--insecure-skip-tls-verify`
//! become, a rustls `ClientConfig` offering ALPN h2.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

use crate::{pem, provider, TlsError, ALPN_H2};

/// Where the system's CA bundle is on Debian (ca-certificates), the trust store when no
/// `--cacert` is given.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// How a client verifies servers and proves who it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// CA certificates (PEM) that sign the servers' certificates; `None`: the system's.
    pub ca: Option<PathBuf>,
    /// The client certificate (PEM), sent when the server asks; needs `key`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
    /// Accept any server certificate (labs only): the connection is encrypted but the
    /// server is not authenticated.
    pub skip_verify: bool,
}

/// Builds the client configuration; errors name the file that is missing or unusable.
pub fn client_config(tls: &ClientTls) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = if tls.skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
    } else {
        let roots = match &tls.ca {
            Some(ca) => pem::roots("CA certificate (--cacert)", ca)?,
            None => pem::roots(
                "system CA bundle (or pass --cacert)",
                Path::new(SYSTEM_ROOTS),
            )?,
        };
        builder.with_root_certificates(roots)
    };
    let mut config = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            let chain = pem::certificates("client certificate (--cert)", cert)?;
            let key = pem::private_key("client key (--key)", key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Invalid {
                    what: "client key (--key)",
                    path: tls.key.clone().unwrap_or_default(),
                    detail: format!("does not fit the client certificate ({e})"),
                })?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(TlsError::Config(
                "--cert and --key go together (a client certificate and its key)".into(),
            ))
        }
    };
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// `--insecure-skip-tls-verify`: any certificate is accepted, but the handshake's
/// signatures are still checked against it, so the session keys are the server's.
#[derive(Debug)]
struct AnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
