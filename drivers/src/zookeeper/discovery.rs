//! Service discovery over the ZooKeeper API: an instance is an ephemeral znode
//! `/coordbench/services/<service>/<instance>` (data: what it registered with), so it lives
//! as long as its session, and a crashed client's instances vanish when the server expires
//! its session. Watchers follow a service with getChildren and a one-shot child watch, read
//! again with a new watch after each event: changes in between coalesce into one read.

use super::client::{CreateMode, Error};
use async_trait::async_trait;
use std::collections::BTreeSet;

use super::follow::Follower;
use super::pending;
use super::session::{create_in_parent, ZkSession};
use super::{map_error, ROOT};
use crate::{DriverError, MembersWatch, Registration};

fn service_dir(service: &str) -> String {
    format!("{ROOT}/services/{service}")
}

/// Creates the instance's ephemeral node (and the service's parent as needed). The node of
/// an earlier register of this session (one cancelled after its create reached the server)
/// is taken over with the new data; another session's is refused.
pub(super) async fn register(
    s: &mut ZkSession,
    service: &str,
    instance: &str,
    data: &[u8],
) -> Result<Registration, DriverError> {
    pending::repair(s).await?;
    let zk = s.zk()?.clone();
    let path = format!("{}/{instance}", service_dir(service));
    s.counters.request();
    match create_in_parent(&zk, &path, data, CreateMode::Ephemeral, s.acl()).await {
        Ok(_) => {}
        Err(Error::NodeExists) => {
            s.counters.request();
            let stat = zk.exists(&path).await.map_err(map_error)?;
            match stat {
                Some(stat) if stat.ephemeral_owner == zk.session_id() => {
                    s.counters.request();
                    zk.set_data(&path, data, Some(stat.version))
                        .await
                        .map_err(map_error)?;
                }
                _ => {
                    return Err(DriverError::Server(format!(
                        "instance {instance} of service {service} is registered by another session"
                    )))
                }
            }
        }
        Err(e) => return Err(map_error(e)),
    }
    Ok(Registration {
        service: service.to_string(),
        instance: instance.to_string(),
        key: path.into_bytes(),
    })
}

/// Deletes the instance's node, and what a cancelled campaign or acquisition left.
pub(super) async fn deregister(
    s: &mut ZkSession,
    registration: Registration,
) -> Result<(), DriverError> {
    let what = format!(
        "registration {}/{}",
        registration.service, registration.instance
    );
    let deregistered = s.delete_own(registration.key, &what).await;
    let repaired = pending::repair(s).await;
    deregistered.and(repaired)
}

pub(super) struct ZkMembersWatch {
    follower: Follower,
    dir: String,
}

/// A handle on `service`'s instances; it reads nothing until its first `next()`.
pub(super) fn watch_members(s: &ZkSession, service: &str) -> Result<ZkMembersWatch, DriverError> {
    Ok(ZkMembersWatch {
        follower: Follower::new(s)?,
        dir: service_dir(service),
    })
}

#[async_trait]
impl MembersWatch for ZkMembersWatch {
    async fn next(&mut self) -> Result<BTreeSet<String>, DriverError> {
        self.follower.wait("a membership change").await?;
        let children = self.follower.children(&self.dir).await?;
        Ok(children.iter().map(String::from).collect())
    }
}
