//! Service discovery over the etcd v3 API: an instance is a key
//! `<prefix>/services/<service>/<instance>` bound to its session's lease, so it vanishes
//! when a crashed or abandoned session's lease expires; watchers follow the service's
//! prefix ([`super::watch`]).

use etcd_client::PutOptions;

use super::session::EtcdSession;
use super::{map_error, KEY_PREFIX};
use crate::{DriverError, MembersWatch, Registration};

fn service_prefix(service: &str) -> String {
    format!("{KEY_PREFIX}services/{service}/")
}

pub(super) async fn register(
    s: &mut EtcdSession,
    service: &str,
    instance: &str,
    data: &[u8],
) -> Result<Registration, DriverError> {
    let lease = s.lease_id().await?;
    let key = format!("{}{instance}", service_prefix(service));
    s.counters.request();
    s.kv.put(key.clone(), data, Some(PutOptions::new().with_lease(lease)))
        .await
        .map_err(map_error)?;
    Ok(Registration {
        service: service.to_string(),
        instance: instance.to_string(),
        key: key.into_bytes(),
    })
}

pub(super) async fn deregister(
    s: &mut EtcdSession,
    registration: Registration,
) -> Result<(), DriverError> {
    s.counters.request();
    s.kv.delete(registration.key, None)
        .await
        .map_err(map_error)?;
    Ok(())
}

pub(super) async fn watch_members(
    s: &mut EtcdSession,
    service: &str,
) -> Result<Box<dyn MembersWatch>, DriverError> {
    super::watch::follow_members(s, &service_prefix(service)).await
}
