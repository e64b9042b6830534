//! Every member's latest answer to "who leads?", kept fresh in the background: one task per
//! member asks it every 5 ms ([`POLL`]) and stores the answer, or `None` once a request
//! went unanswered for [`ANSWER`]. A member that does not answer (paused, cut off, killed)
//! therefore delays only its own slot, never the others'; readers take a snapshot of all
//! slots whenever they look.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::leadership::{Asker, MemberView};

/// How often each member is asked.
pub const POLL: Duration = Duration::from_millis(5);
/// One answer must come within this, or the member counts as silent until it answers.
pub const ANSWER: Duration = Duration::from_millis(200);

/// The members' latest answers, in member order.
pub struct MemberViews {
    latest: Arc<Mutex<Vec<Option<MemberView>>>>,
    stop: CancellationToken,
    tasks: JoinSet<()>,
}

impl MemberViews {
    /// Starts one poller per asker. Must be called inside a tokio runtime.
    pub fn start(askers: Vec<Asker>) -> Self {
        let latest = Arc::new(Mutex::new(vec![None; askers.len()]));
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        for (i, asker) in askers.into_iter().enumerate() {
            tasks.spawn(poll_member(i, asker, latest.clone(), stop.clone()));
        }
        MemberViews {
            latest,
            stop,
            tasks,
        }
    }

    /// A snapshot of every member's latest answer.
    pub fn latest(&self) -> Vec<Option<MemberView>> {
        self.latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

async fn poll_member(
    i: usize,
    mut asker: Asker,
    latest: Arc<Mutex<Vec<Option<MemberView>>>>,
    stop: CancellationToken,
) {
    loop {
        let next = tokio::time::Instant::now() + POLL;
        let view = tokio::select! {
            v = asker.ask(ANSWER) => v,
            _ = stop.cancelled() => return,
        };
        latest.lock().unwrap_or_else(PoisonError::into_inner)[i] = view;
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = stop.cancelled() => return,
        }
    }
}
