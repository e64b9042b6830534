//! Leader election over the ZooKeeper API, after ZooKeeper's election recipe (Curator's
//! LeaderLatch): each candidate creates an ephemeral sequential node
//! `/coordbench/election/<name>/<session>-latch-NNNNNNNNNN` holding its value, and the lowest
//! sequence leads. The herd-free recipe waits on its next-lower candidate only; the naive
//! one re-reads the candidates on every change of them, so every candidate wakes whenever
//! anyone joins or leaves. The queue is [`super::queue`], shared with the lock.
//!
//! The leadership token is the leader node's czxid, so successive leaders' tokens increase.
//! Resigning deletes the node; a candidate left by a cancelled campaign is removed by the
//! session's next recipe call or resign ([`super::pending`]), or with the session.
//! Observers follow the lowest candidate with a child watch on the election's node.

use super::client::Error;
use async_trait::async_trait;

use super::follow::Follower;
use super::queue::{self, head, Wake};
use super::session::ZkSession;
use super::{map_error, pending, ROOT};
use crate::{DriverError, LeaderView, LeaderWatch, Leadership, LockRecipe};

fn election_dir(election: &str) -> String {
    format!("{ROOT}/election/{election}")
}

/// Joins `election` with `value` and waits until this candidate is the lowest.
pub(super) async fn campaign(
    s: &mut ZkSession,
    election: &str,
    value: &[u8],
    recipe: LockRecipe,
) -> Result<Leadership, DriverError> {
    pending::repair(s).await?;
    let place = queue::join(s, election_dir(election), "latch", value).await?;
    let wake = match recipe {
        LockRecipe::HerdFree => Wake::Predecessor,
        LockRecipe::Naive => Wake::AnyChange,
        other => return Err(other.unsupported(crate::ApiFamily::ZooKeeper)),
    };
    queue::wait_first(s, &place, wake, "leadership").await?;
    Ok(Leadership {
        election: election.to_string(),
        token: place.czxid,
        key: place.path().into_bytes(),
    })
}

/// Deletes the leader's (or candidate's) node, and what a cancelled campaign left.
pub(super) async fn resign(s: &mut ZkSession, leadership: Leadership) -> Result<(), DriverError> {
    let what = format!("leadership of {}", leadership.election);
    let resigned = s.delete_own(leadership.key, &what).await;
    let repaired = pending::repair(s).await;
    resigned.and(repaired)
}

pub(super) struct ZkLeaderWatch {
    follower: Follower,
    dir: String,
    /// The leader last returned; `None` before the first call.
    last: Option<Option<LeaderView>>,
}

/// A handle on `election`'s leader; it reads nothing until its first `next()`.
pub(super) fn observe(s: &ZkSession, election: &str) -> Result<ZkLeaderWatch, DriverError> {
    Ok(ZkLeaderWatch {
        follower: Follower::new(s)?,
        dir: election_dir(election),
        last: None,
    })
}

impl ZkLeaderWatch {
    /// The current leader, arming a child watch. `None` if the leader's node vanished
    /// between the listing and the read of its value: the armed watch fires for that.
    async fn read(&mut self) -> Result<Option<Option<LeaderView>>, DriverError> {
        let children = self.follower.children(&self.dir).await?;
        let Some(leader) = head(children.iter()).map(str::to_string) else {
            return Ok(Some(None));
        };
        drop(children);
        let zk = self.follower.client()?;
        self.follower.counters.request();
        match zk.get_data(&format!("{}/{leader}", self.dir)).await {
            Ok((value, stat)) => Ok(Some(Some(LeaderView {
                token: stat.czxid,
                value,
            }))),
            Err(Error::NoNode) => Ok(None),
            Err(e) => Err(map_error(e)),
        }
    }
}

#[async_trait]
impl LeaderWatch for ZkLeaderWatch {
    async fn next(&mut self) -> Result<Option<LeaderView>, DriverError> {
        loop {
            self.follower.wait("a leader change").await?;
            let Some(leader) = self.read().await? else {
                continue;
            };
            if self.last.as_ref() != Some(&leader) {
                self.last = Some(leader.clone());
                return Ok(leader);
            }
        }
    }
}
