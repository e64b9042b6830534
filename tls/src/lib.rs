//! TLS in one place for every side that speaks it: the etcd driver's transport
//! ([`client_config`]), the Raft engine's gRPC listener ([`server_config`], [`accept`]),
//! the ZooKeeper driver and the Zab engine's client port (the same configurations
//! [`without_alpn`]), and provisioning, which generates a run's CA and certificates
//! ([`generate`]). rustls with the ring provider, ALPN `h2` for gRPC; certificates and
//! keys are PEM files, as etcd and ZooKeeper take them.

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

/// Makes ring the process's default crypto provider, for libraries that build their TLS
/// configurations from the default (zookeeper-client): with two providers compiled in
/// (zookeeper-client's rustls brings aws-lc-rs) rustls cannot pick one by itself. Does
/// nothing when a default is already installed.
pub fn install_default_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing one is as good as winning it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A copy of `config` that negotiates no application protocol: for protocols other than
/// gRPC (ZooKeeper's), whose servers offer none.
pub fn without_alpn(config: &rustls::ClientConfig) -> std::sync::Arc<rustls::ClientConfig> {
    let mut config = config.clone();
    config.alpn_protocols.clear();
    std::sync::Arc::new(config)
}

/// The server side of [`without_alpn`].
pub fn server_without_alpn(config: &rustls::ServerConfig) -> std::sync::Arc<rustls::ServerConfig> {
    let mut config = config.clone();
    config.alpn_protocols.clear();
    std::sync::Arc::new(config)
}

/// The text of a PEM file (certificates or a key), with an error naming `what` and the file.
pub fn pem_text(what: &'static str, path: &std::path::Path) -> Result<String, TlsError> {
    pem::text(what, path)
}

/// The crypto provider every configuration here uses.
fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
