//! Test bodies every target must pass, written against the driver seam only. A test file
//! per target calls them with its [`TargetKind`] (see tests/etcd_driver.rs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use coordbench_drivers::{Consistency, Coordinator, LockRecipe, ValueWatch};
use coordbench_workloads::kv::{KvOp, KvOptions, KvWorkload};
use coordbench_workloads::lock::{LockOptions, LockWorkload};
use coordbench_workloads::RunClock;

use super::herd::{self, LockQueue};
use super::recipes;
use super::{
    closed_plan, open_session, open_sessions, run_plan, start_target, within, Percentiles,
    TargetKind, LONG_TTL,
};

pub const RECIPES: [LockRecipe; 2] = [LockRecipe::HerdFree, LockRecipe::Naive];

/// A key or lock name unique to this call, so bodies sharing a cluster do not meet.
fn unique(prefix: &str, recipe: LockRecipe) -> String {
    format!("{prefix}-{recipe:?}").to_lowercase()
}

/// Put, then linearizable and serializable reads return the value, from every member; then
/// the kv-put workload through the runner measures something sensible.
pub async fn kv_round_trip_and_put_workload(kind: TargetKind, size: usize) {
    let target = start_target(kind, size).await;
    let c = target.coordinator.as_ref();

    let mut s = open_session(c, 0, LONG_TTL).await;
    let key = "/coordbench-test/kv/round-trip";
    within(Duration::from_secs(5), "put", s.put(key, b"v1"))
        .await
        .expect("put");
    let lin = s
        .get(key, Consistency::Linearizable)
        .await
        .expect("linearizable get");
    assert_eq!(
        lin.as_deref(),
        Some(&b"v1"[..]),
        "linearizable get after put"
    );
    let ser = s
        .get(key, Consistency::Serializable)
        .await
        .expect("serializable get");
    // With one member, the member that acknowledged the write serves the read.
    if size == 1 {
        assert_eq!(
            ser.as_deref(),
            Some(&b"v1"[..]),
            "serializable get after put"
        );
    }
    assert_eq!(
        s.get("/coordbench-test/kv/absent", Consistency::Linearizable)
            .await
            .expect("get"),
        None
    );
    s.close().await.expect("close");

    // From each member on its own: a linearizable read must see the write at once; a
    // serializable one may lag behind the leader, but only briefly on an idle cluster.
    for m in 0..size {
        let member = target.connect_member(m).await;
        let mut r = open_session(member.as_ref(), 0, LONG_TTL).await;
        let lin = r
            .get(key, Consistency::Linearizable)
            .await
            .expect("linearizable get");
        assert_eq!(
            lin.as_deref(),
            Some(&b"v1"[..]),
            "linearizable get from member {m}"
        );
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let ser = r
                .get(key, Consistency::Serializable)
                .await
                .expect("serializable get");
            if ser.as_deref() == Some(&b"v1"[..]) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "member {m}: serializable get still {ser:?} after 2 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    let clock = RunClock::start();
    let workload = KvWorkload::new(KvOptions {
        op: KvOp::Put,
        keys: 100,
        value_size: 64,
        seed: 1,
    })
    .expect("kv workload");
    let plan = closed_plan(8, Duration::ZERO, Duration::from_secs(2));
    let outcome = run_plan(&plan, target.coordinator.clone(), Arc::new(workload), clock).await;
    assert_eq!(
        outcome.end_reason,
        coordbench_bench::runner::EndReason::Completed
    );
    assert_eq!(
        outcome.total.errors_total(),
        0,
        "errors: {:?}",
        outcome.total.errors
    );
    assert!(outcome.total.ops > 0, "no operation completed");
    let window = outcome.window.as_secs_f64();
    assert!((1.9..=2.0).contains(&window), "window {window}");
    let throughput = outcome.total.ops as f64 / window;
    assert!(throughput > 0.0);
    assert_eq!(
        outcome.total.latency.len(),
        outcome.total.ops,
        "one latency sample per operation"
    );
    Percentiles::of(&outcome.total.latency).assert_ordered();
    Percentiles::of(&outcome.total.service).assert_ordered();
    assert!(
        outcome.counters.requests >= outcome.total.ops,
        "{:?}",
        outcome.counters
    );

    target.stop();
}

/// 8 clients contend for one lock for 3 s through the lock workload and the runner, with
/// each recipe: sections happen, none overlap, fencing tokens strictly increase.
pub async fn lock_workload_is_safe(kind: TargetKind, size: usize) {
    let target = start_target(kind, size).await;
    for recipe in RECIPES {
        let clock = RunClock::start();
        let options = LockOptions {
            locks: 1,
            hold: Duration::ZERO,
            recipe,
            session_ttl: Duration::from_secs(2),
        };
        let workload = Arc::new(LockWorkload::new(options, clock).expect("lock workload"));
        let plan = closed_plan(8, Duration::ZERO, Duration::from_secs(3));
        let outcome = run_plan(&plan, target.coordinator.clone(), workload.clone(), clock).await;

        let check = outcome
            .check
            .lock
            .as_ref()
            .expect("the lock workload reports a lock check");
        assert!(check.sections > 0, "{recipe:?}: no critical section");
        assert_eq!(
            check.violations, 0,
            "{recipe:?}: overlapping critical sections"
        );
        assert_eq!(
            check.token_regressions, 0,
            "{recipe:?}: fencing tokens did not increase"
        );
        assert_eq!(
            outcome.total.errors_total(),
            0,
            "{recipe:?}: errors {:?}",
            outcome.total.errors
        );
        assert!(
            outcome.total.ops > 0,
            "{recipe:?}: no acquisition in the window"
        );
        Percentiles::of(&outcome.total.latency).assert_ordered();

        // The same properties, straight from the recorded history.
        let mut sections = workload.sections();
        assert_eq!(sections.len() as u64, check.sections);
        sections.sort_by_key(|s| s.enter);
        for pair in sections.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                b.enter >= a.exit,
                "{recipe:?}: client {} entered before client {} left",
                b.client,
                a.client
            );
            assert!(
                b.token > a.token,
                "{recipe:?}: token {} after {}",
                b.token,
                a.token
            );
        }
        assert!(
            sections.iter().all(|s| s.exit != Duration::MAX),
            "{recipe:?}: a section was never closed"
        );
        let clients: std::collections::BTreeSet<usize> =
            sections.iter().map(|s| s.client).collect();
        assert!(
            clients.len() > 1,
            "{recipe:?}: only clients {clients:?} ever held the lock"
        );
    }
    target.stop();
}

/// A holds the lock; B's lock() waits while A holds; after A's release B gets the lock
/// with a larger fencing token. Both recipes.
pub async fn lock_excludes_until_release(kind: TargetKind, size: usize) {
    let target = start_target(kind, size).await;
    for recipe in RECIPES {
        let name = unique("exclusion", recipe);
        let c = target.coordinator.as_ref();
        let mut a = open_session(c, 0, LONG_TTL).await;
        let mut b = open_session(c, 1, LONG_TTL).await;
        let ga = within(Duration::from_secs(5), "A's lock", a.lock(&name, recipe))
            .await
            .expect("A locks");

        let b_name = name.clone();
        let b_task = tokio::spawn(async move {
            let r = b.lock(&b_name, recipe).await;
            (b, r, Instant::now())
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !b_task.is_finished(),
            "{recipe:?}: B acquired while A holds"
        );

        within(Duration::from_secs(5), "A's unlock", a.unlock(ga.clone()))
            .await
            .expect("A unlocks");
        let released = Instant::now();
        let (mut b, gb, acquired) = within(Duration::from_secs(5), "B's lock", b_task)
            .await
            .expect("B's task");
        let gb = gb.expect("B locks after A's release");
        assert!(
            gb.token > ga.token,
            "{recipe:?}: B's token {} not above A's {}",
            gb.token,
            ga.token
        );
        assert!(
            acquired.duration_since(released) < Duration::from_secs(2),
            "{recipe:?}: handover took {:?}",
            acquired.duration_since(released)
        );
        b.unlock(gb).await.expect("B unlocks");
        a.close().await.expect("close A");
        b.close().await.expect("close B");
    }
    target.stop();
}

/// A (minimum TTL) holds the lock and then stops refreshing its session without releasing
/// anything, as a crashed client would. B, already waiting, gets the lock once the server
/// expires A's session: not before A's session could have run out, and within TTL + 1 s.
/// Both recipes, concurrently on one cluster.
pub async fn abandoned_holder_hands_over_on_expiry(kind: TargetKind, size: usize) {
    let target = start_target(kind, size).await;
    let c = target.coordinator.clone();
    let ttl = kind.min_ttl();
    let [first, second] = RECIPES.map(|recipe| recipes::expiry_handover(c.clone(), recipe, ttl));
    let (d1, d2) = tokio::join!(first, second);
    eprintln!("handover after abandon: etcd-mutex {d1:?}, naive {d2:?} (TTL {ttl:?})");
    for (recipe, waited) in RECIPES.into_iter().zip([d1, d2]) {
        // A's lease was last refreshed at most TTL/3 before the abandon.
        assert!(
            waited >= ttl / 2,
            "{recipe:?}: B got the lock {waited:?} after the abandon: A's hold was released early"
        );
        assert!(
            waited <= ttl + Duration::from_secs(1),
            "{recipe:?}: B got the lock only {waited:?} after the abandon"
        );
    }
    target.stop();
}

/// 40 sessions spread over the target's few connections each hold a lock of their own for
/// three TTLs without a call of their own, while one of them freezes (sends nothing, its
/// lease refreshes included) for two: every other holder still holds at the end, and the
/// frozen one's release fails as expired. On the etcd API the leases of a connection share
/// one keep-alive stream, so this checks that each lease on it is refreshed and that a
/// paused one is left out.
pub async fn idle_holders_keep_their_sessions_and_a_frozen_one_expires(
    kind: TargetKind,
    size: usize,
) {
    const SESSIONS: usize = 40;
    let step = Duration::from_secs(5);
    let target = start_target(kind, size).await;
    let ttl = kind.min_ttl();
    let mut sessions = open_sessions(target.coordinator.as_ref(), 0, SESSIONS, ttl).await;
    let mut guards = Vec::with_capacity(SESSIONS);
    for (i, s) in sessions.iter_mut().enumerate() {
        let name = unique(&format!("kept-{i}"), LockRecipe::HerdFree);
        let guard = within(step, "a lock", s.lock(&name, LockRecipe::HerdFree)).await;
        guards.push(guard.unwrap_or_else(|e| panic!("session {i} locks: {e}")));
    }
    let mut frozen = sessions.remove(0);
    let frozen_guard = guards.remove(0);
    let pause = tokio::spawn(async move {
        frozen.freeze(ttl * 2).await.expect("the freeze");
        frozen
    });
    tokio::time::sleep(ttl * 3).await;
    let mut frozen = within(step, "the frozen session", pause)
        .await
        .expect("its task");
    for (i, (s, guard)) in sessions.iter_mut().zip(guards).enumerate() {
        within(step, "a release", s.unlock(guard))
            .await
            .unwrap_or_else(|e| panic!("session {} lost its lock within 3 TTLs: {e}", i + 1));
    }
    let late = within(
        step,
        "the frozen session's release",
        frozen.unlock(frozen_guard),
    )
    .await
    .expect_err("a release after the frozen session's lease ran out");
    assert_eq!(late.kind(), "session_expired", "{late}");
    for mut s in sessions {
        s.close().await.expect("close");
    }
    frozen.abandon();
    target.stop();
}

/// With 6 waiters queued behind a holder, one release notifies every waiter under the
/// naive recipe, and only the next holder under the herd-free one.
pub async fn release_notifies_herd_only_with_naive(kind: TargetKind, size: usize) {
    let target = start_target(kind, size).await;
    for recipe in RECIPES {
        herd_case(target.coordinator.clone(), recipe).await;
    }
    target.stop();
}

const WAITERS: usize = 6;

async fn herd_case(c: Arc<dyn Coordinator>, recipe: LockRecipe) {
    let queue = LockQueue {
        name: unique("herd", recipe),
        recipe,
    };
    let outcome = herd::one_release(c, queue, WAITERS).await;
    eprintln!("{recipe:?}: notifications per waiter after one release {outcome:?}");
    herd::assert_herd_matches(recipe, &outcome);
}

/// One watch event, flattened for comparison: type, key, value, mod revision, create
/// revision, version, and the previous value with its mod revision when one was sent.
type Seen = (
    &'static str,
    String,
    String,
    i64,
    i64,
    i64,
    Option<(String, i64)>,
);

fn flatten(e: &etcd_client::Event) -> Seen {
    let kv = e.kv().expect("event without kv");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let kind = match e.event_type() {
        etcd_client::EventType::Put => "PUT",
        etcd_client::EventType::Delete => "DELETE",
    };
    (
        kind,
        text(kv.key()),
        text(kv.value()),
        kv.mod_revision(),
        kv.create_revision(),
        kv.version(),
        e.prev_kv().map(|p| (text(p.value()), p.mod_revision())),
    )
}

/// Reads `n` events from `stream` (skipping created and progress responses) within 10 s;
/// fails on a cancel.
async fn next_events(stream: &mut etcd_client::WatchStream, n: usize) -> Vec<Seen> {
    let mut seen = Vec::new();
    within(Duration::from_secs(10), "watch events", async {
        while seen.len() < n {
            let resp = stream
                .message()
                .await
                .expect("watch stream")
                .expect("watch stream ended");
            assert!(
                !resp.canceled(),
                "watch canceled: {:?}",
                resp.cancel_reason()
            );
            seen.extend(resp.events().iter().map(flatten));
        }
    })
    .await;
    assert_eq!(seen.len(), n, "more events than expected: {seen:?}");
    seen
}

/// etcd API targets only (it speaks etcd's Watch through etcd-client, as Kubernetes and
/// etcdctl do). Writes go to every member; watches are served by the last member (a
/// follower on a 3-member cluster, most of the time). A watch from a past `start_revision`
/// replays exactly the history of its key, with `prev_kv` (none for a creation), then
/// continues live; a prefix watch from a later revision sees every key under the prefix and
/// no `prev_kv` it did not ask for; after a compaction, a watch from before it is created
/// and then canceled with the compaction revision, and one from the compaction revision
/// still replays.
pub async fn watch_replays_history_with_prev_kv(kind: TargetKind, size: usize) {
    use etcd_client::{Client, CompactionOptions, ConnectOptions, GetOptions, WatchOptions};

    let target = start_target(kind, size).await;
    let opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(5));
    let connect = |endpoints: Vec<String>| {
        let opts = opts.clone();
        async move {
            within(
                Duration::from_secs(10),
                "connecting etcd-client",
                Client::connect(endpoints, Some(opts)),
            )
            .await
            .expect("connect")
        }
    };
    let mut writer = connect(target.endpoints()).await;
    let watcher_endpoint = target.endpoints()[size - 1].clone();
    let mut watcher = connect(vec![watcher_endpoint]).await;

    let (a, b, prefix) = ("/watch/a", "/watch/b", "/watch/");
    let rev = |h: Option<&etcd_client::ResponseHeader>| h.expect("response header").revision();
    let r1 = rev(writer.put(a, "1", None).await.expect("put a=1").header());
    let r2 = rev(writer.put(a, "2", None).await.expect("put a=2").header());
    let r3 = rev(writer.put(b, "1", None).await.expect("put b=1").header());
    let r4 = rev(writer.delete(a, None).await.expect("delete a").header());
    assert!(
        r1 < r2 && r2 < r3 && r3 < r4,
        "revisions {r1} {r2} {r3} {r4}"
    );
    let s = |v: &str| v.to_string();

    // History of one key from r1, with previous values.
    let mut w = watcher
        .watch(
            a,
            Some(WatchOptions::new().with_start_revision(r1).with_prev_key()),
        )
        .await
        .expect("watch a from r1");
    let replay = next_events(&mut w, 3).await;
    assert_eq!(
        replay,
        vec![
            ("PUT", s(a), s("1"), r1, r1, 1, None),
            ("PUT", s(a), s("2"), r2, r1, 2, Some((s("1"), r1))),
            ("DELETE", s(a), s(""), r4, 0, 0, Some((s("2"), r2))),
        ],
        "replay of {a} from {r1}"
    );
    // ... then live: a re-creation has no previous value.
    let r5 = rev(writer.put(a, "3", None).await.expect("put a=3").header());
    let live = next_events(&mut w, 1).await;
    assert_eq!(
        live,
        vec![("PUT", s(a), s("3"), r5, r5, 1, None)],
        "live event"
    );
    drop(w);

    // A prefix from r2, without prev_kv.
    let mut w = watcher
        .watch(
            prefix,
            Some(WatchOptions::new().with_prefix().with_start_revision(r2)),
        )
        .await
        .expect("watch prefix from r2");
    let replay = next_events(&mut w, 4).await;
    assert_eq!(
        replay,
        vec![
            ("PUT", s(a), s("2"), r2, r1, 2, None),
            ("PUT", s(b), s("1"), r3, r3, 1, None),
            ("DELETE", s(a), s(""), r4, 0, 0, None),
            ("PUT", s(a), s("3"), r5, r5, 1, None),
        ],
        "replay of {prefix} from {r2}"
    );
    drop(w);

    // Compact at r3; make sure the watcher's member has applied it (a linearizable read
    // there waits for everything committed before it).
    writer
        .compact(r3, Some(CompactionOptions::new().with_physical()))
        .await
        .expect("compact");
    watcher
        .get(a, Some(GetOptions::new()))
        .await
        .expect("linearizable get");
    let mut w = watcher
        .watch(a, Some(WatchOptions::new().with_start_revision(r1)))
        .await
        .expect("watch a from the compacted r1");
    let canceled = within(Duration::from_secs(10), "the compaction cancel", async {
        loop {
            let resp = w
                .message()
                .await
                .expect("watch stream")
                .expect("watch stream ended");
            assert!(resp.events().is_empty(), "events from a compacted revision");
            if resp.canceled() {
                break resp;
            }
        }
    })
    .await;
    assert_eq!(
        canceled.compact_revision(),
        r3,
        "compact_revision of the cancel"
    );
    drop(w);
    let mut w = watcher
        .watch(
            prefix,
            Some(WatchOptions::new().with_prefix().with_start_revision(r3)),
        )
        .await
        .expect("watch prefix from r3");
    let replay = next_events(&mut w, 3).await;
    let revisions: Vec<i64> = replay.iter().map(|e| e.3).collect();
    assert_eq!(
        revisions,
        vec![r3, r4, r5],
        "replay from the compaction revision: {replay:?}"
    );
    drop(w);

    drop((writer, watcher));
    target.stop();
}

/// The etcd API: 200 sessions on 2 connections open a value watch each, on a key of their
/// own and all at once, so their creates are pipelined on their connection's shared watch
/// stream. Every watcher then gets its own key's write and no other; each session counts
/// exactly the two requests it sent (the read and the watch's create); etcd itself (whose
/// /metrics counts them) holds no more watch streams than connections. Once every handle is
/// dropped the idle streams close (etcd then holds none), and a later watch opens a fresh
/// one.
pub async fn watchers_of_many_sessions_share_their_connection(kind: TargetKind, size: usize) {
    const SESSIONS: usize = 200;
    const CONNS: usize = 2;
    let step = Duration::from_secs(10);
    let target = start_target(kind, size).await;
    let c = super::connect(kind, target.endpoints(), CONNS).await;
    let mut sessions = open_sessions(c.as_ref(), 0, SESSIONS, LONG_TTL).await;
    let key = |i: usize| format!("/coordbench-test/shared-watch/{i}");
    let keys: Vec<String> = (0..SESSIONS).map(key).collect();
    let mut watches = within(
        step,
        "creating the watches at once",
        futures::future::try_join_all(
            sessions
                .iter_mut()
                .zip(&keys)
                .map(|(s, key)| s.watch_value(key)),
        ),
    )
    .await
    .expect("every watch");
    for (i, s) in sessions.iter().enumerate() {
        let requests = s.counters().requests;
        assert_eq!(requests, 2, "session {i}: requests for one value watch");
    }
    if kind == TargetKind::Etcd {
        assert_eq!(
            etcd_watch_streams(&target).await,
            CONNS as f64,
            "etcd's watch streams for {SESSIONS} sessions"
        );
    }
    for w in &mut watches {
        let first = next_value(w, "a watch's first value").await;
        assert_eq!(first, None, "a value before any write");
    }
    let mut writer = open_session(target.coordinator.as_ref(), 0, LONG_TTL).await;
    for i in (0..SESSIONS).rev() {
        writer
            .put(&key(i), format!("v{i}").as_bytes())
            .await
            .expect("put");
    }
    for (i, w) in watches.iter_mut().enumerate() {
        let seen = next_value(w, "a watch's update").await;
        assert_eq!(
            seen.as_deref(),
            Some(format!("v{i}").as_bytes()),
            "watch {i}"
        );
    }
    drop(watches);
    // Past the driver's linger (1 s) the streams close; a new watch opens a fresh one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    if kind == TargetKind::Etcd {
        assert_eq!(
            etcd_watch_streams(&target).await,
            0.0,
            "etcd's watch streams once no watcher is left"
        );
    }
    let mut late = within(
        step,
        "a watch after the streams closed",
        sessions[0].watch_value(&key(0)),
    )
    .await
    .expect("a late watch");
    assert_eq!(
        next_value(&mut late, "its first value").await.as_deref(),
        Some(&b"v0"[..])
    );
    writer.put(&key(0), b"again").await.expect("put");
    assert_eq!(
        next_value(&mut late, "its update").await.as_deref(),
        Some(&b"again"[..])
    );
    drop(late);
    for mut s in sessions.into_iter().chain([writer]) {
        s.close().await.expect("close");
    }
    drop(c);
    target.stop();
}

/// The next value `w` delivers, within 10 s; `what` names it in a failure.
async fn next_value(w: &mut Box<dyn ValueWatch>, what: &str) -> Option<Vec<u8>> {
    within(Duration::from_secs(10), what, w.next())
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The watch streams etcd holds open (its /metrics), on the target's first member.
async fn etcd_watch_streams(target: &super::Target) -> f64 {
    etcd_gauge(
        &target.endpoints()[0],
        "etcd_debugging_mvcc_watch_stream_total",
    )
    .await
}

/// One gauge from etcd's Prometheus text on its client URL (`http://host:port`).
async fn etcd_gauge(endpoint: &str, name: &str) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = endpoint.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .unwrap_or_else(|e| panic!("connecting to {address} for /metrics: {e}"));
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .await
        .expect("read /metrics");
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in etcd's /metrics"))
}
