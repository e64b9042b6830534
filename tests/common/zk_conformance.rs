//! ZooKeeper-protocol conformance bodies shared by real ZooKeeper (tests/zookeeper_driver.rs)
//! and the built-in Zab engine (tests/zab_target.rs): kv round trip, the lock workload with
//! both recipes, session-expiry handover, the herd check, and the election, discovery and
//! value-watch bodies of [`recipes`] as ZooKeeper runs them. Each body takes a driver
//! connected to the whole cluster (and the client endpoints where it needs single members).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordbench_drivers::zookeeper::{ZkConfig, ZkCoordinator};
use coordbench_drivers::{Consistency, Coordinator, LockRecipe};
use coordbench_workloads::kv::{KvOp, KvOptions, KvWorkload};
use coordbench_workloads::lock::{LockOptions, LockWorkload};
use coordbench_workloads::RunClock;

use super::herd::{self, LockQueue};
use super::recipes;
use super::{closed_plan, open_session, run_plan, within, Percentiles, CONNECT_TIMEOUT, LONG_TTL};

pub const RECIPES: [LockRecipe; 2] = [LockRecipe::HerdFree, LockRecipe::Naive];
pub const WAITERS: usize = 16;

/// Connects the ZooKeeper driver to `endpoints`.
pub async fn connect_zk(endpoints: Vec<String>) -> Arc<dyn Coordinator> {
    let config = ZkConfig {
        endpoints,
        connect_timeout: CONNECT_TIMEOUT,
        access: Default::default(),
    };
    let c = within(
        Duration::from_secs(10),
        "connecting",
        ZkCoordinator::connect(&config),
    )
    .await
    .unwrap_or_else(|e| panic!("connecting to ZooKeeper: {e}"));
    Arc::new(c)
}

/// Writes through the first server, reads through the last: a linearizable read sees the
/// write, and so does a later serializable read on the same session; a missing key is None.
pub async fn kv_round_trip(endpoints: &[String]) {
    let first = connect_zk(endpoints[..1].to_vec()).await;
    let last = connect_zk(endpoints[endpoints.len() - 1..].to_vec()).await;
    let mut w = open_session(first.as_ref(), 0, LONG_TTL).await;
    let mut r = open_session(last.as_ref(), 1, LONG_TTL).await;
    let key = "/coordbench/kv/round-trip";
    w.put(key, b"v1")
        .await
        .expect("first put creates the znode");
    w.put(key, b"v2").await.expect("second put sets its data");
    assert_eq!(
        r.get(key, Consistency::Linearizable)
            .await
            .expect("linearizable get")
            .as_deref(),
        Some(&b"v2"[..])
    );
    assert_eq!(
        r.get(key, Consistency::Sync)
            .await
            .expect("sync then get")
            .as_deref(),
        Some(&b"v2"[..])
    );
    assert_eq!(
        r.get(key, Consistency::Serializable)
            .await
            .expect("serializable get")
            .as_deref(),
        Some(&b"v2"[..])
    );
    for c in [
        Consistency::Linearizable,
        Consistency::Sync,
        Consistency::Serializable,
    ] {
        assert_eq!(
            r.get("/coordbench/kv/missing", c)
                .await
                .expect("get of a missing key"),
            None
        );
    }
    assert!(
        w.counters().requests >= 3 && r.counters().requests >= 6,
        "{:?} {:?}",
        w.counters(),
        r.counters()
    );
    w.close().await.expect("close writer");
    r.close().await.expect("close reader");
}

/// kv-get through the runner: setup writes the keys, 4 clients read them linearizably.
pub async fn kv_get_through_the_runner(c: Arc<dyn Coordinator>) {
    let workload = Arc::new(
        KvWorkload::new(KvOptions {
            op: KvOp::Get(Consistency::Linearizable),
            keys: 50,
            value_size: 64,
            seed: 1,
        })
        .expect("kv workload"),
    );
    let plan = closed_plan(4, Duration::ZERO, Duration::from_secs(1));
    let outcome = run_plan(&plan, c, workload, RunClock::start()).await;
    assert!(
        outcome.total.ops > 0 && outcome.total.errors_total() == 0,
        "{:?}",
        outcome.total.errors
    );
}

/// The lock workload through the runner, 8 clients on one lock, each recipe: sections,
/// no overlap, increasing fencing tokens, no errors.
pub async fn lock_workload_is_safe(c: Arc<dyn Coordinator>) {
    for recipe in RECIPES {
        let clock = RunClock::start();
        let options = LockOptions {
            locks: 1,
            hold: Duration::ZERO,
            recipe,
            session_ttl: Duration::from_secs(2),
        };
        let workload = Arc::new(LockWorkload::new(options, clock).expect("lock workload"));
        let plan = closed_plan(8, Duration::from_millis(300), Duration::from_secs(2));
        let outcome = run_plan(&plan, c.clone(), workload.clone(), clock).await;
        let check = outcome.check.lock.as_ref().expect("a lock check");
        assert!(
            check.sections > 0 && outcome.total.ops > 0,
            "{recipe:?}: no acquisition"
        );
        assert_eq!(
            (check.violations, check.token_regressions),
            (0, 0),
            "{recipe:?}"
        );
        assert_eq!(
            outcome.total.errors_total(),
            0,
            "{recipe:?}: errors {:?}",
            outcome.total.errors
        );
        Percentiles::of(&outcome.total.latency).assert_ordered();
        let clients: BTreeSet<usize> = workload.sections().iter().map(|s| s.client).collect();
        assert!(
            clients.len() > 1,
            "{recipe:?}: only clients {clients:?} held the lock"
        );
        eprintln!(
            "{recipe:?}: {} acquisitions in {:?}, {:.1} requests/op",
            outcome.total.ops,
            outcome.window,
            outcome.counters.requests as f64 / outcome.total.ops as f64
        );
    }
}

/// A holds the lock and abandons its session; B, already waiting, gets the lock when the
/// server expires A's session: not at once (more than a third of the TTL: a closed session
/// would release at once), and within TTL + `slack`. Both recipes concurrently.
pub async fn abandoned_holder_hands_over(c: Arc<dyn Coordinator>, ttl: Duration, slack: Duration) {
    let [a, b] = RECIPES.map(|recipe| recipes::expiry_handover(c.clone(), recipe, ttl));
    let (da, db) = tokio::join!(a, b);
    eprintln!("handover after abandon (TTL {ttl:?}): zk-recipe {da:?}, naive {db:?}");
    for waited in [da, db] {
        assert!(
            waited > ttl / 3,
            "the lock was freed {waited:?} after the abandon: not by expiry"
        );
        assert!(
            waited <= ttl + slack,
            "the lock was freed only {waited:?} after the abandon"
        );
    }
}

/// 16 waiters queue behind a holder; its release notifies exactly one waiter under
/// zk-recipe and every waiter under naive (the herd).
pub async fn release_wakes_one_or_the_herd(c: Arc<dyn Coordinator>) {
    for recipe in RECIPES {
        let queue = LockQueue {
            name: format!("herd-{recipe:?}-{}", std::process::id()),
            recipe,
        };
        let outcome = herd::one_release(c.clone(), queue, WAITERS).await;
        let notified = &outcome.notified;
        eprintln!("{recipe:?}: notifications per waiter after one release: {notified:?}");
        herd::assert_herd_matches(recipe, &outcome);
        let total: u64 = notified.iter().sum();
        match recipe {
            LockRecipe::HerdFree => assert_eq!(total, 1, "zk-recipe woke {notified:?}"),
            LockRecipe::Naive => assert!(total <= 2 * WAITERS as u64, "naive: {notified:?}"),
            other => panic!("{other:?} is not a ZooKeeper recipe"),
        }
    }
}

/// Connects the ZooKeeper driver to `endpoints`, `None` if that fails within 2 s (for
/// polling a member that is still starting).
pub async fn connect_zk_quiet(endpoints: Vec<String>) -> Option<Arc<dyn Coordinator>> {
    let config = ZkConfig {
        endpoints,
        connect_timeout: Duration::from_secs(1),
        access: Default::default(),
    };
    match tokio::time::timeout(Duration::from_secs(2), ZkCoordinator::connect(&config)).await {
        Ok(Ok(c)) => Some(Arc::new(c)),
        _ => None,
    }
}

/// The election and value-watch bodies (tests/common/recipes.rs) on one connected
/// ZooKeeper-protocol target: election handover with both recipes, a cancelled campaign's
/// cleanup, a value watch (one-shot watches coalesce) and 2000 value watches on one key over
/// 4 sessions. (Discovery needs a short TTL: its body runs with the expiry tests.)
pub async fn elections_and_value_watches(c: Arc<dyn Coordinator>) {
    let started = Instant::now();
    for recipe in RECIPES {
        recipes::election_hands_over_one_at_a_time(c.clone(), recipe).await;
        cancelled_campaign_leaves_no_candidate(c.clone(), recipe).await;
    }
    recipes::value_watch_follows_writes(c.clone(), 200, recipes::Delivery::Coalesced).await;
    recipes::many_value_watches_all_notified(c, 2000, 1, 4).await;
    eprintln!("elections and value watches took {:?}", started.elapsed());
}

/// One resignation wakes every candidate under naive and only the next under zk-recipe.
pub async fn election_herd(c: Arc<dyn Coordinator>) {
    for recipe in RECIPES {
        recipes::resignation_notifies_herd_only_with_naive(c.clone(), recipe).await;
    }
}

/// B's campaign is cancelled while A leads, leaving B's candidate node behind; C queues
/// after it. B's next call removes that node, so when A resigns C leads, as an observer
/// sees, rather than the queue waiting on B, who stopped waiting.
pub async fn cancelled_campaign_leaves_no_candidate(c: Arc<dyn Coordinator>, recipe: LockRecipe) {
    let step = Duration::from_secs(5);
    let election = format!("cancelled-{recipe:?}-{}", std::process::id()).to_lowercase();
    let mut a = open_session(c.as_ref(), 600, LONG_TTL).await;
    let mut b = open_session(c.as_ref(), 601, LONG_TTL).await;
    let mut c_session = open_session(c.as_ref(), 602, LONG_TTL).await;
    let mut o = open_session(c.as_ref(), 603, LONG_TTL).await;
    let led = within(step, "A's campaign", a.campaign(&election, b"a", recipe))
        .await
        .expect("A leads");
    let cancelled = tokio::time::timeout(
        Duration::from_millis(300),
        b.campaign(&election, b"b", recipe),
    )
    .await;
    assert!(cancelled.is_err(), "{recipe:?}: B led while A leads");
    let c_election = election.clone();
    let waiter = tokio::spawn(async move {
        let r = c_session.campaign(&c_election, b"c", recipe).await;
        (c_session, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "{recipe:?}: C led while A leads");

    // Any later recipe call of B's session removes its abandoned candidate.
    let service = format!("after-cancel-{recipe:?}").to_lowercase();
    let registration = within(step, "B's next call", b.register(&service, "b", b""))
        .await
        .expect("B registers");
    within(step, "A's resignation", a.resign(led))
        .await
        .expect("A resigns");
    let (mut c_session, c_led) = within(step, "C's leadership", waiter)
        .await
        .expect("C's task");
    let c_led = c_led.expect("C leads");
    let mut observer = within(step, "observe", o.observe(&election))
        .await
        .expect("observe");
    let leader = within(step, "the observer's view", observer.next())
        .await
        .expect("the observer's view")
        .expect("a leader");
    assert_eq!((leader.token, &leader.value[..]), (c_led.token, &b"c"[..]));
    within(step, "C's resignation", c_session.resign(c_led))
        .await
        .expect("C resigns");
    let after = within(step, "the observer's next view", observer.next())
        .await
        .expect("the observer's next view");
    assert_eq!(after, None, "{recipe:?}: a leader after everyone resigned");
    b.deregister(registration).await.expect("B deregisters");
    drop(observer);
    for mut s in [a, b, c_session, o] {
        s.close().await.expect("close");
    }
}
