//! Reading PEM certificates and keys (rustls-pki-types' parser) with errors naming the file.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;

use crate::TlsError;

/// Every certificate in a PEM file (at least one).
pub(crate) fn certificates(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let invalid = |detail: String| TlsError::Invalid {
        what,
        path: path.to_path_buf(),
        detail,
    };
    let bytes = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not PEM certificates ({e})")))?;
    if certs.is_empty() {
        return Err(invalid("holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub(crate) fn private_key(
    what: &'static str,
    path: &Path,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(what, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Invalid {
        what,
        path: path.to_path_buf(),
        detail: format!("holds no usable PEM private key ({e})"),
    })
}

/// A trust store of the CA certificates in a PEM file.
pub(crate) fn roots(what: &'static str, path: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in certificates(what, path)? {
        store.add(cert).map_err(|e| TlsError::Invalid {
            what,
            path: path.to_path_buf(),
            detail: format!("not a usable CA certificate ({e})"),
        })?;
    }
    Ok(store)
}

/// A PEM file's text, for libraries that take PEM strings (zookeeper-client).
pub(crate) fn text(what: &'static str, path: &Path) -> Result<String, TlsError> {
    String::from_utf8(read(what, path)?).map_err(|_| TlsError::Invalid {
        what,
        path: path.to_path_buf(),
        detail: "is not PEM text".into(),
    })
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}
