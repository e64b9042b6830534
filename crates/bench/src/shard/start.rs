//! A common start for the shards of a run, without a coordinator of our own: wait for a
//! wall-clock time (`--start-at`), or meet at the target (`--rendezvous`): every shard
//! registers `shard-I` under the run id's rendezvous group (a leased key on the etcd API,
//! an ephemeral znode on ZooKeeper: the discovery seam every such driver has), follows the
//! group, and starts the moment it sees all N. A shard keeps its registration until its run
//! ends, so one that is slower to see the group complete still sees it complete.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use coordbench_drivers::{Coordinator, DriverError, Session, SessionOptions};

use super::{Part, StartRule};

/// The client number of a shard's rendezvous session (drivers spread sessions by it).
const RENDEZVOUS_CLIENT: usize = 300_000;

/// How a shard's start went.
pub struct Started {
    /// From the start of the wait until the start.
    pub waited: Duration,
    /// The rendezvous session, registered until the run ends (close it then).
    pub held: Option<Box<dyn Session>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("rendezvous of run {run_id} timed out after {waited_s:.1} s: shard(s) {missing} of {count} never arrived (start them with --run-id {run_id} and --shard I/{count}, or raise --rendezvous-timeout)")]
    Timeout {
        run_id: String,
        count: usize,
        missing: String,
        waited_s: f64,
    },
    #[error("rendezvous through the target failed: {0}")]
    Driver(#[from] DriverError),
}

/// Waits until the run may start, as `rule` says.
pub async fn wait_for_start(
    rule: &StartRule,
    coordinator: &Arc<dyn Coordinator>,
    ttl: Duration,
) -> Result<Started, StartError> {
    let began = Instant::now();
    let held = match rule {
        StartRule::Now => None,
        StartRule::At(at) => {
            let until = at.duration_since(SystemTime::now()).unwrap_or_default();
            tokio::time::sleep(until).await;
            None
        }
        StartRule::Rendezvous {
            run_id,
            part,
            timeout,
        } => Some(rendezvous(run_id, *part, *timeout, coordinator, ttl).await?),
    };
    Ok(Started {
        waited: began.elapsed(),
        held,
    })
}

async fn rendezvous(
    run_id: &str,
    part: Part,
    timeout: Duration,
    coordinator: &Arc<dyn Coordinator>,
    ttl: Duration,
) -> Result<Box<dyn Session>, StartError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let group = format!("rendezvous-{run_id}");
    let options = SessionOptions { ttl };
    let mut session = coordinator
        .open_session(RENDEZVOUS_CLIENT + part.index, &options)
        .await?;
    session
        .register(&group, &format!("shard-{}", part.index), b"")
        .await?;
    let mut watch = session.watch_members(&group).await?;
    let mut arrived = BTreeSet::new();
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(members) => arrived = shards_in(&members?),
            Err(_) => break,
        }
        if (0..part.count).all(|i| arrived.contains(&i)) {
            drop(watch);
            return Ok(session);
        }
    }
    drop(watch);
    // Best effort: the lease or session expires anyway.
    let _ = session.close().await;
    let missing: Vec<String> = (0..part.count)
        .filter(|i| !arrived.contains(i))
        .map(|i| i.to_string())
        .collect();
    Err(StartError::Timeout {
        run_id: run_id.to_string(),
        count: part.count,
        missing: missing.join(", "),
        waited_s: timeout.as_secs_f64(),
    })
}

/// The shard numbers among a rendezvous group's members.
fn shards_in(members: &BTreeSet<String>) -> BTreeSet<usize> {
    members
        .iter()
        .filter_map(|m| m.strip_prefix("shard-")?.parse().ok())
        .collect()
}
