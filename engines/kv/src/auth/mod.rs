//! etcd's auth state as part of the deterministic state machine: users (with their
//! password hashes, hashed by the proposing server so that apply stays cheap and equal
//! everywhere), roles with their key permissions, whether auth is enabled, and the auth
//! revision that every change raises. [`AuthCommand`]s travel through the log like kv
//! commands and the state is in the store's snapshots, so every member agrees and a
//! restart keeps it.
//!
//! The rules are etcd's: `auth enable` needs a `root` user holding the `root` role (a role
//! that may be granted without being added, and that bypasses every permission check);
//! while auth is enabled, root cannot be deleted or lose the root role, the root role
//! cannot be deleted, and only root-role users may manage auth. Tokens are not state:
//! [`AuthCommand::Authenticate`] only checks the user and names the token
//! (`<prefix>.<log index>`); the serving layer keeps tokens and their inactivity TTL.

mod error;
pub mod perm;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use error::AuthError;
pub use perm::{Access, PermType, Permission};

/// etcd's name of the user and of the role that bypass permission checks.
pub const ROOT: &str = "root";

/// Who sends a request, as the serving member resolved its token: the user, and the auth
/// revision the member had then (a change in between makes apply refuse it as old).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthInfo {
    pub user: String,
    pub revision: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub name: String,
    /// The password's hash (a bcrypt string); `None` for a user added with no password,
    /// who cannot authenticate.
    pub password_hash: Option<String>,
    /// Sorted, without duplicates.
    pub roles: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub name: String,
    /// Sorted by key, as etcd keeps them; one per `(key, range_end)`.
    pub perms: Vec<Permission>,
}

/// A replicated change of the auth state (or an authentication, which changes nothing
/// but must be ordered with the changes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthCommand {
    Enable,
    Disable,
    /// The password was checked by the proposing member; apply checks that auth is on and
    /// the user still exists, and the token is `<token_prefix>.<log index>`.
    Authenticate {
        name: String,
        token_prefix: String,
    },
    UserAdd {
        name: String,
        password_hash: Option<String>,
    },
    UserDelete {
        name: String,
    },
    UserChangePassword {
        name: String,
        password_hash: Option<String>,
    },
    UserGrantRole {
        name: String,
        role: String,
    },
    UserRevokeRole {
        name: String,
        role: String,
    },
    RoleAdd {
        name: String,
    },
    RoleDelete {
        name: String,
    },
    RoleGrantPermission {
        name: String,
        perm: Permission,
    },
    RoleRevokePermission {
        name: String,
        key: Vec<u8>,
        range_end: Vec<u8>,
    },
}

impl AuthCommand {
    /// Whether applying it needs a root-role user while auth is enabled (all but
    /// Authenticate).
    pub fn needs_admin(&self) -> bool {
        !matches!(self, AuthCommand::Authenticate { .. })
    }

    /// The user whose tokens no longer hold once this applies (deleted, new password).
    pub fn invalidates_user(&self) -> Option<&str> {
        match self {
            AuthCommand::UserDelete { name } | AuthCommand::UserChangePassword { name, .. } => {
                Some(name)
            }
            _ => None,
        }
    }
}

/// Users, roles and the enabled flag, at an auth revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthStore {
    enabled: bool,
    /// Starts at 1 (as etcd's) and rises with every change.
    revision: u64,
    users: BTreeMap<String, User>,
    roles: BTreeMap<String, Role>,
}

impl Default for AuthStore {
    fn default() -> Self {
        AuthStore {
            enabled: false,
            revision: 1,
            users: BTreeMap::new(),
            roles: BTreeMap::new(),
        }
    }
}

impl AuthStore {
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles.get(name)
    }

    /// User names, sorted.
    pub fn user_names(&self) -> Vec<String> {
        self.users.keys().cloned().collect()
    }

    /// Role names, sorted.
    pub fn role_names(&self) -> Vec<String> {
        self.roles.keys().cloned().collect()
    }

    /// Checks a snapshot's auth state: names match their keys, roles are sorted.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let users_ok = self
            .users
            .iter()
            .all(|(k, u)| *k == u.name && !k.is_empty() && u.roles.windows(2).all(|w| w[0] < w[1]));
        let roles_ok = self
            .roles
            .iter()
            .all(|(k, r)| *k == r.name && !k.is_empty());
        if !users_ok || !roles_ok || self.revision == 0 {
            return Err("auth state with inconsistent users or roles".into());
        }
        Ok(())
    }

    /// Whether `caller` may manage auth: anyone while auth is off, else root-role users.
    pub fn admin_permitted(&self, caller: Option<&AuthInfo>) -> Result<(), AuthError> {
        if !self.enabled {
            return Ok(());
        }
        let caller = caller.ok_or(AuthError::UserEmpty)?;
        let user = self
            .users
            .get(&caller.user)
            .ok_or(AuthError::UserNotFound)?;
        if has_root_role(user) {
            Ok(())
        } else {
            Err(AuthError::PermissionDenied)
        }
    }

    /// Whether `caller` may `access` the key or range: anyone while auth is off; else a
    /// known user at the current auth revision whose roles cover it (root: everything).
    pub fn check(
        &self,
        caller: Option<&AuthInfo>,
        access: Access,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<(), AuthError> {
        if !self.enabled {
            return Ok(());
        }
        let caller = caller.ok_or(AuthError::UserEmpty)?;
        if caller.revision < self.revision {
            return Err(AuthError::AuthOldRevision);
        }
        let user = self
            .users
            .get(&caller.user)
            .ok_or(AuthError::PermissionDenied)?;
        if has_root_role(user) {
            return Ok(());
        }
        let perms = user
            .roles
            .iter()
            .filter_map(|r| self.roles.get(r))
            .flat_map(|r| &r.perms);
        if perm::permits(perms, access, key, range_end) {
            Ok(())
        } else {
            Err(AuthError::PermissionDenied)
        }
    }

    /// Applies a command at log `index` (its admin check done by the caller); returns the
    /// token of an authentication, or an empty string.
    pub(crate) fn apply(&mut self, index: u64, cmd: &AuthCommand) -> Result<String, AuthError> {
        let changed = match cmd {
            AuthCommand::Authenticate { name, token_prefix } => {
                if !self.enabled {
                    return Err(AuthError::AuthNotEnabled);
                }
                if !self.users.contains_key(name) {
                    return Err(AuthError::AuthFailed);
                }
                return Ok(format!("{token_prefix}.{index}"));
            }
            AuthCommand::Enable => self.enable()?,
            AuthCommand::Disable => std::mem::replace(&mut self.enabled, false),
            AuthCommand::UserAdd { .. }
            | AuthCommand::UserDelete { .. }
            | AuthCommand::UserChangePassword { .. }
            | AuthCommand::UserGrantRole { .. }
            | AuthCommand::UserRevokeRole { .. } => self.apply_user(cmd)?,
            _ => self.apply_role(cmd)?,
        };
        if changed {
            self.revision += 1;
        }
        Ok(String::new())
    }

    /// etcd's AuthEnable: a no-op when on already; needs root with the root role.
    fn enable(&mut self) -> Result<bool, AuthError> {
        if self.enabled {
            return Ok(false);
        }
        let root = self.users.get(ROOT).ok_or(AuthError::RootUserNotExist)?;
        if !has_root_role(root) {
            return Err(AuthError::RootRoleNotExist);
        }
        self.enabled = true;
        Ok(true)
    }

    /// The user commands; `Ok(false)` when nothing changed (a role granted twice).
    fn apply_user(&mut self, cmd: &AuthCommand) -> Result<bool, AuthError> {
        match cmd {
            AuthCommand::UserAdd {
                name,
                password_hash,
            } => {
                if name.is_empty() {
                    return Err(AuthError::UserEmpty);
                }
                if self.users.contains_key(name) {
                    return Err(AuthError::UserAlreadyExist);
                }
                let user = User {
                    name: name.clone(),
                    password_hash: password_hash.clone(),
                    roles: Vec::new(),
                };
                self.users.insert(name.clone(), user);
            }
            AuthCommand::UserDelete { name } => {
                if self.enabled && name == ROOT {
                    return Err(AuthError::InvalidAuthMgmt);
                }
                self.users.remove(name).ok_or(AuthError::UserNotFound)?;
            }
            AuthCommand::UserChangePassword {
                name,
                password_hash,
            } => {
                let user = self.users.get_mut(name).ok_or(AuthError::UserNotFound)?;
                user.password_hash = password_hash.clone();
            }
            AuthCommand::UserGrantRole { name, role } => return self.grant_role(name, role),
            AuthCommand::UserRevokeRole { name, role } => {
                if self.enabled && name == ROOT && role == ROOT {
                    return Err(AuthError::InvalidAuthMgmt);
                }
                let user = self.users.get_mut(name).ok_or(AuthError::UserNotFound)?;
                let at = user
                    .roles
                    .binary_search(role)
                    .map_err(|_| AuthError::RoleNotGranted)?;
                user.roles.remove(at);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// etcd's UserGrantRole: the root role need not exist; granting twice changes nothing.
    fn grant_role(&mut self, name: &str, role: &str) -> Result<bool, AuthError> {
        let user = self.users.get_mut(name).ok_or(AuthError::UserNotFound)?;
        if role != ROOT && !self.roles.contains_key(role) {
            return Err(AuthError::RoleNotFound);
        }
        match user.roles.binary_search_by(|r| r.as_str().cmp(role)) {
            Ok(_) => Ok(false),
            Err(at) => {
                user.roles.insert(at, role.to_string());
                Ok(true)
            }
        }
    }

    /// The role commands.
    fn apply_role(&mut self, cmd: &AuthCommand) -> Result<bool, AuthError> {
        match cmd {
            AuthCommand::RoleAdd { name } => {
                if name.is_empty() {
                    return Err(AuthError::RoleEmpty);
                }
                if self.roles.contains_key(name) {
                    return Err(AuthError::RoleAlreadyExist);
                }
                let role = Role {
                    name: name.clone(),
                    perms: Vec::new(),
                };
                self.roles.insert(name.clone(), role);
            }
            AuthCommand::RoleDelete { name } => {
                if self.enabled && name == ROOT {
                    return Err(AuthError::InvalidAuthMgmt);
                }
                self.roles.remove(name).ok_or(AuthError::RoleNotFound)?;
                for user in self.users.values_mut() {
                    user.roles.retain(|r| r != name);
                }
            }
            AuthCommand::RoleGrantPermission { name, perm } => {
                let role = self.roles.get_mut(name).ok_or(AuthError::RoleNotFound)?;
                let same = |p: &Permission| p.key == perm.key && p.range_end == perm.range_end;
                match role.perms.iter_mut().find(|p| same(p)) {
                    Some(p) => p.perm_type = perm.perm_type,
                    None => {
                        let at = role.perms.partition_point(|p| p.key <= perm.key);
                        role.perms.insert(at, perm.clone());
                    }
                }
            }
            AuthCommand::RoleRevokePermission {
                name,
                key,
                range_end,
            } => {
                let role = self.roles.get_mut(name).ok_or(AuthError::RoleNotFound)?;
                let before = role.perms.len();
                role.perms
                    .retain(|p| !(p.key == *key && p.range_end == *range_end));
                if role.perms.len() == before {
                    return Err(AuthError::PermissionNotGranted);
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn has_root_role(user: &User) -> bool {
    user.roles.iter().any(|r| r == ROOT)
}

#[cfg(test)]
mod tests;
