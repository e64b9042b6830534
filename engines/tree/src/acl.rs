//! ZooKeeper's access control: ACL entries ([`Acl`]), the identities a session proved
//! ([`Id`]), and the two rules the tree applies at every request: whether an ACL grants a
//! permission to a set of ids ([`permits`], ZooKeeper's `checkACL`), and how a create's or
//! setACL's list is checked and expanded ([`fix_acl`], ZooKeeper's `fixupACL`).
//!
//! Schemes: `world` (only `anyone`), `auth` (replaced by the session's authenticated ids),
//! `digest` (`user:base64(sha1(user:password))`, matched exactly) and `ip` (an address,
//! matched exactly). Ids are computed by the protocol layer (addauth); the tree only
//! compares strings, so it stays free of hashing and I/O.

use serde::{Deserialize, Serialize};

use crate::error::TreeError;

/// `ZooDefs.Perms`.
pub mod perm {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = 31;
}

/// An identity: `scheme` and `id` (`digest`, `user:hash`; `ip`, `127.0.0.1`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Id {
    pub scheme: String,
    pub id: String,
}

impl Id {
    pub fn new(scheme: &str, id: &str) -> Id {
        Id {
            scheme: scheme.into(),
            id: id.into(),
        }
    }
}

/// One ACL entry: the permissions `perms` for the identity `scheme:id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acl {
    pub perms: i32,
    pub scheme: String,
    pub id: String,
}

impl Acl {
    /// `ZooDefs.Ids.OPEN_ACL_UNSAFE`'s single entry: everything, for anyone.
    pub fn open() -> Acl {
        Acl {
            perms: perm::ALL,
            scheme: "world".into(),
            id: "anyone".into(),
        }
    }

    fn grants(&self, wanted: i32, ids: &[Id]) -> bool {
        if self.perms & wanted == 0 {
            return false;
        }
        if self.scheme == "world" && self.id == "anyone" {
            return true;
        }
        ids.iter()
            .any(|i| i.scheme == self.scheme && i.id == self.id)
    }
}

/// Whether `acl` grants `wanted` to a session holding `ids` (an empty ACL grants all, as
/// in ZooKeeper).
pub fn permits(acl: &[Acl], wanted: i32, ids: &[Id]) -> bool {
    acl.is_empty() || acl.iter().any(|a| a.grants(wanted, ids))
}

/// `permits`, as the error ZooKeeper answers with.
pub fn check(acl: &[Acl], wanted: i32, ids: &[Id]) -> Result<(), TreeError> {
    match permits(acl, wanted, ids) {
        true => Ok(()),
        false => Err(TreeError::NoAuth),
    }
}

/// A create's or setACL's list as the node will keep it: `auth` entries become one entry
/// per authenticated (non-`ip`) id of the session, duplicates are dropped, and lists that
/// are empty, name an unknown scheme or a malformed id, or use `auth` without an
/// authenticated id are [`TreeError::InvalidAcl`]. Perms are not checked (ZooKeeper keeps
/// unknown bits).
pub fn fix_acl(acl: &[Acl], ids: &[Id]) -> Result<Vec<Acl>, TreeError> {
    if acl.is_empty() {
        return Err(TreeError::InvalidAcl);
    }
    let mut fixed: Vec<Acl> = Vec::with_capacity(acl.len());
    let mut push = |a: Acl| {
        if !fixed.contains(&a) {
            fixed.push(a);
        }
    };
    // Perms are kept as sent, unknown bits too: ZooKeeper does not check them.
    for a in acl {
        match a.scheme.as_str() {
            "world" if a.id == "anyone" => push(a.clone()),
            "digest" if valid_digest(&a.id) => push(a.clone()),
            "ip" if a.id.parse::<std::net::IpAddr>().is_ok() => push(a.clone()),
            "auth" => {
                let mut any = false;
                for id in ids.iter().filter(|i| i.scheme != "ip") {
                    any = true;
                    push(Acl {
                        perms: a.perms,
                        scheme: id.scheme.clone(),
                        id: id.id.clone(),
                    });
                }
                if !any {
                    return Err(TreeError::InvalidAcl);
                }
            }
            _ => return Err(TreeError::InvalidAcl),
        }
    }
    Ok(fixed)
}

/// `user:hash` with both parts non-empty, as ZooKeeper's digest provider validates it.
fn valid_digest(id: &str) -> bool {
    id.split_once(':')
        .is_some_and(|(user, hash)| !user.is_empty() && !hash.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_acl(perms: i32, id: &str) -> Acl {
        Acl {
            perms,
            scheme: "digest".into(),
            id: id.into(),
        }
    }

    #[test]
    fn world_grants_everyone_digest_only_its_id_and_only_its_perms() {
        let alice = Id::new("digest", "alice:h1");
        let bob = Id::new("digest", "bob:h2");
        assert!(permits(&[Acl::open()], perm::ADMIN, &[]));
        let acl = [digest_acl(perm::READ, "alice:h1")];
        assert!(permits(&acl, perm::READ, std::slice::from_ref(&alice)));
        assert!(!permits(&acl, perm::WRITE, std::slice::from_ref(&alice)));
        assert!(!permits(&acl, perm::READ, &[bob]));
        assert!(!permits(&acl, perm::READ, &[]));
        assert_eq!(check(&acl, perm::READ, &[]), Err(TreeError::NoAuth));
    }

    #[test]
    fn auth_entries_become_the_sessions_ids_and_need_one() {
        let auth = Acl {
            perms: perm::ALL,
            scheme: "auth".into(),
            id: String::new(),
        };
        let ids = [Id::new("ip", "127.0.0.1"), Id::new("digest", "alice:h1")];
        assert_eq!(
            fix_acl(std::slice::from_ref(&auth), &ids),
            Ok(vec![digest_acl(perm::ALL, "alice:h1")])
        );
        assert_eq!(
            fix_acl(&[auth], &[Id::new("ip", "127.0.0.1")]),
            Err(TreeError::InvalidAcl)
        );
    }

    #[test]
    fn unknown_perm_bits_are_kept_as_zookeeper_keeps_them() {
        let acl = [digest_acl(64 | perm::READ, "a:b")];
        assert_eq!(fix_acl(&acl, &[]), Ok(acl.to_vec()));
    }

    #[test]
    fn malformed_lists_are_invalid() {
        assert_eq!(fix_acl(&[], &[]), Err(TreeError::InvalidAcl));
        for bad in [
            digest_acl(perm::ALL, "nohash"),
            Acl {
                perms: perm::ALL,
                scheme: "world".into(),
                id: "someone".into(),
            },
            Acl {
                perms: perm::ALL,
                scheme: "sasl".into(),
                id: "x".into(),
            },
        ] {
            assert_eq!(fix_acl(&[bad], &[]), Err(TreeError::InvalidAcl));
        }
    }
}
