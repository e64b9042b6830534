//! The client side: what `--cacert`, `--cert`, `--key` and `--insecure-skip-tls-verify`
//! become, a rustls `ClientConfig` offering ALPN h2.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
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

/// What one connection's handshake showed about client authentication.
#[derive(Debug, Clone, Default)]
pub struct ClientAuthSeen {
    asked: Arc<AtomicBool>,
    /// Whether the configuration has a client certificate to send.
    pub has_cert: bool,
}

impl ClientAuthSeen {
    /// Whether the server asked for a client certificate.
    pub fn asked(&self) -> bool {
        self.asked.load(Ordering::Relaxed)
    }
}

/// `config` for one connection, noting whether the server asks for a client certificate.
/// Under TLS 1.3 a server refuses a certificate (or its absence) only after the client's
/// side of the handshake is done, and its alert can be lost to the connection's reset, so
/// this is what tells "no certificate given" apart from other failures afterwards.
pub fn noting_client_auth(config: &Arc<ClientConfig>) -> (Arc<ClientConfig>, ClientAuthSeen) {
    let seen = ClientAuthSeen {
        asked: Arc::default(),
        has_cert: config.client_auth_cert_resolver.has_certs(),
    };
    let mut noting = ClientConfig::clone(config);
    noting.client_auth_cert_resolver = Arc::new(Noting {
        inner: config.client_auth_cert_resolver.clone(),
        asked: seen.asked.clone(),
    });
    (Arc::new(noting), seen)
}

#[derive(Debug)]
struct Noting {
    inner: Arc<dyn ResolvesClientCert>,
    asked: Arc<AtomicBool>,
}

impl ResolvesClientCert for Noting {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.asked.store(true, Ordering::Relaxed);
        self.inner.resolve(root_hint_subjects, sigschemes)
    }

    fn only_raw_public_keys(&self) -> bool {
        self.inner.only_raw_public_keys()
    }

    fn has_certs(&self) -> bool {
        self.inner.has_certs()
    }
}
