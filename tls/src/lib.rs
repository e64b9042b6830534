//! TLS for the etcd API, in one place for every side that speaks it: the etcd driver's
//! transport ([`client_config`]), the Raft engine's gRPC listener ([`server_config`],
//! [`accept`]), and provisioning, which generates a run's CA and certificates
//! ([`generate`]). rustls with the ring provider, ALPN `h2` on both sides; certificates
//! and keys are PEM files, as etcd takes them.

mod accept;
mod client;
mod describe;
mod generate;
mod pem;
mod server;

use std::path::PathBuf;

pub use accept::{accept, Accepted};
pub use client::{client_config, noting_client_auth, ClientAuthSeen, ClientTls};
pub use describe::{describe, describe_after_handshake};
pub use generate::{generate, RunCertificates};
pub use server::{server_config, ServerTls};
/// The rustls and tokio-rustls this crate builds on, so users name the same versions.
pub use {rustls, tokio_rustls};

/// The protocol both sides negotiate (gRPC runs on HTTP/2).
pub const ALPN_H2: &[u8] = b"h2";

/// Why certificates could not be loaded, made or turned into a TLS configuration. Each
/// message is one line naming the file or step.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {path}: {detail}")]
    Invalid {
        what: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("generating certificates: {0}")]
    Generate(String),
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The crypto provider every configuration here uses.
fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
