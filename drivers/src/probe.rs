//! Liveness probes of independent servers (redis instances, the postgres server): fault
//! injection asks every member every few milliseconds whether it answers, so a probe keeps
//! one connection and reconnects only after it failed, rather than connect per question.

use async_trait::async_trait;

/// Asks one server whether it answers.
#[async_trait]
pub trait Probe: Send {
    /// True if the server answered a trivial request (PING, `SELECT 1`). The caller bounds
    /// the wait.
    async fn ping(&mut self) -> bool;
}
