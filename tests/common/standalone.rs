//! Test bodies for the lock targets without a coordination service (redis, postgres),
//! through the driver seam: clients cycling on one lock with every critical section
//! checked for overlaps and token order, and the handover after a crashed holder.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coordbench_drivers::{Coordinator, LockRecipe, SessionOptions};

/// One critical section: its token and when it began and ended.
#[derive(Debug, Clone, Copy)]
struct Section {
    token: i64,
    entered: Instant,
    left: Instant,
}

/// `clients` sessions take lock `name` with `recipe` `rounds` times each, holding it for a
/// millisecond; asserts no two sections overlapped and tokens strictly increased in the
/// order the sections began. Returns the sections seen.
pub async fn no_overlaps_and_increasing_tokens(
    coordinator: Arc<dyn Coordinator>,
    recipe: LockRecipe,
    clients: usize,
    rounds: usize,
) -> usize {
    let sections = Arc::new(Mutex::new(Vec::new()));
    let options = SessionOptions {
        ttl: Duration::from_secs(5),
    };
    let mut tasks = Vec::new();
    for c in 0..clients {
        let mut session = coordinator
            .open_session(c, &options)
            .await
            .expect("session");
        let sections = Arc::clone(&sections);
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let guard = session.lock("l", recipe).await.expect("lock");
                let entered = Instant::now();
                tokio::time::sleep(Duration::from_millis(1)).await;
                let left = Instant::now();
                let token = guard.token;
                session.unlock(guard).await.expect("unlock");
                sections.lock().unwrap().push(Section {
                    token,
                    entered,
                    left,
                });
            }
            session.close().await.expect("close");
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    let mut sections = sections.lock().unwrap().clone();
    sections.sort_by_key(|s| s.entered);
    for pair in sections.windows(2) {
        assert!(
            pair[0].left <= pair[1].entered,
            "{recipe:?}: overlapping sections {pair:?}"
        );
        assert!(
            pair[0].token < pair[1].token,
            "{recipe:?}: tokens not increasing {pair:?}"
        );
    }
    sections.len()
}

/// A holder crashes (abandons its session while holding the lock); returns how long the
/// next client waited for it, from the crash.
pub async fn handover_after_crash(
    coordinator: Arc<dyn Coordinator>,
    recipe: LockRecipe,
    ttl: Duration,
) -> Duration {
    let options = SessionOptions { ttl };
    let mut holder = coordinator
        .open_session(0, &options)
        .await
        .expect("session");
    let mut next = coordinator
        .open_session(1, &options)
        .await
        .expect("session");
    let first = holder.lock("crash", recipe).await.expect("lock");
    let crashed = Instant::now();
    holder.abandon();
    let second = tokio::time::timeout(ttl * 3, next.lock("crash", recipe))
        .await
        .expect("the lock passes on within 3 TTLs")
        .expect("lock");
    let waited = crashed.elapsed();
    assert!(second.token > first.token, "{first:?} then {second:?}");
    next.unlock(second).await.expect("unlock");
    waited
}
