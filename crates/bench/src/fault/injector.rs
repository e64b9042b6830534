//! The per-fault function: from a healthy cluster, through one fault, to a healthy cluster
//! again, with the failover figures around it ([`Injector::fault`]). The injector owns the
//! pollers of the members' views and the probe writes for as long as faults run.
//!
//! One fault: wait for a healthy cluster (every member answers, none electing, a leader
//! with a majority); choose the victims ([`Action`]); for a partition, open the minority's
//! client; sleep a random part of a heartbeat interval (so the fault does not line up with
//! heartbeats); apply the fault (t_f); hold it for `--fault-duration` (kill-leader: also
//! until a new leader leads and probe writes resumed, then 500 ms more) while watching the
//! members' answers; undo it; watch until the cluster is healthy again; read the figures.

use std::time::{Duration, Instant};

use coordbench_splitmix::SplitMix64;
use tokio_util::sync::CancellationToken;

use super::action::{joined, Action};
use super::leadership::{healthy, Asker, MemberView};
use super::minority::{MemberClient, MinorityClient, RunningMinorityClient};
use super::probe_writes::{
    first_write_after, longest_gap_around, ProbeSource, ProbeWrites, PROBES,
};
use super::record::FaultRecord;
use super::views::{MemberViews, POLL};
use super::watch::Watch;
use super::{FaultError, FaultTarget};
use coordbench_lab::provision::Cluster;
use coordbench_results::kinds::FaultArg;

/// Bound on a healthy cluster before a fault, on a new leader after killing one, and on
/// recovering after the undo: a cluster that needs longer has failed the run.
pub const BOUND: Duration = Duration::from_secs(30);
/// A fault lands at a uniformly random point of this (about a heartbeat interval).
const JITTER: Duration = Duration::from_millis(100);
/// kill-leader: the victim stays down at least this long after writes resumed, so probe
/// writes see the cluster run without it.
const DOWN: Duration = Duration::from_millis(500);

/// How long, once writes resumed, the views may take to show the new term.
const NEW_TERM_GRACE: Duration = Duration::from_secs(2);

/// A fault that went wrong: what was measured of it (if it began) and why.
#[derive(Debug)]
pub struct FaultFailure {
    pub record: Option<Box<FaultRecord>>,
    pub error: FaultError,
}

/// A fault's record, `None` if the run stopped before it began.
pub type FaultResult = Result<Option<FaultRecord>, FaultFailure>;

/// Faults one cluster, one fault at a time.
pub struct Injector<'a> {
    cluster: &'a mut Cluster,
    names: Vec<String>,
    member_client: MemberClient,
    views: MemberViews,
    writes: ProbeWrites,
    rng: SplitMix64,
    started: Instant,
    last_fault: Option<Instant>,
    stop: CancellationToken,
}

/// How holding a fault ended.
enum Held {
    Done,
    Stopped,
    /// kill-leader: no new leader within the bound.
    NoNewLeader,
}

impl<'a> Injector<'a> {
    /// Starts watching `cluster` and writing probes through `target`'s coordinator. `seed`
    /// draws the victims of random kinds and where in a heartbeat interval faults land;
    /// `stop` ends a fault early (it is still undone).
    pub async fn start(
        target: &FaultTarget,
        cluster: &'a mut Cluster,
        seed: u64,
        stop: CancellationToken,
    ) -> Result<Injector<'a>, FaultError> {
        let askers = Asker::for_members(
            target.kind,
            &cluster.endpoints(),
            &target.etcd_security,
            target.zk_access.tls.as_ref(),
        )
        .ok_or_else(|| FaultError::Cluster("the target has no members to fault".into()))?;
        let source = ProbeSource {
            coordinator: target.coordinator.clone(),
            ttl: target.session_ttl,
        };
        let mut sessions = Vec::new();
        for i in 0..PROBES {
            let session = source
                .open(i)
                .await
                .map_err(|e| FaultError::Cluster(format!("opening a probe session: {e}")))?;
            sessions.push(session);
        }
        Ok(Injector {
            names: cluster.member_names(),
            cluster,
            member_client: MemberClient {
                kind: target.kind,
                zk_client: target.zk_client,
                zk_access: target.zk_access.clone(),
                etcd_security: target.etcd_security.clone(),
            },
            views: MemberViews::start(askers),
            writes: ProbeWrites::start(sessions, "/coordbench/failover-probe", source),
            rng: SplitMix64::new(seed),
            started: Instant::now(),
            last_fault: None,
            stop,
        })
    }

    /// The probe writes so far (acknowledged puts of every fault).
    pub fn writes(&self) -> &ProbeWrites {
        &self.writes
    }

    /// When injection started (records' `at_s` count from it).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// When the last fault was applied.
    pub fn last_fault(&self) -> Option<Instant> {
        self.last_fault
    }

    /// Stops the probe writes and the pollers.
    pub async fn finish(self) {
        self.writes.stop().await;
        self.views.stop().await;
    }

    /// One fault of `kind` lasting `duration`, from a healthy cluster to a healthy one.
    pub async fn fault(&mut self, kind: FaultArg, duration: Duration) -> FaultResult {
        let Some((leader, old_term, before)) = self.await_healthy().await? else {
            return Ok(None);
        };
        let action = Action::choose(kind, leader, self.names.len(), &mut self.rng);
        let minority = match action.groups() {
            Some([small, _]) => Some(self.open_minority_client(small, leader).await?),
            None => None,
        };
        let jitter = JITTER.mul_f64(f64::from(self.rng.range(0, 1_000_000)) / 1e6);
        if sleep_or_stop(jitter, &self.stop).await {
            return Ok(None);
        }
        let t_f = Instant::now();
        action.apply(self.cluster).map_err(|e| FaultFailure {
            record: None,
            error: FaultError::Cluster(format!("{}: {e}", kind.name())),
        })?;
        self.last_fault = Some(t_f);
        let minority = minority.map(MinorityClient::start);
        let mut record = self.new_record(kind, &action, t_f, leader, old_term);
        let mut watch = Watch::new(t_f, leader, old_term, &before, action.silenced());
        let held = self.hold(kind, duration, t_f, &mut watch).await;
        let (undone, t_heal) = self.undo(&action, minority, &mut record);
        record.healed_us = Some(micros(t_heal - t_f));
        let failed = |record: FaultRecord, watch: &Watch, error: String| {
            let mut record = record;
            watch.fill(&mut record, &self.names);
            Err(FaultFailure {
                record: Some(Box::new(record)),
                error: FaultError::Cluster(error),
            })
        };
        if let Err(e) = undone {
            return failed(
                record,
                &watch,
                format!("{}: {e}", action.undo_phrase(&self.names)),
            );
        }
        match held {
            Held::Done => {}
            Held::Stopped => record.cut_short = true,
            Held::NoNewLeader => {
                let victim = joined(action.victims(), &self.names);
                let error = format!("no new leader within 30s after killing {victim}");
                return failed(record, &watch, error);
            }
        }
        if !record.cut_short {
            match self.await_recovery(t_heal, &mut watch).await {
                Polled::Found((), at) => record.rejoined_us = Some(micros(at - t_f)),
                Polled::Stopped => record.cut_short = true,
                Polled::TimedOut => {
                    let error = format!(
                        "the cluster did not recover (every member answering, one leader) within 30s of {}",
                        action.undo_phrase(&self.names)
                    );
                    return failed(record, &watch, error);
                }
            }
        }
        if !record.cut_short {
            self.await_writes(t_f).await;
            if kind == FaultArg::RestartAll {
                self.await_new_term(&mut watch).await;
            }
        }
        let acks = self.writes.acks();
        record.first_write_us = first_write_after(&acks, t_f).map(micros);
        record.unavailable_us = longest_gap_around(&acks, t_f).map(micros);
        record.probe_sessions_lost = self.writes.sessions_lost_since(t_f);
        watch.fill(&mut record, &self.names);
        Ok(Some(record))
    }

    /// The leader, its term and every member's answer once the cluster is healthy.
    async fn await_healthy(
        &self,
    ) -> Result<Option<(usize, u64, Vec<Option<MemberView>>)>, FaultFailure> {
        let found = poll_until(
            &self.views,
            &self.stop,
            Instant::now() + BOUND,
            |views, _| healthy(views).map(|(leader, term)| (leader, term, views.to_vec())),
        )
        .await;
        match found {
            Polled::Found(healthy, _) => Ok(Some(healthy)),
            Polled::Stopped => Ok(None),
            Polled::TimedOut => Err(FaultFailure {
                record: None,
                error: FaultError::Cluster(
                    "no healthy cluster (every member up, one leader) within 30s before a fault"
                        .into(),
                ),
            }),
        }
    }

    /// A client of one minority member alone: the old leader if it is in the minority.
    async fn open_minority_client(
        &self,
        minority: &[usize],
        leader: usize,
    ) -> Result<MinorityClient, FaultFailure> {
        let member = if minority.contains(&leader) {
            leader
        } else {
            minority[0]
        };
        let endpoint = &self.cluster.endpoints()[member];
        MinorityClient::open(&self.member_client, endpoint)
            .await
            .map_err(|e| FaultFailure {
                record: None,
                error: FaultError::Cluster(format!(
                    "before partitioning {}: {e}",
                    self.names[member]
                )),
            })
    }

    fn new_record(
        &self,
        kind: FaultArg,
        action: &Action,
        t_f: Instant,
        leader: usize,
        old_term: u64,
    ) -> FaultRecord {
        FaultRecord {
            fault: kind,
            // Milliseconds are plenty, and keep the column short.
            at_s: ((t_f - self.started).as_secs_f64() * 1e3).round() / 1e3,
            victims: joined(action.victims(), &self.names),
            partition: action.partition_text(&self.names),
            old_leader: self.names[leader].clone(),
            old_term,
            new_leader: None,
            new_term: None,
            effect_us: None,
            detect_us: None,
            new_leader_us: None,
            healed_us: None,
            first_write_us: None,
            unavailable_us: None,
            rejoined_us: None,
            workload_gap_us: None,
            workload_resumed_us: None,
            minority_acked_writes: None,
            minority_local_reads: None,
            cut_short: false,
            probe_sessions_lost: 0,
        }
    }

    /// Keeps the fault on for `duration` (kill-leader: see the module doc), watching.
    async fn hold(
        &self,
        kind: FaultArg,
        duration: Duration,
        t_f: Instant,
        watch: &mut Watch,
    ) -> Held {
        let (views, stop) = (&self.views, &self.stop);
        if kind == FaultArg::KillLeader {
            let elected = poll_until(views, stop, t_f + BOUND, |v, at| {
                watch.observe(v, at);
                watch.new_leader_found().then_some(())
            })
            .await;
            match elected {
                Polled::Found(..) => {}
                Polled::Stopped => return Held::Stopped,
                Polled::TimedOut => return Held::NoNewLeader,
            }
            let writes = &self.writes;
            let resumed = poll_until(views, stop, Instant::now() + BOUND, |v, at| {
                watch.observe(v, at);
                writes.resumed_after(t_f).then_some(())
            })
            .await;
            if matches!(resumed, Polled::Stopped) {
                return Held::Stopped;
            }
        }
        let until = match kind {
            FaultArg::KillLeader => (Instant::now() + DOWN).max(t_f + duration),
            _ => t_f + duration,
        };
        let held = poll_until(views, stop, until, |v, at| {
            watch.observe(v, at);
            None::<()>
        })
        .await;
        match held {
            Polled::Stopped => Held::Stopped,
            _ => Held::Done,
        }
    }

    /// Undoes the fault, the minority's client stopped just before; returns when.
    fn undo(
        &mut self,
        action: &Action,
        minority: Option<RunningMinorityClient>,
        record: &mut FaultRecord,
    ) -> (
        Result<(), coordbench_lab::provision::ProvisionError>,
        Instant,
    ) {
        if let Some(counts) = minority.map(RunningMinorityClient::stop) {
            record.minority_acked_writes = Some(counts.acked_writes);
            record.minority_local_reads = Some(counts.local_reads);
        }
        let undone = action.undo(self.cluster);
        (undone, Instant::now())
    }

    async fn await_recovery(&self, t_heal: Instant, watch: &mut Watch) -> Polled<()> {
        poll_until(&self.views, &self.stop, t_heal + BOUND, |v, at| {
            watch.observe(v, at);
            healthy(v).map(|_| ())
        })
        .await
    }

    /// After restart-all, whose old leader may lead again, waits a little
    /// for the views to show its new term: a ZooKeeper-protocol member reports its term as
    /// the epoch of its last zxid, which moves only with the first write of the new epoch,
    /// so the poll after that write is the one that sees it.
    async fn await_new_term(&self, watch: &mut Watch) {
        if watch.new_leader_found() {
            return;
        }
        let _ = poll_until(
            &self.views,
            &self.stop,
            Instant::now() + NEW_TERM_GRACE,
            |v, at| {
                watch.observe(v, at);
                watch.new_leader_found().then_some(())
            },
        )
        .await;
    }

    /// Waits (within the bound) until a probe put issued after `t_f` was acknowledged.
    async fn await_writes(&self, t_f: Instant) {
        let deadline = tokio::time::Instant::now() + BOUND;
        while !self.writes.resumed_after(t_f)
            && tokio::time::Instant::now() < deadline
            && !sleep_or_stop(POLL, &self.stop).await
        {}
    }
}

pub(super) enum Polled<T> {
    /// What `check` found, and when.
    Found(T, Instant),
    Stopped,
    /// The deadline passed first.
    TimedOut,
}

/// Looks at every member's latest answer every `POLL` until `check` (given the answers and
/// when they were read) finds something, the deadline passes, or `stop` fires.
async fn poll_until<T>(
    views: &MemberViews,
    stop: &CancellationToken,
    deadline: Instant,
    mut check: impl FnMut(&[Option<MemberView>], Instant) -> Option<T>,
) -> Polled<T> {
    loop {
        let at = Instant::now();
        if let Some(found) = check(&views.latest(), at) {
            return Polled::Found(found, at);
        }
        if at >= deadline {
            return Polled::TimedOut;
        }
        let next = (at + POLL).min(deadline);
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()) => {}
            _ = stop.cancelled() => return Polled::Stopped,
        }
    }
}

/// True if `stop` fired first.
pub(super) async fn sleep_or_stop(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.cancelled() => true,
    }
}

pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
