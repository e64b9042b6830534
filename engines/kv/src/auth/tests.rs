//! etcd's auth rules on the state machine, and auth state through snapshot and restore.

use super::*;
use crate::command::{Command, Response};
use crate::error::KvError;
use crate::store::KvStore;
use crate::types::{PutRequest, RangeRequest};

struct Sm {
    store: KvStore,
    index: u64,
}

fn caller(user: &str, store: &KvStore) -> AuthInfo {
    AuthInfo {
        user: user.into(),
        revision: store.auth().revision(),
    }
}

impl Sm {
    fn new() -> Sm {
        Sm {
            store: KvStore::new(),
            index: 0,
        }
    }

    fn run(&mut self, as_user: Option<&str>, cmd: Command) -> Result<Response, KvError> {
        self.index += 1;
        let cmd = match as_user {
            Some(u) => Command::As {
                caller: caller(u, &self.store),
                command: Box::new(cmd),
            },
            None => cmd,
        };
        self.store.apply(self.index, &cmd).result
    }

    fn auth(&mut self, as_user: Option<&str>, cmd: AuthCommand) -> Result<Response, KvError> {
        self.run(as_user, Command::Auth(cmd))
    }

    fn put(&mut self, as_user: Option<&str>, key: &str) -> Result<Response, KvError> {
        let put = PutRequest {
            key: key.as_bytes().to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        };
        self.run(as_user, Command::Put(put))
    }
}

fn user_add(name: &str) -> AuthCommand {
    AuthCommand::UserAdd {
        name: name.into(),
        password_hash: Some(format!("hash-of-{name}")),
    }
}

fn grant(name: &str, role: &str) -> AuthCommand {
    AuthCommand::UserGrantRole {
        name: name.into(),
        role: role.into(),
    }
}

fn denied(r: Result<Response, KvError>, e: AuthError) {
    assert_eq!(r.map(|_| ()), Err(KvError::Auth(e)));
}

/// root (root role), alice with role `r`: readwrite on `a/`, read on `b`; auth enabled.
fn enabled() -> Sm {
    let mut sm = Sm::new();
    sm.auth(None, user_add("root")).unwrap();
    denied(
        sm.auth(None, AuthCommand::Enable),
        AuthError::RootRoleNotExist,
    );
    // The root role is granted without being added, as etcd allows.
    sm.auth(None, grant("root", ROOT)).unwrap();
    sm.auth(None, AuthCommand::RoleAdd { name: "r".into() })
        .unwrap();
    for (perm_type, key, range_end) in [
        (PermType::ReadWrite, "a/", b"a0".to_vec()),
        (PermType::Read, "b", Vec::new()),
    ] {
        let perm = Permission {
            perm_type,
            key: key.into(),
            range_end,
        };
        let cmd = AuthCommand::RoleGrantPermission {
            name: "r".into(),
            perm,
        };
        sm.auth(None, cmd).unwrap();
    }
    sm.auth(None, user_add("alice")).unwrap();
    sm.auth(None, grant("alice", "r")).unwrap();
    sm.auth(None, AuthCommand::Enable).unwrap();
    sm
}

#[test]
fn enable_needs_root_with_the_root_role() {
    let mut sm = Sm::new();
    denied(
        sm.auth(None, AuthCommand::Enable),
        AuthError::RootUserNotExist,
    );
    let sm = enabled();
    assert!(sm.store.auth().enabled());
    assert_eq!(sm.store.auth().user("root").unwrap().roles, vec!["root"]);
}

#[test]
fn permissions_are_enforced_at_apply() {
    let mut sm = enabled();
    sm.put(Some("alice"), "a/1").unwrap();
    denied(sm.put(Some("alice"), "b"), AuthError::PermissionDenied);
    denied(sm.put(Some("alice"), "c"), AuthError::PermissionDenied);
    denied(sm.put(None, "a/1"), AuthError::UserEmpty);
    denied(sm.put(Some("nobody"), "a/1"), AuthError::PermissionDenied);
    sm.put(Some("root"), "anything").unwrap();
    let read = |key: &str| RangeRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    };
    let alice = caller("alice", &sm.store);
    assert_eq!(sm.store.permit_range(Some(&alice), &read("b")), Ok(()));
    assert_eq!(
        sm.store.permit_range(Some(&alice), &read("c")),
        Err(AuthError::PermissionDenied)
    );
    // A caller resolved before an auth change is refused as old (the server retries).
    let stale = caller("alice", &sm.store);
    sm.auth(Some("root"), AuthCommand::RoleAdd { name: "x".into() })
        .unwrap();
    assert_eq!(
        sm.store.permit_range(Some(&stale), &read("b")),
        Err(AuthError::AuthOldRevision)
    );
}

#[test]
fn only_root_manages_auth_and_root_is_protected() {
    let mut sm = enabled();
    denied(
        sm.auth(Some("alice"), user_add("bob")),
        AuthError::PermissionDenied,
    );
    denied(sm.auth(None, user_add("bob")), AuthError::UserEmpty);
    sm.auth(Some("root"), user_add("bob")).unwrap();
    denied(
        sm.auth(Some("root"), user_add("bob")),
        AuthError::UserAlreadyExist,
    );
    let delete_root = AuthCommand::UserDelete { name: ROOT.into() };
    denied(
        sm.auth(Some("root"), delete_root.clone()),
        AuthError::InvalidAuthMgmt,
    );
    let revoke_root = AuthCommand::UserRevokeRole {
        name: ROOT.into(),
        role: ROOT.into(),
    };
    denied(
        sm.auth(Some("root"), revoke_root),
        AuthError::InvalidAuthMgmt,
    );
    denied(
        sm.auth(Some("root"), grant("bob", "missing")),
        AuthError::RoleNotFound,
    );
    denied(
        sm.auth(Some("root"), grant("carol", "r")),
        AuthError::UserNotFound,
    );
    let revoke = AuthCommand::UserRevokeRole {
        name: "bob".into(),
        role: "r".into(),
    };
    denied(sm.auth(Some("root"), revoke), AuthError::RoleNotGranted);
    // Deleting a role takes it from its users.
    sm.auth(Some("root"), AuthCommand::RoleDelete { name: "r".into() })
        .unwrap();
    assert!(sm.store.auth().user("alice").unwrap().roles.is_empty());
    sm.auth(Some("root"), AuthCommand::Disable).unwrap();
    sm.auth(None, delete_root).unwrap();
}

#[test]
fn authenticate_names_a_token_by_log_index() {
    let mut sm = Sm::new();
    let authn = AuthCommand::Authenticate {
        name: "alice".into(),
        token_prefix: "abc".into(),
    };
    denied(sm.auth(None, authn.clone()), AuthError::AuthNotEnabled);
    let mut sm = enabled();
    let Ok(Response::Auth { token, .. }) = sm.auth(None, authn) else {
        panic!("authentication failed");
    };
    assert_eq!(token, format!("abc.{}", sm.index));
    let unknown = AuthCommand::Authenticate {
        name: "eve".into(),
        token_prefix: "x".into(),
    };
    denied(sm.auth(None, unknown), AuthError::AuthFailed);
}

#[test]
fn auth_state_survives_snapshot_and_restore() {
    let sm = enabled();
    let bytes = sm.store.snapshot();
    let restored = KvStore::from_snapshot(&bytes).unwrap();
    assert_eq!(restored.auth(), sm.store.auth());
    assert_eq!(restored, sm.store);
    // The restored member enforces the same permissions.
    let mut next = Sm {
        store: restored,
        index: sm.index,
    };
    denied(next.put(Some("alice"), "b"), AuthError::PermissionDenied);
    next.put(Some("alice"), "a/2").unwrap();
    // Untouched auth state leaves snapshots as they were (no auth section).
    let plain = KvStore::new();
    let restored = KvStore::from_snapshot(&plain.snapshot()).unwrap();
    assert_eq!(restored.auth(), &AuthStore::default());
}

#[test]
fn auth_state_survives_an_index_snapshot_and_its_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = enabled();
    sm.store = {
        let mut s = KvStore::with_value_dir(dir.path()).unwrap();
        s.restore(&sm.store.snapshot()).unwrap();
        s
    };
    sm.put(Some("alice"), "a/3").unwrap();
    let (index, pending) = sm.store.snapshot_unsynced();
    pending.expect("an index snapshot").sync().unwrap();
    let transfer = sm.store.transfer_snapshot(&index).unwrap().unwrap();
    let follower = KvStore::from_snapshot(&transfer).unwrap();
    assert_eq!(follower.auth(), sm.store.auth());
    let mut again = KvStore::with_value_dir(dir.path()).unwrap();
    again.restore(&index).unwrap();
    assert_eq!(again.auth(), sm.store.auth());
}
