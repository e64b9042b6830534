//! Turning on etcd's auth for a `--secure` cluster of etcd or of the built-in Raft engine
//! (the same requests to both), through the client API over the run's TLS (Debian's etcd
//! 3.4 has no flag for it): a root user (needed by `auth enable`; its
//! password is drawn here and forgotten), a role granting readwrite on every key, the
//! run's user with that role, then `auth enable`. From then on every request needs a
//! token (etcd's simple tokens) or is refused.

use std::future::Future;
use std::time::Duration;

use coordbench_drivers::etcd::{connect_client, EtcdSecurity, EtcdUser};
use etcd_client::Permission;

use super::{Cluster, ProvisionError};

/// What run.json's settings say of a secured cluster's auth.
pub(super) const DESCRIPTION: &str =
    "enabled (simple tokens); the run's user has a role with readwrite on every key";

/// The role that grants the run's user the whole keyspace.
const ROLE: &str = "coordbench-readwrite";
/// Bound on each step (a healthy local cluster answers in milliseconds).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits until the members agree on a leader, reached with `security`'s TLS and no user
/// (auth is still off), then, when `security` names a user, enables auth for it. Returns
/// the members' version. etcd and the Raft engine come up secured this way.
pub(super) async fn ready_and_secured(
    cluster: &mut Cluster,
    target: &str,
    security: &EtcdSecurity,
) -> Result<String, ProvisionError> {
    let tls_only = EtcdSecurity {
        tls: security.tls.clone(),
        user: None,
    };
    let version = super::etcd::wait_ready(cluster, target, &tls_only).await?;
    if let Some(user) = &security.user {
        enable(&cluster.endpoints(), &tls_only, user).await?;
    }
    Ok(version)
}

/// Creates root, the role and `user`, then enables auth, talking to `endpoints` with `tls`
/// (a client certificate, no user: auth is still off).
async fn enable(
    endpoints: &[String],
    tls: &EtcdSecurity,
    user: &EtcdUser,
) -> Result<(), ProvisionError> {
    let mut client = connect_client(endpoints, tls, STEP_TIMEOUT)
        .await
        .map_err(|e| ProvisionError::Secure(format!("connecting to enable auth: {e}")))?;
    let root_password = crate::secret::generated_password();
    let c = &mut client;
    bounded("adding user root", c.user_add("root", root_password, None)).await?;
    bounded(
        "granting root the root role",
        c.user_grant_role("root", "root"),
    )
    .await?;
    bounded("adding the run's role", c.role_add(ROLE)).await?;
    let every_key = Permission::read_write(Vec::new()).with_all_keys();
    bounded(
        "granting the role readwrite on every key",
        c.role_grant_permission(ROLE, every_key),
    )
    .await?;
    bounded(
        "adding the run's user",
        c.user_add(user.name.clone(), user.password(), None),
    )
    .await?;
    bounded(
        "granting the run's user its role",
        c.user_grant_role(user.name.clone(), ROLE),
    )
    .await?;
    bounded("enabling auth", c.auth_enable()).await
}

/// One request of the set-up, bounded and named in its error.
async fn bounded<T>(
    what: &str,
    request: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<(), ProvisionError> {
    match tokio::time::timeout(STEP_TIMEOUT, request).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(ProvisionError::Secure(format!("{what}: {e}"))),
        Err(_) => Err(ProvisionError::Secure(format!(
            "{what}: no answer within {STEP_TIMEOUT:?}"
        ))),
    }
}
