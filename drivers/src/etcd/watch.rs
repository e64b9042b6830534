//! The etcd driver's watch handles: a leader, a membership and a value, each read once and
//! then followed by a watch from the read's revision + 1 on the connection's shared stream
//! ([`super::watch_mux`]), so no change between the read and the watch is missed and none is
//! re-read.

use std::collections::{BTreeSet, VecDeque};

use async_trait::async_trait;
use etcd_client::{GetOptions, WatchOptions};

use super::map_error;
use super::prefix_view::{Change, PrefixView};
use super::session::EtcdSession;
use super::watch_mux::Subscription;
use crate::{DriverError, LeaderView, LeaderWatch, MembersWatch, ValueWatch};

/// Reads every key under `prefix` and subscribes to the changes after that read.
async fn read_and_follow(
    s: &mut EtcdSession,
    prefix: &str,
) -> Result<(PrefixView, Subscription), DriverError> {
    s.counters.request();
    let resp =
        s.kv.get(prefix, Some(GetOptions::new().with_prefix()))
            .await
            .map_err(map_error)?;
    let view = PrefixView::from_kvs(prefix, resp.kvs());
    let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(rev + 1);
    let sub = s.subscribe(prefix.as_bytes().to_vec(), options).await?;
    Ok((view, sub))
}

/// Follows the head of an election's candidate queue.
pub(super) struct EtcdLeaderWatch {
    view: PrefixView,
    sub: Subscription,
    /// What the last `next` returned; `None` before the first call.
    last: Option<Option<LeaderView>>,
}

pub(super) async fn follow_leader(
    s: &mut EtcdSession,
    prefix: &str,
) -> Result<Box<dyn LeaderWatch>, DriverError> {
    let (view, sub) = read_and_follow(s, prefix).await?;
    Ok(Box::new(EtcdLeaderWatch {
        view,
        sub,
        last: None,
    }))
}

impl EtcdLeaderWatch {
    fn leader(&self) -> Option<LeaderView> {
        self.view.first_created().map(|e| LeaderView {
            token: e.create_rev,
            value: e.value.to_vec(),
        })
    }
}

#[async_trait]
impl LeaderWatch for EtcdLeaderWatch {
    async fn next(&mut self) -> Result<Option<LeaderView>, DriverError> {
        if let Some(last) = &self.last {
            // Candidates joining or leaving behind the leader change nothing to report.
            loop {
                let changes = self.sub.next().await?;
                self.view.apply(changes.iter().cloned());
                if self.leader() != *last {
                    break;
                }
            }
        }
        let leader = self.leader();
        self.last = Some(leader.clone());
        Ok(leader)
    }
}

/// Follows the instances registered under a service's prefix.
pub(super) struct EtcdMembersWatch {
    view: PrefixView,
    sub: Subscription,
    started: bool,
}

pub(super) async fn follow_members(
    s: &mut EtcdSession,
    prefix: &str,
) -> Result<Box<dyn MembersWatch>, DriverError> {
    let (view, sub) = read_and_follow(s, prefix).await?;
    Ok(Box::new(EtcdMembersWatch {
        view,
        sub,
        started: false,
    }))
}

#[async_trait]
impl MembersWatch for EtcdMembersWatch {
    async fn next(&mut self) -> Result<BTreeSet<String>, DriverError> {
        if self.started {
            let changes = self.sub.next().await?;
            self.view.apply(changes.iter().cloned());
        }
        self.started = true;
        Ok(self.view.names())
    }
}

/// Follows one key, version by version.
pub(super) struct EtcdValueWatch {
    sub: Subscription,
    /// Versions received but not yet returned: one response may carry several.
    queued: VecDeque<Option<Vec<u8>>>,
}

pub(super) async fn follow_value(
    s: &mut EtcdSession,
    key: &str,
) -> Result<Box<dyn ValueWatch>, DriverError> {
    s.counters.request();
    let resp = s.kv.get(key, None).await.map_err(map_error)?;
    let current = resp.kvs().first().map(|kv| kv.value().to_vec());
    let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
    let options = WatchOptions::new().with_start_revision(rev + 1);
    let sub = s.subscribe(key.as_bytes().to_vec(), options).await?;
    Ok(Box::new(EtcdValueWatch {
        sub,
        queued: VecDeque::from([current]),
    }))
}

#[async_trait]
impl ValueWatch for EtcdValueWatch {
    async fn next(&mut self) -> Result<Option<Vec<u8>>, DriverError> {
        loop {
            if let Some(value) = self.queued.pop_front() {
                return Ok(value);
            }
            let changes = self.sub.next().await?;
            self.queued.extend(changes.iter().map(|c| match c {
                Change::Put { entry, .. } => Some(entry.value.to_vec()),
                Change::Delete { .. } => None,
            }));
        }
    }
}
