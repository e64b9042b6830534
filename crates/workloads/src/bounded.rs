//! Running many setup steps that each open a session (watchers' sessions, preload's
//! registered sessions) a bounded number at a time, so none waits behind all the others and
//! misses its driver's connect timeout (the runner opens the clients' own sessions the
//! same way, at `--session-opens`).

use std::future::Future;

use futures::{StreamExt, TryStreamExt};

/// Sessions a workload's setup opens at once; also the default of `--session-opens`.
pub const AT_ONCE: usize = 256;

/// Runs `steps` with at most `at_once` in flight; their results in the order given, or the
/// first error (the steps still in flight are dropped).
pub async fn at_most<T, E, F>(
    steps: impl IntoIterator<Item = F>,
    at_once: usize,
) -> Result<Vec<T>, E>
where
    F: Future<Output = Result<T, E>>,
{
    futures::stream::iter(steps)
        .buffered(at_once.max(1))
        .try_collect()
        .await
}
