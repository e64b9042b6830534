//! Leader election over the etcd v3 API, as etcd's concurrency Election: candidates queue
//! under `<prefix>/<lease>` ([`super::queue`]) with their value, and the lowest create
//! revision leads; the leadership token is that revision.
//!
//! - herd-free: a candidate waits only for the deletion of the candidate just ahead of it.
//! - naive: a candidate watches the whole election and rechecks after every change whether
//!   it is at the head, so one resignation wakes every candidate (the herd).

use etcd_client::{GetOptions, SortOrder, SortTarget, WatchOptions};

use super::queue::{self, Place};
use super::session::EtcdSession;
use super::{map_error, KEY_PREFIX};
use crate::{DriverError, LeaderWatch, Leadership, LockRecipe};

fn election_prefix(election: &str) -> String {
    format!("{KEY_PREFIX}election/{election}/")
}

/// Blocks until this session leads `election`. A candidacy dropped mid-wait stays the
/// session's `pending_key` until its next call removes it.
pub(super) async fn campaign(
    s: &mut EtcdSession,
    election: &str,
    value: &[u8],
    recipe: LockRecipe,
) -> Result<Leadership, DriverError> {
    let prefix = election_prefix(election);
    let place = queue::enqueue(s, &prefix, value).await?;
    if !place.at_head {
        match recipe {
            LockRecipe::HerdFree => queue::wait_for_predecessors(s, &prefix, place.rev).await?,
            LockRecipe::Naive => wait_for_head(s, &prefix, &place).await?,
            other => return Err(other.unsupported(crate::ApiFamily::Etcd)),
        }
        queue::confirm_still_queued(s, &place).await?;
    }
    s.pending_key = None;
    Ok(Leadership {
        election: election.to_string(),
        token: place.rev,
        key: place.key.into_bytes(),
    })
}

/// The naive wait: every change under the prefix after the enqueueing transaction (which
/// found us behind the head) wakes us, and we read the head again.
async fn wait_for_head(
    s: &mut EtcdSession,
    prefix: &str,
    place: &Place,
) -> Result<(), DriverError> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(place.read_rev + 1);
    let mut watcher = Box::pin(s.subscribe(prefix.as_bytes().to_vec(), options)).await?;
    let head = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1);
    loop {
        watcher.next().await?;
        s.counters.request();
        let resp = Box::pin(s.kv.get(prefix, Some(head.clone())))
            .await
            .map_err(map_error)?;
        match resp.kvs().first() {
            Some(kv) if kv.create_revision() == place.rev => return Ok(()),
            Some(_) => {}
            // Our own key is gone: confirm_still_queued reports the expiry.
            None => return Ok(()),
        }
    }
}

/// Gives up a leadership: deletes the candidate key if it is still this one.
pub(super) async fn resign(s: &mut EtcdSession, leadership: Leadership) -> Result<(), DriverError> {
    let what = format!("leadership of {}", leadership.election);
    queue::delete_if_created_at(s, &leadership.key, leadership.token, &what).await
}

/// A handle following `election`'s leader.
pub(super) async fn observe(
    s: &mut EtcdSession,
    election: &str,
) -> Result<Box<dyn LeaderWatch>, DriverError> {
    super::watch::follow_leader(s, &election_prefix(election)).await
}
