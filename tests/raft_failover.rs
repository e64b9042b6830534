//! Leader failover of the built-in Raft engine, as processes on 127.0.0.1: a 3-member raft
//! cluster (tmpfs) takes puts of unique keys from 8 writers through the etcd driver; the
//! leader (found with Maintenance.Status) is SIGKILLed. The survivors must agree on a new
//! leader within twice the longest election timeout, writes must resume, and every put
//! that was acknowledged must be there afterwards (linearizable reads through a survivor).
//! Then the killed member is restarted from its data directory and must catch up: its
//! serializable read returns the last acknowledged key and its raft index reaches the
//! others'. The measured times are printed for the record.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::failover::{stop_writers, unavailability, writer, Ack, Unavailability};
use common::{
    assert_gone, open_sessions, raft_options, start_target, within, TargetKind, LONG_TTL,
};
use coordbench_drivers::Consistency;
use etcd_client::{Client, ConnectOptions, GetOptions};

const WRITERS: usize = 8;
/// How often Status is polled while waiting for a leader.
const POLL: Duration = Duration::from_millis(20);
/// Bound on the restarted member catching up.
const CATCH_UP_BOUND: Duration = Duration::from_secs(15);

/// A client of the one member at `endpoint`, with short timeouts for polling.
async fn member_client(endpoint: &str) -> Client {
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(1))
        .with_timeout(Duration::from_secs(1));
    within(
        Duration::from_secs(5),
        "connecting to a member",
        Client::connect([endpoint], Some(options)),
    )
    .await
    .unwrap_or_else(|e| panic!("connecting to {endpoint}: {e}"))
}

/// Status of one member: (leader id, raft index), `None` if it does not answer in time.
async fn status(client: &mut Client) -> Option<(u64, u64)> {
    match tokio::time::timeout(Duration::from_millis(500), client.status()).await {
        Ok(Ok(s)) => Some((s.leader(), s.raft_index())),
        _ => None,
    }
}

/// Member ids are 1..N in member order.
fn member_index(id: u64) -> usize {
    usize::try_from(id).expect("member id") - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_failover_keeps_every_acknowledged_write_and_the_restarted_member_catches_up() {
    let mut target = start_target(TargetKind::Raft, 3).await;
    let endpoints = target.endpoints();
    let bound = raft_options().election_timeout_max() * 2;
    let mut clients = Vec::new();
    for e in &endpoints {
        clients.push(member_client(e).await);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let sessions = open_sessions(target.coordinator.as_ref(), 0, WRITERS, LONG_TTL).await;
    let writers: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(w, s)| {
            tokio::spawn(writer(
                move |seq| format!("/failover/w{w}/{seq:08}"),
                s,
                stop.clone(),
            ))
        })
        .collect();
    // Load before the fault.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The leader, as every member reports it.
    let mut leaders = Vec::new();
    for c in &mut clients {
        leaders.push(status(c).await.expect("status before the kill").0);
    }
    assert!(
        leaders.iter().all(|&l| l == leaders[0] && l != 0),
        "leaders {leaders:?}"
    );
    let old = leaders[0];
    let victim = member_index(old);
    let victim_pid = target.cluster.member_pid(victim).expect("victim pid");
    target.cluster.kill_member(victim).expect("kill the leader");
    let killed = Instant::now();
    assert_gone(&[victim_pid]);
    let survivors: Vec<usize> = (0..endpoints.len()).filter(|&i| i != victim).collect();

    // Detected: some survivor stops naming the old leader (with pre-vote, a follower keeps
    // naming it until it becomes a candidate, so this is close to the election itself).
    // Elected: every survivor names the same new one.
    let mut detected = None;
    let (new_leader, elected) = within(Duration::from_secs(20), "a new leader", async {
        loop {
            let mut seen = Vec::new();
            for &i in &survivors {
                seen.push(status(&mut clients[i]).await.map(|s| s.0));
            }
            if detected.is_none() && seen.iter().any(|l| matches!(l, Some(x) if *x != old)) {
                detected = Some(killed.elapsed());
            }
            if let Some(Some(l)) = seen.first() {
                if *l != 0 && *l != old && seen.iter().all(|s| *s == Some(*l)) {
                    return (*l, killed.elapsed());
                }
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    let detected = detected.expect("detection precedes election");
    assert!(
        elected <= bound,
        "new leader {new_leader} after {elected:?}, more than 2x the longest election timeout ({bound:?})"
    );

    // Writes resume: wait for puts issued after the kill to be acknowledged, then stop.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let acks = stop_writers(writers, &stop).await;
    let Unavailability {
        first_write_after: first_after,
        longest_gap,
        before,
    } = unavailability(&acks, killed);
    eprintln!(
        "raft failover: killed leader m{old}; survivors stopped naming it after {detected:?}, new leader m{new_leader} after \
         {elected:?} (bound {bound:?}), first write issued after the kill acknowledged after \
         {first_after:?}, longest gap between acks {longest_gap:?}; {} acks ({before} before the kill)",
        acks.len()
    );

    // Nothing acknowledged is missing: a linearizable range read per writer through a
    // survivor sees every acknowledged key with its value ...
    let reader_index = survivors[0];
    let mut reader = clients[reader_index].clone();
    let mut stored: BTreeMap<String, String> = BTreeMap::new();
    for w in 0..WRITERS {
        let prefix = format!("/failover/w{w}/");
        let resp = within(
            Duration::from_secs(10),
            "a range read",
            reader.get(prefix.as_str(), Some(GetOptions::new().with_prefix())),
        )
        .await
        .expect("linearizable range read");
        for kv in resp.kvs() {
            let k = String::from_utf8_lossy(kv.key()).into_owned();
            stored.insert(k, String::from_utf8_lossy(kv.value()).into_owned());
        }
    }
    let missing: Vec<&str> = acks
        .iter()
        .filter(|a| stored.get(&a.key) != Some(&a.key))
        .map(|a| a.key.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged puts missing: {missing:?}",
        missing.len()
    );
    // ... and so do single linearizable gets through the driver for the puts acknowledged
    // around the kill, the ones a failover could lose.
    let member = target.connect_member(reader_index).await;
    let mut s = open_sessions(member.as_ref(), 0, 1, LONG_TTL)
        .await
        .pop()
        .expect("session");
    let window = Duration::from_millis(500);
    let near: Vec<&Ack> = acks
        .iter()
        .filter(|a| a.acked + window > killed && a.issued < killed + elected + window)
        .take(200)
        .collect();
    for a in &near {
        let v = within(
            Duration::from_secs(5),
            "a linearizable get",
            s.get(&a.key, Consistency::Linearizable),
        )
        .await
        .expect("linearizable get");
        assert_eq!(
            v.as_deref(),
            Some(a.key.as_bytes()),
            "acknowledged {} is missing",
            a.key
        );
    }
    drop((s, member));

    // Restart the killed member: it rejoins from its data directory and catches up.
    let last = acks.last().expect("acks").key.clone();
    target
        .cluster
        .restart_member(victim)
        .expect("restart the killed member");
    let restarted = Instant::now();
    let mut others = Vec::new();
    for &i in &survivors {
        others.push(status(&mut clients[i]).await.expect("survivor status").1);
    }
    let target_index = others.into_iter().min().expect("survivors");
    let mut rejoined = member_client(&endpoints[victim]).await;
    let (has_last, indexed) = within(CATCH_UP_BOUND, "the restarted member catching up", async {
        let mut has_last = None;
        loop {
            if has_last.is_none() {
                let read = rejoined.get(last.as_str(), Some(GetOptions::new().with_serializable()));
                if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_millis(500), read).await {
                    if r.kvs()
                        .first()
                        .is_some_and(|kv| kv.value() == last.as_bytes())
                    {
                        has_last = Some(restarted.elapsed());
                    }
                }
            }
            if let (Some(t), Some((_, index))) = (has_last, status(&mut rejoined).await) {
                if index >= target_index {
                    return (t, restarted.elapsed());
                }
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    eprintln!(
        "raft failover: restarted m{old} served the last acknowledged key after {has_last:?} and \
         reached raft index {target_index} after {indexed:?}"
    );
    drop((clients, rejoined));
    target.stop();
}
