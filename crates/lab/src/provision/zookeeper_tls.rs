//! ZooKeeper's secure client port for `--secure`: the zoo.cfg lines that make a server
//! serve clients over TLS only (Netty's connection factory, `secureClientPort` and no
//! plaintext `clientPort`, client certificates required and verified against the run's CA)
//! and the PEM key store it reads its certificate from.
//!
//! ZooKeeper 3.8 reads PEM key and trust stores (`ssl.keyStore.type=PEM`): the key store is
//! the private key followed by the certificate, in one file. Four-letter words are
//! answered on the secure port too, over TLS, so readiness checks, leader detection and
//! server counters use it like the clients do.

use std::path::{Path, PathBuf};

use coordbench_drivers::zookeeper::ZkTls;
use coordbench_tls::RunCertificates;

use super::ProvisionError;

/// Debian's zookeeper.jar names netty-handler in its manifest but not the jars its TLS
/// handler needs at run time; without them every TLS connection fails with
/// NoClassDefFoundError (io.netty.handler.codec.ByteToMessageDecoder).
pub(super) const DEBIAN_NETTY_JARS: [&str; 2] = [
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
];

/// What a secured ensemble is started with.
#[derive(Debug, Clone)]
pub struct SecureZk {
    /// The run's CA and server certificate (the client's too).
    pub certs: RunCertificates,
    /// How provisioning reaches the members (the run's client certificate).
    pub client: ZkTls,
}

/// The server key store: `server-key.pem` then `server.pem`, written beside them
/// (owner-readable only, as the key is).
pub(super) fn write_key_store(certs: &RunCertificates) -> Result<PathBuf, ProvisionError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|e| ProvisionError::io(format!("reading {}", path.display()), e))
    };
    let store = certs
        .server_key
        .with_file_name("zookeeper-server-keystore.pem");
    let text = format!("{}{}", read(&certs.server_key)?, read(&certs.server_cert)?);
    write_private(&store, &text)
        .map_err(|e| ProvisionError::io(format!("writing {}", store.display()), e))?;
    Ok(store)
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// The client-port lines of a server's zoo.cfg: TLS on `port` when `key_store` is given
/// (with the CA that signs client certificates), else plain TCP.
pub(super) fn client_port_cfg(port: u16, secure: Option<(&Path, &RunCertificates)>) -> String {
    let Some((key_store, certs)) = secure else {
        return format!("clientPort={port}\nclientPortAddress=127.0.0.1\n");
    };
    format!(
        "# Clients over TLS only: no plaintext clientPort.\n\
         secureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n\
         serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         ssl.keyStore.location={}\nssl.keyStore.type=PEM\n\
         ssl.trustStore.location={}\nssl.trustStore.type=PEM\n\
         ssl.clientAuth=need\n\
         # Client certificates name no host; the CA's signature is what is checked.\n\
         ssl.hostnameVerification=false\n",
        key_store.display(),
        certs.ca.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secure_port_replaces_the_plaintext_one() {
        let dir = tempfile::tempdir().unwrap();
        let certs = coordbench_tls::generate(dir.path()).unwrap();
        let store = write_key_store(&certs).unwrap();
        let text = std::fs::read_to_string(&store).unwrap();
        assert!(
            text.starts_with("-----BEGIN PRIVATE KEY-----") && text.contains("BEGIN CERTIFICATE")
        );
        let cfg = client_port_cfg(2281, Some((&store, &certs)));
        assert!(cfg.contains("secureClientPort=2281\n") && cfg.contains("ssl.clientAuth=need"));
        assert!(!cfg.contains("\nclientPort="), "{cfg}");
        assert_eq!(
            client_port_cfg(2181, None),
            "clientPort=2181\nclientPortAddress=127.0.0.1\n"
        );
    }
}
