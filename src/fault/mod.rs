//! Faults injected into a cluster coordbench started, while a workload runs (`--fault`),
//! and the failover figures of RESULTS.md around each one (metrics.md, "Failover"): time to
//! detect, time to a new leader, time to the first write, longest gap between acknowledged
//! writes, and time until the victim is back in the cluster.
//!
//! The injector waits for the measured window to begin (setup and warm-up run undisturbed),
//! then repeats: wait `--fault-every`; wait for a healthy cluster (every member
//! answers and one leader has a majority); sleep a random part of a heartbeat interval (so
//! the fault does not line up with heartbeats); SIGKILL the leader (t_f); poll every
//! member's view of the leadership every few milliseconds until a new leader has a majority
//! at a higher term; keep the victim down a little longer; restart it on its data and wait
//! until it is back. Probe writes (`probe_writes`) run throughout on sessions of their own.

pub mod leadership;
pub mod lost_writes;
pub mod probe_writes;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use coordbench_drivers::{Coordinator, SessionOptions};
use coordbench_splitmix::SplitMix64;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::cli::{FaultArg, TargetKind};
use crate::provision::Cluster;
use leadership::{agreed_leader, LeadershipProbe, MemberView, Role};
use probe_writes::{first_write_after, longest_gap_around, ProbeWrites, PROBES};

/// How often every member is asked who leads while a fault is in progress.
const POLL: Duration = Duration::from_millis(5);
/// One member's answer must come within this.
const ANSWER: Duration = Duration::from_millis(200);
/// Bound on a healthy cluster before a fault, on a new leader after it, and on the victim
/// rejoining: a cluster that needs longer has failed the run.
const BOUND: Duration = Duration::from_secs(30);
/// The kill lands at a uniformly random point of this (about a heartbeat interval).
const JITTER: Duration = Duration::from_millis(100);
/// The victim stays down at least this long after a new leader is found, so probe writes
/// see the cluster run without it.
const DOWN: Duration = Duration::from_millis(500);

/// One fault and what followed it; durations from t_f, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    pub fault: FaultArg,
    /// Seconds since the injector started.
    pub at_s: f64,
    /// The member brought down.
    pub victim: String,
    pub old_term: u64,
    pub new_term: Option<u64>,
    pub new_leader: Option<String>,
    /// The first poll at which a surviving member no longer followed the old leader.
    pub detect_us: Option<u64>,
    /// The first poll at which a new leader had a majority at a higher term.
    pub new_leader_us: Option<u64>,
    /// The first acknowledgement of a probe put issued after t_f.
    pub first_write_us: Option<u64>,
    /// The longest gap between acknowledged probe puts around t_f.
    pub unavailable_us: Option<u64>,
    /// The victim restarted and a leader had every member again.
    pub rejoined_us: Option<u64>,
    /// The run ended before the cluster recovered: the missing figures are not failures.
    pub cut_short: bool,
}

/// The distribution over a run's faults, for run.json and summary.csv.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FaultSummary {
    /// Faults injected, including one the run's end cut short.
    pub faults: usize,
    /// Faults after which no new leader was found within the bound.
    pub unrecovered: usize,
    pub detect_p50_us: Option<u64>,
    pub new_leader_p50_us: Option<u64>,
    pub new_leader_p99_us: Option<u64>,
    pub new_leader_max_us: Option<u64>,
    pub first_write_p50_us: Option<u64>,
    pub first_write_max_us: Option<u64>,
    pub unavailable_max_us: Option<u64>,
}

impl FaultSummary {
    pub fn of(records: &[FaultRecord]) -> Self {
        let pick = |f: fn(&FaultRecord) -> Option<u64>| {
            let mut v: Vec<u64> = records.iter().filter_map(f).collect();
            v.sort_unstable();
            v
        };
        let detect = pick(|r| r.detect_us);
        let leader = pick(|r| r.new_leader_us);
        let first = pick(|r| r.first_write_us);
        let gap = pick(|r| r.unavailable_us);
        FaultSummary {
            faults: records.len(),
            unrecovered: records
                .iter()
                .filter(|r| r.new_leader_us.is_none() && !r.cut_short)
                .count(),
            detect_p50_us: nearest_rank(&detect, 0.5),
            new_leader_p50_us: nearest_rank(&leader, 0.5),
            new_leader_p99_us: nearest_rank(&leader, 0.99),
            new_leader_max_us: leader.last().copied(),
            first_write_p50_us: nearest_rank(&first, 0.5),
            first_write_max_us: first.last().copied(),
            unavailable_max_us: gap.last().copied(),
        }
    }
}

/// The nearest-rank percentile of sorted values (few samples: no interpolation).
fn nearest_rank(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Writes one row per fault.
pub fn write_csv(path: &Path, records: &[FaultRecord]) -> anyhow::Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    for r in records {
        w.serialize(r)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))
}

/// Why injection stopped before the run did.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("{0}")]
    Cluster(String),
}

/// Injects `fault` every `every` from when `window` fires until `stop`, and returns what it
/// measured. `seed` (the run's `--seed`) draws where in a heartbeat interval each fault lands. An error means the cluster did not recover within the bound (the records so
/// far come with it).
pub async fn inject(
    fault: FaultArg,
    every: Duration,
    kind: TargetKind,
    cluster: &mut Cluster,
    coordinator: Arc<dyn Coordinator>,
    seed: u64,
    window: CancellationToken,
    stop: CancellationToken,
) -> (Vec<FaultRecord>, Option<FaultError>) {
    let mut records = Vec::new();
    tokio::select! {
        _ = window.cancelled() => {}
        _ = stop.cancelled() => return (records, None),
    }
    let started = Instant::now();
    let Some(mut probe) = LeadershipProbe::new(kind, &cluster.endpoints()).await else {
        return (records, None);
    };
    let mut sessions = Vec::new();
    for i in 0..PROBES {
        let options = SessionOptions {
            ttl: Duration::from_secs(10),
        };
        match coordinator.open_session(usize::MAX - i, &options).await {
            Ok(s) => sessions.push(s),
            Err(e) => {
                let error = FaultError::Cluster(format!("opening a probe session: {e}"));
                return (records, Some(error));
            }
        }
    }
    let writes = ProbeWrites::start(sessions, "/coordbench/failover-probe");
    let mut rng = SplitMix64::new(seed);
    let error = loop {
        if sleep_or_stop(every, &stop).await {
            break None;
        }
        match one_fault(
            fault, cluster, &mut probe, &writes, &stop, started, &mut rng,
        )
        .await
        {
            Ok(Some(record)) => records.push(record),
            Ok(None) => break None,
            Err((record, e)) => {
                records.extend(record);
                break Some(e);
            }
        }
    };
    writes.stop().await;
    (records, error)
}

/// True if `stop` fired first.
async fn sleep_or_stop(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.cancelled() => true,
    }
}

type FaultOutcome = Result<Option<FaultRecord>, (Option<FaultRecord>, FaultError)>;

async fn one_fault(
    fault: FaultArg,
    cluster: &mut Cluster,
    probe: &mut LeadershipProbe,
    writes: &ProbeWrites,
    stop: &CancellationToken,
    started: Instant,
    rng: &mut SplitMix64,
) -> FaultOutcome {
    let size = cluster.member_count();
    let names = cluster.member_names();
    // 1. A healthy cluster: everyone answers, one leader with a majority.
    let healthy = poll_until(probe, stop, |views, _| {
        if views.iter().any(Option::is_none) {
            return None;
        }
        agreed_leader(views, size)
    })
    .await;
    let (victim, old_term) = match healthy {
        Polled::Found((i, term), _) => (i, term),
        Polled::Stopped => return Ok(None),
        Polled::TimedOut => {
            return Err((
                None,
                FaultError::Cluster(
                    "no healthy cluster (every member up, one leader) within 30s before a fault"
                        .into(),
                ),
            ));
        }
    };
    // 2. A random point of a heartbeat interval, then the fault.
    let jitter = JITTER.mul_f64(f64::from(rng.range(0, 1_000_000)) / 1e6);
    if sleep_or_stop(jitter, stop).await {
        return Ok(None);
    }
    let t_f = Instant::now();
    if let Err(e) = cluster.kill_member(victim) {
        return Err((
            None,
            FaultError::Cluster(format!("killing the leader: {e}")),
        ));
    }
    let mut record = FaultRecord {
        fault,
        at_s: (t_f - started).as_secs_f64(),
        victim: names[victim].clone(),
        old_term,
        new_term: None,
        new_leader: None,
        detect_us: None,
        new_leader_us: None,
        first_write_us: None,
        unavailable_us: None,
        rejoined_us: None,
        cut_short: false,
    };
    // 3. Detection and the new leader, from the survivors' answers.
    let mut detected: Option<Duration> = None;
    let elected = poll_until(probe, stop, |views, at| {
        let left_follower = views.iter().enumerate().any(|(i, v)| {
            i != victim && v.is_some_and(|v| !(v.role == Role::Follower && v.term == old_term))
        });
        if left_follower && detected.is_none() {
            detected = Some(at - t_f);
        }
        agreed_leader(views, size).filter(|&(_, term)| term > old_term)
    })
    .await;
    record.detect_us = detected.map(micros);
    let stopped = match elected {
        Polled::Found((leader, term), at) => {
            record.new_leader_us = Some(micros(at - t_f));
            record.new_term = Some(term);
            record.new_leader = Some(names[leader].clone());
            false
        }
        Polled::Stopped => true,
        Polled::TimedOut => false,
    };
    record.cut_short = stopped;
    // 4. Writes resume; the victim stays down a little, then comes back.
    if !stopped {
        let resumed = tokio::time::Instant::now() + BOUND;
        while !writes.resumed_after(t_f)
            && tokio::time::Instant::now() < resumed
            && !sleep_or_stop(POLL, stop).await
        {}
        sleep_or_stop(DOWN, stop).await;
    }
    let acks = writes.acks();
    record.first_write_us = first_write_after(&acks, t_f).map(micros);
    record.unavailable_us = longest_gap_around(&acks, t_f).map(micros);
    if let Err(e) = cluster.restart_member(victim) {
        return Err((
            Some(record),
            FaultError::Cluster(format!("restarting {}: {e}", names[victim])),
        ));
    }
    if record.new_leader_us.is_none() && !stopped {
        let e = FaultError::Cluster(format!(
            "no new leader within 30s after killing {}",
            names[victim]
        ));
        return Err((Some(record), e));
    }
    let rejoined = poll_until(probe, stop, |views, _| {
        if views.iter().any(Option::is_none) {
            return None;
        }
        agreed_leader(views, size)
            .filter(|_| views.iter().flatten().all(|v| v.role != Role::Electing))
    })
    .await;
    match rejoined {
        Polled::Found(_, at) => record.rejoined_us = Some(micros(at - t_f)),
        Polled::Stopped => record.cut_short = true,
        Polled::TimedOut => {
            let e = FaultError::Cluster(format!(
                "{} did not rejoin within 30s of its restart",
                names[victim]
            ));
            return Err((Some(record), e));
        }
    }
    Ok(Some(record))
}

enum Polled<T> {
    /// What `check` found, and when.
    Found(T, Instant),
    Stopped,
    TimedOut,
}

/// Asks every member every `POLL` until `check` (given the answers and when they were all
/// in) finds something, within `BOUND`.
async fn poll_until<T>(
    probe: &mut LeadershipProbe,
    stop: &CancellationToken,
    mut check: impl FnMut(&[Option<MemberView>], Instant) -> Option<T>,
) -> Polled<T> {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let next = tokio::time::Instant::now() + POLL;
        let views = probe.observe(ANSWER).await;
        let at = Instant::now();
        if let Some(found) = check(&views, at) {
            return Polled::Found(found, at);
        }
        if tokio::time::Instant::now() >= deadline {
            return Polled::TimedOut;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = stop.cancelled() => return Polled::Stopped,
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_of_few_samples() {
        assert_eq!(nearest_rank(&[], 0.5), None);
        assert_eq!(nearest_rank(&[7], 0.99), Some(7));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.5), Some(2));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.99), Some(4));
    }
}
