//! The intended start of the operation a task is running, as the load generator's
//! open-loop schedule set it (`runner::client_loop` runs every operation inside
//! [`at_intended_start`] when the coordinator `books_intended_start`). The null target's service-time model books requests at it, so
//! that the generator's own stalls on a loaded machine do not arrive at its virtual
//! servers as bursts; real targets never see it.

use std::future::Future;
use std::time::Instant;

tokio::task_local! {
    static INTENDED_START: Instant;
}

/// Runs `op` with `intended` as its intended start.
pub fn at_intended_start<F: Future>(
    intended: Instant,
    op: F,
) -> tokio::task::futures::TaskLocalFuture<Instant, F> {
    INTENDED_START.scope(intended, op)
}

/// The intended start of the running operation, if the task runs one.
pub fn intended_start() -> Option<Instant> {
    INTENDED_START.try_with(|t| *t).ok()
}
