//! Target-neutral bodies for lock expiry, leader election, service discovery and value watches, written
//! against the driver seam only, so the same body runs on etcd, the Raft engine, ZooKeeper
//! and the Zab engine. Each takes a connected coordinator and uses names unique to its call,
//! so bodies can share one cluster; each stays within about 10 s.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coordbench_drivers::{Coordinator, LockRecipe, MembersWatch, ValueWatch};
use futures::future::join_all;

use super::herd::{self, ElectionQueue};
use super::{open_session, open_sessions, within, LONG_TTL};

/// How long one step (an RPC, a notification) may take on a loaded 2-core machine.
const STEP: Duration = Duration::from_secs(5);

/// A name unique to this test process and call.
fn unique(what: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

const NO_LEADER: usize = usize::MAX;

/// A holds a lock with a session of `ttl` while B waits; A then stops refreshing its session
/// without releasing, as a crashed client would. Returns how long after the abandon B got
/// the lock (callers judge it against the target's expiry rule). B must not get it while A
/// holds, its fencing token must be higher, and A's late release must fail as expired.
pub async fn expiry_handover(
    c: Arc<dyn Coordinator>,
    recipe: LockRecipe,
    ttl: Duration,
) -> Duration {
    let name = unique(&format!("expiry-{recipe:?}").to_lowercase());
    let mut a = open_session(c.as_ref(), 0, ttl).await;
    let mut b = open_session(c.as_ref(), 1, LONG_TTL).await;
    let ga = within(STEP, "A's lock", a.lock(&name, recipe))
        .await
        .expect("A locks");
    let b_name = name.clone();
    let waiter = tokio::spawn(async move {
        let r = b.lock(&b_name, recipe).await;
        (b, r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "{recipe:?}: B acquired while A holds"
    );

    a.abandon();
    let abandoned = Instant::now();
    let (mut b, gb, acquired) = within(ttl * 3 + STEP, "B's lock after A's expiry", waiter)
        .await
        .expect("B's task");
    let gb = gb.unwrap_or_else(|e| panic!("{recipe:?}: B's lock failed: {e}"));
    assert!(
        gb.token > ga.token,
        "{recipe:?}: B's token {} not above A's {}",
        gb.token,
        ga.token
    );
    // A's late release must not touch B's lock.
    let late = a
        .unlock(ga)
        .await
        .expect_err("A's release after its session expired");
    assert_eq!(late.kind(), "session_expired", "{recipe:?}: {late}");
    b.unlock(gb).await.expect("B unlocks");
    b.close().await.expect("close B");
    acquired.duration_since(abandoned)
}

/// `CANDIDATES` sessions campaign at once. Leaders come one at a time (no two hold at once),
/// each leads for a while and resigns, which hands over to another candidate; leadership
/// tokens strictly increase. An observer that started before anyone campaigned sees no
/// leader first, then every leader in turn, with the value it campaigned with.
pub async fn election_hands_over_one_at_a_time(c: Arc<dyn Coordinator>, recipe: LockRecipe) {
    const CANDIDATES: usize = 4;
    // Long enough that a one-shot watch re-armed after each change sees every leader.
    const HOLD: Duration = Duration::from_millis(300);
    let election = unique(&format!("election-{recipe:?}").to_lowercase());

    let mut observer_session = open_session(c.as_ref(), 200, LONG_TTL).await;
    let mut observer = within(STEP, "observe", observer_session.observe(&election))
        .await
        .expect("observe");
    let first = within(STEP, "the observer's first view", observer.next())
        .await
        .expect("first view");
    assert_eq!(first, None, "a leader before anyone campaigned");

    let leader = Arc::new(AtomicUsize::new(NO_LEADER));
    // (candidate, token, value) in the order leaders took over.
    let won = Arc::new(Mutex::new(Vec::<(usize, i64, Vec<u8>)>::new()));
    let sessions = open_sessions(c.as_ref(), 0, CANDIDATES, LONG_TTL).await;
    let tasks: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            let (election, leader, won) = (election.clone(), leader.clone(), won.clone());
            tokio::spawn(async move {
                let value = format!("candidate-{i}").into_bytes();
                let leadership = s
                    .campaign(&election, &value, recipe)
                    .await
                    .unwrap_or_else(|e| panic!("candidate {i} campaigns: {e}"));
                let before = leader.swap(i, Ordering::SeqCst);
                assert_eq!(before, NO_LEADER, "candidate {i} leads while {before} does");
                won.lock().unwrap().push((i, leadership.token, value));
                tokio::time::sleep(HOLD).await;
                assert_eq!(leader.swap(NO_LEADER, Ordering::SeqCst), i);
                s.resign(leadership)
                    .await
                    .unwrap_or_else(|e| panic!("candidate {i} resigns: {e}"));
                s.close().await.expect("close candidate");
            })
        })
        .collect();

    // The observer follows until the last leader has resigned and nobody leads.
    let mut seen = Vec::new();
    let bound = STEP + (HOLD + STEP) * CANDIDATES as u32;
    within(bound, "the observer following every leader", async {
        loop {
            let view = observer.next().await.expect("the observer's next view");
            match view {
                Some(v) => seen.push((v.token, v.value)),
                None if seen.len() == CANDIDATES => break,
                None => panic!("no leader between leaders; seen so far {seen:?}"),
            }
        }
    })
    .await;
    for t in tasks {
        within(STEP, "a candidate's end", t)
            .await
            .expect("candidate task");
    }

    let won = won.lock().unwrap().clone();
    let mut who: Vec<usize> = won.iter().map(|w| w.0).collect();
    who.sort_unstable();
    assert_eq!(
        who,
        (0..CANDIDATES).collect::<Vec<_>>(),
        "each candidate leads once"
    );
    assert!(
        won.windows(2).all(|w| w[0].1 < w[1].1),
        "tokens do not strictly increase: {won:?}"
    );
    let expected: Vec<(i64, Vec<u8>)> = won.iter().map(|(_, t, v)| (*t, v.clone())).collect();
    assert_eq!(seen, expected, "the observer's leaders");
    observer_session.close().await.expect("close observer");
}

/// With 6 candidates queued behind a leader, one resignation notifies every candidate under
/// the naive recipe and only the next leader under the herd-free one.
pub async fn resignation_notifies_herd_only_with_naive(
    c: Arc<dyn Coordinator>,
    recipe: LockRecipe,
) {
    let queue = ElectionQueue {
        name: unique(&format!("election-herd-{recipe:?}").to_lowercase()),
        recipe,
    };
    let outcome = herd::one_release(c, queue, 6).await;
    eprintln!("{recipe:?}: notifications per candidate after one resignation {outcome:?}");
    herd::assert_herd_matches(recipe, &outcome);
}

/// Waits (calling `next`) until the membership is `expected`.
async fn until_members(watch: &mut dyn MembersWatch, expected: &[&str], bound: Duration) {
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    let mut last = None;
    let reached = tokio::time::timeout(bound, async {
        loop {
            let members = watch.next().await.expect("the members watch's next");
            if members == expected {
                return;
            }
            last = Some(members);
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "membership never became {expected:?}; last seen {last:?}"
    );
}

/// A watcher sees registrations and deregistrations; an instance registered by a session
/// with `ttl` that is then abandoned (a crashed client) disappears once the server expires
/// the session: not at once, and within `ttl + slack`.
pub async fn discovery_follows_registrations(
    c: Arc<dyn Coordinator>,
    ttl: Duration,
    slack: Duration,
) {
    let service = unique("service");
    let mut watcher = open_session(c.as_ref(), 300, LONG_TTL).await;
    let mut members = within(STEP, "watch_members", watcher.watch_members(&service))
        .await
        .expect("watch_members");
    let first = within(STEP, "the first membership", members.next())
        .await
        .expect("first membership");
    assert!(
        first.is_empty(),
        "members before anyone registered: {first:?}"
    );

    let mut a = open_session(c.as_ref(), 301, LONG_TTL).await;
    let mut b = open_session(c.as_ref(), 302, ttl).await;
    let ra = within(
        STEP,
        "register a",
        a.register(&service, "a", b"10.0.0.1:80"),
    )
    .await
    .expect("register a");
    until_members(members.as_mut(), &["a"], STEP).await;
    within(
        STEP,
        "register b",
        b.register(&service, "b", b"10.0.0.2:80"),
    )
    .await
    .expect("register b");
    until_members(members.as_mut(), &["a", "b"], STEP).await;
    within(STEP, "deregister a", a.deregister(ra))
        .await
        .expect("deregister a");
    until_members(members.as_mut(), &["b"], STEP).await;

    b.abandon();
    let abandoned = Instant::now();
    until_members(members.as_mut(), &[], ttl + slack).await;
    let gone = abandoned.elapsed();
    eprintln!("abandoned instance gone after {gone:?} (TTL {ttl:?})");
    // The session was last refreshed at most TTL/3 before the abandon.
    assert!(
        gone >= ttl / 2,
        "the abandoned instance vanished after only {gone:?}"
    );
    a.close().await.expect("close a");
    watcher.close().await.expect("close watcher");
}

/// How a value watch may report versions written faster than it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Every version, in order (etcd's watch).
    EveryVersion,
    /// Versions may be coalesced (a one-shot watch re-read after each event), but what is
    /// seen increases and the last version arrives.
    Coalesced,
}

/// A writer puts versions 1..=`versions` of a key as fast as it can while a watcher
/// follows it: the first `next` returns no value (the key is new), then versions as
/// `delivery` allows, ending with the last.
pub async fn value_watch_follows_writes(
    c: Arc<dyn Coordinator>,
    versions: u32,
    delivery: Delivery,
) {
    let key = format!("/coordbench-test/config/{}", unique("value"));
    let mut watcher = open_session(c.as_ref(), 400, LONG_TTL).await;
    let mut writer = open_session(c.as_ref(), 401, LONG_TTL).await;
    let mut watch = within(STEP, "watch_value", watcher.watch_value(&key))
        .await
        .expect("watch_value");
    let first = within(STEP, "the first value", watch.next())
        .await
        .expect("first value");
    assert_eq!(first, None, "a value before the first write");

    let write_key = key.clone();
    let writes = tokio::spawn(async move {
        for v in 1..=versions {
            writer
                .put(&write_key, v.to_string().as_bytes())
                .await
                .expect("put");
        }
        writer.close().await.expect("close writer");
    });
    let mut seen: Vec<u32> = Vec::new();
    within(STEP * 2, "the watcher reaching the last version", async {
        while seen.last() != Some(&versions) {
            let value = watch.next().await.expect("the value watch's next");
            let value = value.unwrap_or_else(|| panic!("the key vanished after {seen:?}"));
            let v = String::from_utf8(value)
                .expect("utf-8")
                .parse()
                .expect("a version");
            seen.push(v);
        }
    })
    .await;
    within(STEP, "the writer", writes)
        .await
        .expect("writer task");
    match delivery {
        Delivery::EveryVersion => {
            assert_eq!(seen, (1..=versions).collect::<Vec<_>>(), "versions seen")
        }
        Delivery::Coalesced => assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "versions seen do not increase: {seen:?}"
        ),
    }
    eprintln!(
        "value watch: {} of {versions} versions seen ({delivery:?})",
        seen.len()
    );
    watcher.close().await.expect("close watcher");
}

/// `watches` value watches over `keys` keys, spread over `sessions` sessions (as the
/// config-watch workload spreads thousands over its clients), all receive one update of
/// their key.
pub async fn many_value_watches_all_notified(
    c: Arc<dyn Coordinator>,
    watches: usize,
    keys: usize,
    sessions: usize,
) {
    let prefix = format!("/coordbench-test/config/{}", unique("many"));
    let key = |i: usize| format!("{prefix}/{}", i % keys);
    let started = Instant::now();
    let mut owners = open_sessions(c.as_ref(), 500, sessions, LONG_TTL).await;
    let mut handles: Vec<Box<dyn ValueWatch>> = Vec::with_capacity(watches);
    // Creating costs a read and a watch request per watch.
    let create_bound = Duration::from_secs(10) + Duration::from_millis(10) * watches as u32;
    within(create_bound, "creating the watches", async {
        for i in 0..watches {
            let mut w = owners[i % sessions]
                .watch_value(&key(i))
                .await
                .expect("watch_value");
            assert_eq!(
                w.next().await.expect("first value"),
                None,
                "watch {i}: a value before the write"
            );
            handles.push(w);
        }
    })
    .await;
    let created = started.elapsed();

    let mut writer = open_session(c.as_ref(), 500 + sessions, LONG_TTL).await;
    for k in 0..keys {
        writer.put(&key(k), b"updated").await.expect("put");
    }
    let values = within(
        Duration::from_secs(10),
        "every watch's update",
        join_all(handles.iter_mut().map(|w| w.next())),
    )
    .await;
    for (i, v) in values.into_iter().enumerate() {
        let v = v.unwrap_or_else(|e| panic!("watch {i}: {e}"));
        assert_eq!(v.as_deref(), Some(&b"updated"[..]), "watch {i}");
    }
    eprintln!(
        "{watches} value watches on {keys} keys over {sessions} sessions: created in {created:?}, \
         all notified after {:?}",
        started.elapsed()
    );
    drop(handles);
    writer.close().await.expect("close writer");
    for mut s in owners {
        s.close().await.expect("close owner");
    }
}

/// Every body above on one connected target, with both recipes: sessions whose expiry is
/// tested use `ttl`, and an expired instance must be gone within `ttl + slack`. Discovery
/// waits out a TTL, so it runs alongside the others.
pub async fn all(c: Arc<dyn Coordinator>, ttl: Duration, slack: Duration, delivery: Delivery) {
    let others = async {
        for recipe in [LockRecipe::HerdFree, LockRecipe::Naive] {
            election_hands_over_one_at_a_time(c.clone(), recipe).await;
            resignation_notifies_herd_only_with_naive(c.clone(), recipe).await;
        }
        value_watch_follows_writes(c.clone(), 50, delivery).await;
        many_value_watches_all_notified(c.clone(), 500, 20, 4).await;
    };
    tokio::join!(
        discovery_follows_registrations(c.clone(), ttl, slack),
        others
    );
}
