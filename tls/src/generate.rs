//! A run's certificates (`--secure`): a fresh CA, a server certificate for 127.0.0.1 and
//! localhost, and a client certificate, all signed by that CA, written as PEM files. The
//! CA's key is never written, so nothing else can be signed with it after the run.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::TlsError;

/// The common name of a run's client certificate. It names no etcd user, so etcd's
/// `--client-cert-auth` never takes it for one: requests still need the user's token.
pub const CLIENT_COMMON_NAME: &str = "coordbench-client";

/// Where a run's PEM files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCertificates {
    /// The CA certificate (servers trust client certificates it signed; clients trust
    /// server certificates it signed).
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Generates the certificates into `dir` (created if missing): `ca.pem`, `server.pem`,
/// `server-key.pem`, `client.pem`, `client-key.pem`; keys are readable by the owner only.
pub fn generate(dir: &Path) -> Result<RunCertificates, TlsError> {
    let failed = |e: rcgen::Error| TlsError::Generate(e.to_string());
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "coordbench run CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(failed)?)
        .map_err(failed)?;

    // etcd also dials itself with its server certificate (its gRPC gateway), as a client.
    let server = leaf(
        "coordbench server",
        &["127.0.0.1", "localhost"],
        &[
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        &ca,
    )?;
    let client = leaf(
        CLIENT_COMMON_NAME,
        &[],
        &[ExtendedKeyUsagePurpose::ClientAuth],
        &ca,
    )?;
    let files = RunCertificates {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server-key.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client-key.pem"),
    };
    write(&files.ca, &ca.pem(), false)?;
    write(&files.server_cert, &server.0, false)?;
    write(&files.server_key, &server.1, true)?;
    write(&files.client_cert, &client.0, false)?;
    write(&files.client_key, &client.1, true)?;
    Ok(files)
}

/// A certificate signed by `ca` and its key, both PEM.
fn leaf(
    common_name: &str,
    names: &[&str],
    usages: &[ExtendedKeyUsagePurpose],
    ca: &CertifiedIssuer<'_, KeyPair>,
) -> Result<(String, String), TlsError> {
    let failed = |e: rcgen::Error| TlsError::Generate(format!("{common_name}: {e}"));
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).map_err(failed)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = usages.to_vec();
    let key = KeyPair::generate().map_err(failed)?;
    let cert = params.signed_by(&key, ca).map_err(failed)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn write(path: &Path, pem: &str, secret: bool) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 });
    options
        .open(path)
        .and_then(|mut f| f.write_all(pem.as_bytes()))
        .map_err(|source| TlsError::Write {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{client_config, server_config, ClientTls, ServerTls};

    #[test]
    fn generated_files_make_client_and_server_configurations() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate(dir.path()).unwrap();
        let server = server_config(&ServerTls {
            cert: files.server_cert.clone(),
            key: files.server_key.clone(),
            client_ca: Some(files.ca.clone()),
        })
        .unwrap();
        assert_eq!(server.alpn_protocols, vec![b"h2".to_vec()]);
        client_config(&ClientTls {
            ca: Some(files.ca.clone()),
            cert: Some(files.client_cert.clone()),
            key: Some(files.client_key.clone()),
            skip_verify: false,
        })
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&files.client_key)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "keys are the owner's alone");
    }

    #[test]
    fn missing_or_mismatched_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate(dir.path()).unwrap();
        let e = client_config(&ClientTls {
            ca: Some(dir.path().join("nope.pem")),
            ..ClientTls::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--cacert") && e.contains("nope.pem"), "{e}");
        let e = client_config(&ClientTls {
            ca: Some(files.ca.clone()),
            cert: Some(files.client_cert.clone()),
            key: None,
            skip_verify: false,
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--cert and --key"), "{e}");
        let e = client_config(&ClientTls {
            ca: Some(files.client_key.clone()),
            ..ClientTls::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--cacert"), "{e}");
    }
}
