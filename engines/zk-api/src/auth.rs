//! A connection's authentication, as ZooKeeper keeps it: every connection is `ip:<its
//! address>`, and each successful `addauth digest user:password` adds the id
//! `digest:user:base64(sha1("user:password"))` (ZooKeeper's `DigestAuthenticationProvider`).
//! The ids are what the tree checks ACLs against ([`coordbench_tree::acl`]).

use std::net::SocketAddr;
use std::sync::Mutex;

use base64::Engine;
use coordbench_tree::Id;
use sha1::{Digest, Sha1};

/// The digest id of `user:password`, as ZooKeeper computes it for ACLs and addauth.
pub fn digest_id(user_password: &str) -> Option<String> {
    let (user, _) = user_password.split_once(':')?;
    let hash = Sha1::digest(user_password.as_bytes());
    Some(format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    ))
}

/// Why an addauth failed (ZooKeeper answers AUTH_FAILED and closes the connection).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("unsupported auth scheme {0:?} (this server knows digest)")]
    UnknownScheme(String),
    #[error("digest auth must be user:password")]
    Malformed,
}

/// The ids one connection has proved, besides its address.
#[derive(Debug, Default)]
pub(crate) struct ConnAuth {
    digests: Mutex<Vec<Id>>,
}

impl ConnAuth {
    /// Handles one addauth packet; on success the id is kept for the connection's life.
    pub fn add(&self, scheme: &str, auth: &[u8]) -> Result<(), AuthError> {
        if scheme != "digest" {
            return Err(AuthError::UnknownScheme(scheme.to_string()));
        }
        let text = std::str::from_utf8(auth).map_err(|_| AuthError::Malformed)?;
        let id = Id::new("digest", &digest_id(text).ok_or(AuthError::Malformed)?);
        let mut digests = self.lock();
        if !digests.contains(&id) {
            digests.push(id);
        }
        Ok(())
    }

    /// Whether an addauth succeeded (what enforced authentication asks for).
    pub fn authenticated(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Every id of the connection from `peer`: its ip, then its digests.
    pub fn ids(&self, peer: &SocketAddr) -> Vec<Id> {
        let mut ids = vec![Id::new("ip", &peer.ip().to_string())];
        ids.extend(self.lock().iter().cloned());
        ids
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Id>> {
        // The list stays valid even if a holder panicked.
        self.digests.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_matches_zookeepers() {
        // From ZooKeeper's documentation: DigestAuthenticationProvider.generateDigest.
        assert_eq!(
            digest_id("super:test").as_deref(),
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=")
        );
        assert_eq!(digest_id("nocolon"), None);
    }

    #[test]
    fn addauth_adds_a_digest_id_once_and_refuses_other_schemes() {
        let auth = ConnAuth::default();
        let peer: SocketAddr = "127.0.0.1:5".parse().unwrap();
        assert!(!auth.authenticated());
        auth.add("digest", b"u:p").unwrap();
        auth.add("digest", b"u:p").unwrap();
        assert_eq!(auth.ids(&peer).len(), 2);
        assert!(auth.authenticated());
        assert_eq!(
            auth.add("sasl", b"x"),
            Err(AuthError::UnknownScheme("sasl".into()))
        );
        assert_eq!(auth.add("digest", b"nocolon"), Err(AuthError::Malformed));
    }
}
