//! Filling the store before a window: the kv workloads' keys (`kv::key_name`), written in
//! batches by a few concurrent writer sessions, so that a run can measure a store holding
//! N keys (`--preload-keys`) and a kv workload starts from its keys in place.
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
                    session.put(&key_name(i), &value).await?;
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
