//! Turning a failed TLS connection into one line that says what to fix: a missing or
//! refused client certificate, a server certificate no trusted CA signed, a plain endpoint.

use std::io;

use rustls::{AlertDescription, CertificateError, Error};

/// What went wrong with TLS under `e`, with the flag to fix it; `None` when the error has
/// nothing to do with TLS (refused connection, timeout).
pub fn describe(e: &io::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = e.get_ref().map(|e| e as _);
    while let Some(err) = source {
        if let Some(tls) = err.downcast_ref::<Error>() {
            return Some(explain(tls));
        }
        source = err.source();
    }
    None
}

fn explain(e: &Error) -> String {
    match e {
        Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "TLS: the server requires a client certificate; pass --cert and --key".into()
        }
        Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::AccessDenied,
        ) => "TLS: the server refused the client certificate (none given, or not signed by a CA it trusts); pass --cert and --key signed by the server's trusted CA".into(),
        Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => "TLS: the server's certificate is not signed by a trusted CA; pass --cacert with the CA that signed it (or --insecure-skip-tls-verify in a lab)".into(),
        Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => "TLS: the server's certificate does not name the endpoint's host; connect by a name or address in its subject alternative names".into(),
        Error::InvalidCertificate(c) => {
            format!("TLS: the server's certificate is not acceptable ({c:?}); check --cacert")
        }
        Error::InvalidMessage(_) | Error::InappropriateMessage { .. } => {
            "TLS: the endpoint does not speak TLS; use http:// for a plain endpoint".into()
        }
        Error::NoApplicationProtocol => {
            "TLS: the server does not offer HTTP/2 (ALPN h2); is it an etcd gRPC endpoint?".into()
        }
        other => format!("TLS: {other}"),
    }
}

/// A connection that failed right after a handshake that completed (reset, closed, or an
/// error without a TLS reason), read in the light of what the server asked: under TLS 1.3
/// that is how a refused client certificate can look. `None`: nothing to add.
pub fn describe_after_handshake(seen: &crate::ClientAuthSeen) -> Option<String> {
    match (seen.asked(), seen.has_cert) {
        (true, false) => Some("TLS: the server requires a client certificate; pass --cert and --key".into()),
        (true, true) => Some("TLS: the server closed the connection right after the handshake, as it does when it refuses the client certificate; check that --cert is signed by a CA the server trusts".into()),
        (false, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_flag_to_fix() {
        let alert = io::Error::new(
            io::ErrorKind::InvalidData,
            Error::AlertReceived(AlertDescription::CertificateRequired),
        );
        assert!(describe(&alert).unwrap().contains("--cert and --key"));
        let untrusted = io::Error::new(
            io::ErrorKind::InvalidData,
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        assert!(describe(&untrusted).unwrap().contains("--cacert"));
        assert_eq!(
            describe(&io::Error::from(io::ErrorKind::ConnectionRefused)),
            None
        );
        let seen = crate::ClientAuthSeen::default();
        assert_eq!(
            describe_after_handshake(&seen),
            None,
            "not asked: nothing to add"
        );
    }
}
