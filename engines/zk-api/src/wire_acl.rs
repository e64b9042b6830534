//! A request's ACL as the client sent it ([`WireAcl`], whose strings may be null) turned
//! into the tree's [`Acl`]s, treating nulls as ZooKeeper 3.8's `PrepRequestProcessor`
//! does before the tree's own fix-up ([`coordbench_tree::acl::fix_acl`]) runs at apply:
//!
//! - `Id("auth", null)` is the common "creator all" entry: the id of an `auth` entry is
//!   never read (the entry becomes the session's authenticated ids), so null is "".
//! - A null scheme is an invalid ACL (`InvalidACL`), and so is a null id under a scheme
//!   ZooKeeper has no provider for: both become "" here, which the tree refuses alike.
//! - A null id under `world`, `digest` or `ip` makes ZooKeeper's check call a method on
//!   null, and so does comparing an entry holding a null with an earlier one of the same
//!   perms (its duplicate removal): the NullPointerException fails the whole request with
//!   MARSHALLINGERROR (-5). An earlier entry that is invalid ends the check first. In a
//!   multi the op goes to the log as `Op::Refuse`, so an earlier op that fails at apply
//!   is reported instead, as ZooKeeper stops at a multi's first failing op.

use coordbench_tree::acl::fix_acl;
use coordbench_tree::{Acl, Id};

use crate::proto::WireAcl;

/// Schemes with a server-side provider whose check reads the id (ZooKeeper's built-in
/// `world` comparison, `DigestAuthenticationProvider`, `IPAuthenticationProvider`).
const ID_READING_SCHEMES: [&str; 3] = ["world", "digest", "ip"];

/// The tree's ACL for `wire`: every null as "" (invalid lists are left to the tree, which
/// answers INVALID_ACL at the same point of the request as ZooKeeper).
pub(crate) fn tree_acl(wire: &[WireAcl]) -> Vec<Acl> {
    wire.iter()
        .map(|a| Acl {
            perms: a.perms,
            scheme: a.scheme.clone().unwrap_or_default(),
            id: a.id.clone().unwrap_or_default(),
        })
        .collect()
}

/// Whether ZooKeeper's ACL check throws on `wire` (a NullPointerException, answered
/// MARSHALLING_ERROR for the whole request). `ids` are the session's, for `auth` entries.
pub(crate) fn zookeeper_throws(wire: &[WireAcl], ids: &[Id]) -> bool {
    if duplicate_check_throws(wire) {
        return true;
    }
    for (a, acl) in wire.iter().zip(tree_acl(wire)) {
        let reads_id = ID_READING_SCHEMES.contains(&acl.scheme.as_str());
        if a.scheme.is_some() && a.id.is_none() && reads_id {
            return true;
        }
        // ZooKeeper stops at the first invalid entry: later nulls are never looked at.
        if fix_acl(std::slice::from_ref(&acl), ids).is_err() {
            return false;
        }
    }
    false
}

/// Whether ZooKeeper's `removeDuplicates` throws on `wire`: it asks each entry whether it
/// equals an earlier one (jute's `ACL.equals`: perms, then `Id.equals`: scheme, then id),
/// which dereferences the entry's null scheme, or its null id once the schemes match.
fn duplicate_check_throws(wire: &[WireAcl]) -> bool {
    wire.iter().enumerate().any(|(k, a)| {
        wire[..k].iter().any(|b| {
            a.perms == b.perms
                && match &a.scheme {
                    None => true,
                    Some(s) => b.scheme.as_ref() == Some(s) && a.id.is_none(),
                }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(perms: i32, scheme: Option<&str>, id: Option<&str>) -> WireAcl {
        WireAcl {
            perms,
            scheme: scheme.map(str::to_string),
            id: id.map(str::to_string),
        }
    }

    #[test]
    fn null_auth_ids_are_empty_and_null_schemes_are_left_invalid() {
        let ids = [Id::new("digest", "u:h")];
        let creator = [wire(31, Some("auth"), None)];
        assert!(!zookeeper_throws(&creator, &ids));
        let acl = tree_acl(&creator);
        assert_eq!(acl[0].id, "");
        assert_eq!(fix_acl(&acl, &ids).unwrap()[0].id, "u:h");
        for bad in [wire(31, None, Some("anyone")), wire(31, Some("sasl"), None)] {
            let bad = [bad];
            assert!(!zookeeper_throws(&bad, &ids));
            assert!(fix_acl(&tree_acl(&bad), &ids).is_err());
        }
    }

    #[test]
    fn null_ids_zookeeper_reads_throw_unless_an_earlier_entry_is_invalid() {
        for scheme in ID_READING_SCHEMES {
            assert!(zookeeper_throws(&[wire(31, Some(scheme), None)], &[]));
        }
        let invalid_first = [
            wire(31, Some("nope"), Some("x")),
            wire(1, Some("world"), None),
        ];
        assert!(!zookeeper_throws(&invalid_first, &[]));
        let twice = [wire(31, Some("auth"), None), wire(31, Some("auth"), None)];
        assert!(zookeeper_throws(&twice, &[]));
        let other_perms = [wire(31, Some("auth"), None), wire(1, Some("auth"), None)];
        assert!(!zookeeper_throws(&other_perms, &[]));
    }
}
