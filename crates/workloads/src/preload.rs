//! State put in place before a window: the kv workloads' keys (`kv::key_name`), written in
//! batches by a few concurrent writer sessions, so that a run can measure a store holding
//! N keys (`--preload-keys`) and a kv workload starts from its keys in place; and idle
//! watchers and sessions ([`Held`]) that the server keeps while the window runs.
//!
//! Writers claim batches of consecutive keys from a shared counter and write each batch's
//! keys in order; `on_batch` hears every finished batch (a progress bar counts them).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coordbench_drivers::{Coordinator, DriverError, SessionOptions};
use futures::future::try_join_all;

use crate::kv::key_name;
use crate::WorkloadError;

/// How a store is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    /// Concurrent writer sessions.
    pub writers: usize,
    /// Keys a writer claims at a time.
    pub batch: usize,
}

/// `--preload-keys`: enough writers to keep a cluster's pipeline full.
pub const PRELOAD: Fill = Fill {
    writers: 32,
    batch: 500,
};

/// Writes `value` under `key_name(i)` for every `i` in `keys`; `on_batch(n)` after each
/// batch of `n` keys is acknowledged.
pub async fn fill_keys(
    coordinator: &Arc<dyn Coordinator>,
    keys: Range<usize>,
    value: Arc<Vec<u8>>,
    fill: Fill,
    on_batch: &(dyn Fn(usize) + Sync),
) -> Result<(), WorkloadError> {
    let batch = fill.batch.max(1);
    let batches = keys.len().div_ceil(batch);
    let writers = fill.writers.max(1).min(batches);
    let next = AtomicUsize::new(0);
    let options = SessionOptions {
        ttl: Duration::from_secs(10),
    };
    let writer = |w: usize| {
        let (next, value, keys, options) = (&next, value.clone(), keys.clone(), &options);
        async move {
            let mut session = coordinator.open_session(w, options).await?;
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= batches {
                    break;
                }
                let from = keys.start + b * batch;
                let to = (from + batch).min(keys.end);
                for i in from..to {
                    fill_one(&mut *session, &key_name(i), &value).await?;
                }
                on_batch(to - from);
            }
            session.close().await
        }
    };
    try_join_all((0..writers).map(writer))
        .await
        .map_err(|e: DriverError| WorkloadError::Setup(e))?;
    Ok(())
}

/// Writes one key of a fill. The keys are new on a store coordbench started, so a create
/// comes first: on ZooKeeper a put is a setData that fails before the create, two writes
/// through the quorum. A key that exists (a store used before) is refused as a server error,
/// and then put.
async fn fill_one(
    session: &mut dyn coordbench_drivers::Session,
    key: &str,
    value: &[u8],
) -> Result<(), DriverError> {
    match session.create(key, value).await {
        Err(DriverError::Server(_)) => session.put(key, value).await,
        done => done,
    }
}

/// State a run holds open beside its clients for as long as its cluster runs: idle
/// watchers on the kv keys and idle sessions, each with a lease or ephemeral node
/// (`--preload-watchers`, `--preload-sessions`).
#[derive(Default)]
pub struct Held {
    sessions: Vec<Box<dyn coordbench_drivers::Session>>,
    watches: Vec<Box<dyn coordbench_drivers::ValueWatch>>,
}

/// Watchers share a session (and its connection or watch stream) this many at a time.
pub const WATCHERS_PER_SESSION: usize = 100;

/// Where held sessions register themselves (each one a lease or ephemeral node).
pub const SESSIONS_SERVICE: &str = "coordbench-preload-sessions";

impl Held {
    /// Opens `watchers` value watches on `key_name(i % keys)`, [`WATCHERS_PER_SESSION`] to
    /// a session, and `sessions` sessions that each register one instance (a lease with a
    /// key on the etcd API, an ephemeral node on ZooKeeper's).
    pub async fn open(
        coordinator: &Arc<dyn Coordinator>,
        watchers: usize,
        keys: usize,
        sessions: usize,
    ) -> Result<Held, WorkloadError> {
        let mut held = Held::default();
        let options = SessionOptions {
            ttl: Duration::from_secs(10),
        };
        for first in (0..watchers).step_by(WATCHERS_PER_SESSION) {
            let mut session = coordinator
                .open_session(first, &options)
                .await
                .map_err(WorkloadError::Setup)?;
            for i in first..(first + WATCHERS_PER_SESSION).min(watchers) {
                let mut watch = session
                    .watch_value(&key_name(i % keys.max(1)))
                    .await
                    .map_err(WorkloadError::Setup)?;
                // The first call arms the watch and reads the current value.
                watch.next().await.map_err(WorkloadError::Setup)?;
                held.watches.push(watch);
            }
            held.sessions.push(session);
        }
        let opened = crate::bounded::at_most(
            (0..sessions).map(|i| {
                let options = &options;
                async move {
                    let mut session = coordinator.open_session(i, options).await?;
                    session
                        .register(SESSIONS_SERVICE, &format!("s{i:07}"), b"")
                        .await?;
                    Ok::<_, DriverError>(session)
                }
            }),
            crate::bounded::AT_ONCE,
        )
        .await
        .map_err(WorkloadError::Setup)?;
        held.sessions.extend(opened);
        Ok(held)
    }

    /// Drops the watches and closes the sessions, within `bound`.
    pub async fn close(mut self, bound: Duration) {
        self.watches.clear();
        let close = futures::future::join_all(self.sessions.iter_mut().map(|s| s.close()));
        let _ = tokio::time::timeout(bound, close).await;
    }
}
