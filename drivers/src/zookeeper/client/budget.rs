//! A process-wide bound on the listings (getChildren replies) in flight at once.
//!
//! A listing is read into a buffer of its own size and lives until its caller has used it
//! (a recipe, until it has found its predecessor). With 10,000 lock contenders each
//! answered with a 350 KB listing, a saturated generator had read 4,800 of them ahead of
//! the tasks that would use them: 1.7 GB. So a listing is asked for only once fewer than
//! [`LISTINGS`] are in flight or held; the rest wait in the client before they are sent, and
//! the wait counts in their operation's latency like any other delay of a saturated
//! generator. Bounding the bytes read instead would move the backlog into the servers' send
//! queues (the Zab engine's grew to 2.4 GB) and stall the pings behind it.

use tokio::sync::{Semaphore, SemaphorePermit};

/// Listings in flight or held at once, process-wide.
const LISTINGS: usize = 256;

static IN_FLIGHT: Semaphore = Semaphore::const_new(LISTINGS);

/// A place for one listing, held as long as the listing ([`super::Names`]) lives.
pub(super) async fn listing() -> Option<SemaphorePermit<'static>> {
    // The semaphore is never closed, so acquiring only waits.
    IN_FLIGHT.acquire().await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_place_is_held_until_dropped() {
        let before = IN_FLIGHT.available_permits();
        let place = listing().await.expect("a place");
        assert_eq!(IN_FLIGHT.available_permits(), before - 1);
        drop(place);
        assert_eq!(IN_FLIGHT.available_permits(), before);
    }
}
