//! What the clients of a partitioned minority see: a client connected to one minority
//! member alone (the isolated leader, where it is in the minority) keeps writing and reading
//! locally while the partition lasts, and counts the writes the member acknowledged (a
//! minority must acknowledge none: each is a lost-quorum write, a finding) and the local
//! (serializable) reads it was served.
//!
//! Writes and reads run on two sessions of their own: ZooKeeper answers a session's
//! requests in order, so a read behind an unanswerable write would never be served.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coordbench_drivers::{Consistency, Coordinator, Session, SessionOptions};
use tokio_util::sync::CancellationToken;

use crate::targets;
use coordbench_results::kinds::{TargetKind, ZkClientArg};

/// Each session issues at most one request per period (100 Hz, like the probe writes).
const PERIOD: Duration = Duration::from_millis(10);
/// A request slower than this is abandoned and the next one issued.
const TIMEOUT: Duration = Duration::from_millis(250);
/// Bound on connecting to the member and opening the two sessions (before the partition).
const CONNECT: Duration = Duration::from_secs(5);
const KEY: &str = "/coordbench/failover-minority";

/// How to reach one member of the cluster under test with the run's own driver.
#[derive(Clone)]
pub struct MemberClient {
    pub kind: TargetKind,
    pub zk_client: ZkClientArg,
    pub zk_access: coordbench_drivers::zookeeper::ZkAccess,
    /// etcd API targets: the run's TLS and user.
    pub etcd_security: coordbench_drivers::etcd::EtcdSecurity,
}

/// The two sessions on one minority member, opened while the cluster is still whole.
pub struct MinorityClient {
    coordinator: Arc<dyn Coordinator>,
    writer: Box<dyn Session>,
    reader: Box<dyn Session>,
}

/// What the minority's client was served while the partition lasted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinorityCounts {
    pub acked_writes: u64,
    pub local_reads: u64,
}

/// The counts, and whether counting has ended (so nothing is counted after the heal).
type Tally = Arc<Mutex<(bool, MinorityCounts)>>;

impl MinorityClient {
    /// Connects to `endpoint` alone and opens the sessions (a ZooKeeper session needs the
    /// quorum, so this must happen before the partition).
    pub async fn open(how: &MemberClient, endpoint: &str) -> Result<Self, String> {
        let opened = async {
            let coordinator = targets::connect(
                how.kind,
                how.zk_client,
                &how.zk_access,
                &how.etcd_security,
                vec![endpoint.to_string()],
                1,
                false,
            )
            .await
            .map_err(|e| format!("{e:#}"))?;
            let options = SessionOptions {
                ttl: Duration::from_secs(10),
            };
            // Client numbers far from the workload's and the probes' (`usize::MAX - i`).
            let open = |client: usize| coordinator.open_session(client, &options);
            let writer = open(usize::MAX - 100).await.map_err(|e| e.to_string())?;
            let reader = open(usize::MAX - 101).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(MinorityClient {
                coordinator: coordinator.clone(),
                writer,
                reader,
            })
        };
        tokio::time::timeout(CONNECT, opened)
            .await
            .map_err(|_| format!("connecting to {endpoint} took over {CONNECT:?}"))?
            .map_err(|e| format!("a client of {endpoint} alone: {e}"))
    }

    /// Starts writing and reading (call as the partition begins).
    pub fn start(self) -> RunningMinorityClient {
        let stop = CancellationToken::new();
        let tally: Tally = Arc::default();
        let MinorityClient {
            coordinator,
            writer,
            reader,
        } = self;
        for (session, write) in [(writer, true), (reader, false)] {
            // Detached: after counting stops, each task closes its session (bounded), which
            // may have to wait for the heal.
            tokio::spawn(requests(
                session,
                write,
                tally.clone(),
                stop.clone(),
                coordinator.clone(),
            ));
        }
        RunningMinorityClient { stop, tally }
    }
}

/// The client while the partition lasts.
pub struct RunningMinorityClient {
    stop: CancellationToken,
    tally: Tally,
}

impl RunningMinorityClient {
    /// Ends counting at once (requests in flight are abandoned) and returns the counts.
    /// Call just before healing.
    pub fn stop(self) -> MinorityCounts {
        self.stop.cancel();
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.0 = true;
        tally.1
    }
}

async fn requests(
    mut session: Box<dyn Session>,
    write: bool,
    tally: Tally,
    stop: CancellationToken,
    // Held until the session is closed: the session lives on the coordinator's connection.
    _coordinator: Arc<dyn Coordinator>,
) {
    let mut next = tokio::time::Instant::now();
    while !stop.is_cancelled() {
        let served = tokio::select! {
            r = tokio::time::timeout(TIMEOUT, request(session.as_mut(), write)) => {
                matches!(r, Ok(true))
            }
            _ = stop.cancelled() => break,
        };
        if served {
            let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
            if !tally.0 {
                let counts = &mut tally.1;
                *if write {
                    &mut counts.acked_writes
                } else {
                    &mut counts.local_reads
                } += 1;
            }
        }
        next = (next + PERIOD).max(tokio::time::Instant::now());
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = stop.cancelled() => break,
        }
    }
    let _ = tokio::time::timeout(TIMEOUT, session.close()).await;
}

/// One put or one local get; true if the member answered it successfully.
async fn request(session: &mut dyn Session, write: bool) -> bool {
    if write {
        session.put(KEY, b"minority").await.is_ok()
    } else {
        session.get(KEY, Consistency::Serializable).await.is_ok()
    }
}
