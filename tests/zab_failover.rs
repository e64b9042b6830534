//! Leader failover of the built-in Zab engine, as processes on 127.0.0.1: a 3-member zab
//! cluster (tmpfs) takes puts of unique znodes from 8 writers through the ZooKeeper driver;
//! the leader (found with `srvr`'s Mode) is SIGKILLed. The survivors must agree on a new
//! leader within twice the longest election timeout, writes must resume, and every put that
//! was acknowledged must be there afterwards (sync, then gets through a survivor). Then the
//! killed member is restarted from its data directory and must catch up: a read through it
//! returns the last acknowledged znode and its `srvr` Zxid reaches the survivors'. The
//! measured times are printed for the record.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::failover::{stop_writers, unavailability, writer, Unavailability};
use common::{
    assert_gone, open_sessions, raft_options, start_target, within, TargetKind, LONG_TTL,
};
use coordbench_drivers::zookeeper::four_letter::{field, four_letter_word};
use coordbench_drivers::{Consistency, Session};

const WRITERS: usize = 8;
/// How often `srvr` is polled while waiting for a leader.
const POLL: Duration = Duration::from_millis(20);
/// Bound on the restarted member catching up.
const CATCH_UP_BOUND: Duration = Duration::from_secs(15);

/// `srvr` of one member: (Mode, Zxid), `None` if it does not answer (in time).
async fn srvr(endpoint: &str) -> Option<(String, u64)> {
    let reply = tokio::time::timeout(
        Duration::from_millis(500),
        four_letter_word(endpoint, "srvr", None),
    )
    .await
    .ok()?
    .ok()?;
    let mode = field(&reply, "Mode")?.to_string();
    let zxid = field(&reply, "Zxid")?;
    let zxid = u64::from_str_radix(zxid.trim_start_matches("0x"), 16).ok()?;
    Some((mode, zxid))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_failover_keeps_every_acknowledged_write_and_the_restarted_member_catches_up() {
    let mut target = start_target(TargetKind::Zab, 3).await;
    let endpoints = target.endpoints();
    let bound = raft_options().election_timeout_max() * 2;

    let stop = Arc::new(AtomicBool::new(false));
    let sessions = open_sessions(target.coordinator.as_ref(), 0, WRITERS, LONG_TTL).await;
    let writers: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(w, s)| {
            tokio::spawn(writer(
                move |seq| format!("/failover/w{w}-{seq:08}"),
                s,
                stop.clone(),
            ))
        })
        .collect();
    // Load before the fault.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The leader: the one member whose Mode is leader.
    let mut modes = Vec::new();
    for e in &endpoints {
        modes.push(srvr(e).await.expect("srvr before the kill").0);
    }
    let leaders: Vec<usize> = (0..modes.len()).filter(|&i| modes[i] == "leader").collect();
    assert_eq!(leaders.len(), 1, "modes {modes:?}");
    let victim = leaders[0];
    let victim_pid = target.cluster.member_pid(victim).expect("victim pid");
    target.cluster.kill_member(victim).expect("kill the leader");
    let killed = Instant::now();
    assert_gone(&[victim_pid]);
    let survivors: Vec<usize> = (0..endpoints.len()).filter(|&i| i != victim).collect();

    // Elected: exactly one survivor says leader and the other follower.
    let (new_leader, elected) = within(Duration::from_secs(20), "a new leader", async {
        loop {
            let mut seen = Vec::new();
            for &i in &survivors {
                seen.push(srvr(&endpoints[i]).await.map(|s| s.0));
            }
            let lead: Vec<usize> = (0..seen.len())
                .filter(|&j| seen[j].as_deref() == Some("leader"))
                .collect();
            let follow = seen
                .iter()
                .filter(|m| m.as_deref() == Some("follower"))
                .count();
            if lead.len() == 1 && follow == seen.len() - 1 {
                return (survivors[lead[0]], killed.elapsed());
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    assert!(
        elected <= bound,
        "new leader m{} after {elected:?}, more than 2x the longest election timeout ({bound:?})",
        new_leader + 1
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
        "zab failover: killed leader m{}; new leader m{} after {elected:?} (bound {bound:?}), first \
         write issued after the kill acknowledged after {first_after:?}, longest gap between acks \
         {longest_gap:?}; {} acks ({before} before the kill)",
        victim + 1,
        new_leader + 1,
        acks.len()
    );

    // Nothing acknowledged is missing: through a survivor, a sync (the first, linearizable
    // get) then gets on the same session see every acknowledged znode with its value.
    let reader_index = survivors[0];
    let member = target.connect_member(reader_index).await;
    let mut s = open_sessions(member.as_ref(), 0, 1, LONG_TTL)
        .await
        .pop()
        .expect("session");
    let checked = Instant::now();
    let mut missing = Vec::new();
    for (n, a) in acks.iter().enumerate() {
        let c = if n == 0 {
            Consistency::Linearizable
        } else {
            Consistency::Serializable
        };
        let v = within(Duration::from_secs(5), "a get", s.get(&a.key, c))
            .await
            .expect("get");
        if v.as_deref() != Some(a.key.as_bytes()) {
            missing.push(a.key.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} acknowledged puts missing: {missing:?}",
        missing.len()
    );
    eprintln!(
        "zab failover: {} acknowledged znodes read back in {:?}",
        acks.len(),
        checked.elapsed()
    );
    let _ = s.close().await;
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
        others.push(srvr(&endpoints[i]).await.expect("survivor srvr").1);
    }
    let target_zxid = others.into_iter().min().expect("survivors");
    let (has_last, indexed) = within(CATCH_UP_BOUND, "the restarted member catching up", async {
        let mut has_last = None;
        let mut session: Option<Box<dyn Session>> = None;
        loop {
            if has_last.is_none() {
                if session.is_none() {
                    let c =
                        common::zk_conformance::connect_zk_quiet(vec![endpoints[victim].clone()])
                            .await;
                    if let Some(c) = c {
                        let opts = coordbench_drivers::SessionOptions { ttl: LONG_TTL };
                        if let Ok(Ok(s)) =
                            tokio::time::timeout(Duration::from_secs(1), c.open_session(0, &opts))
                                .await
                        {
                            session = Some(s);
                        }
                    }
                }
                if let Some(s) = session.as_mut() {
                    let read = s.get(&last, Consistency::Serializable);
                    if let Ok(Ok(Some(v))) =
                        tokio::time::timeout(Duration::from_millis(500), read).await
                    {
                        if v == last.as_bytes() {
                            has_last = Some(restarted.elapsed());
                        }
                    }
                }
            }
            if let (Some(t), Some((mode, zxid))) = (has_last, srvr(&endpoints[victim]).await) {
                if mode == "follower" && zxid >= target_zxid {
                    return (t, restarted.elapsed());
                }
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    eprintln!(
        "zab failover: restarted m{} served the last acknowledged znode after {has_last:?} and \
         reached zxid {target_zxid:#x} as a follower after {indexed:?}",
        victim + 1
    );
    target.stop();
}
