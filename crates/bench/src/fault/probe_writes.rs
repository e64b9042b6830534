//! Probe writes around a fault: a few sessions put small keys in a closed loop, each at
//! most every 10 ms (>= 100 Hz together, as docs/reference.md's definition of failover asks) with
//! a short timeout, and record when each acknowledged put was issued and answered. The
//! failover figures read the time to the first write after a fault and the longest gap
//! between acknowledgements.
//! Every put writes a key of its own (`{prefix}/{probe}/{n}`), so the lost-write check
//! ([`super::lost_writes`]) can read back every acknowledged one at the end.
//!
//! A probe whose session is lost (the server expired it, or no put was acknowledged for two
//! TTLs: an outage outlasted it) abandons it and opens a new one, as an application would,
//! so later faults still get their figures; one that cannot get a new session within
//! [`GIVE_UP`] stops, and says why ([`ProbeSessions::gave_up`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use coordbench_drivers::coordinator::Session;
use coordbench_drivers::{Coordinator, DriverError, SessionOptions};
use serde::Serialize;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Probe sessions; they alternate, so one stuck on a dead member does not blind the rest.
pub const PROBES: usize = 4;
/// Each session issues at most one put per period.
const PERIOD: Duration = Duration::from_millis(10);
/// A put slower than this is abandoned (not acknowledged) and the next one issued.
const TIMEOUT: Duration = Duration::from_millis(250);
/// Bound on one attempt to open a replacement session (drivers bound it themselves too).
const REOPEN_ATTEMPT: Duration = Duration::from_secs(10);
/// The pause between failed attempts to open a replacement.
const REOPEN_PAUSE: Duration = Duration::from_millis(200);
/// A probe that has had no session for this long gives up (its reason is recorded): twice
/// the injector's bound on a cluster's recovery.
pub const GIVE_UP: Duration = Duration::from_secs(60);

/// One acknowledged probe put.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    pub issued: Instant,
    pub acked: Instant,
    /// Which probe wrote it, and its sequence number there: the key it wrote.
    pub probe: usize,
    pub seq: u64,
}

/// Where probes open their sessions, first and after losing one.
#[derive(Clone)]
pub struct ProbeSource {
    pub coordinator: Arc<dyn Coordinator>,
    /// The probes' session TTL (the run's `--ttl`).
    pub ttl: Duration,
}

impl ProbeSource {
    /// The session of probe `probe` (a client number no workload client has).
    pub async fn open(&self, probe: usize) -> Result<Box<dyn Session>, DriverError> {
        let options = SessionOptions { ttl: self.ttl };
        self.coordinator
            .open_session(usize::MAX - probe, &options)
            .await
    }
}

/// What happened to the probes' sessions over the run (run.json `faults.probe_sessions`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProbeSessions {
    /// Sessions found lost: expired, or no put acknowledged for two TTLs.
    pub lost: u64,
    /// Replacements opened.
    pub reopened: u64,
    /// Probes that got no replacement within [`GIVE_UP`], each with why.
    pub gave_up: Vec<String>,
}

/// What the probes record, shared with their tasks.
#[derive(Default)]
struct Shared {
    acks: Mutex<Vec<Ack>>,
    sessions: Mutex<(ProbeSessions, Vec<Instant>)>,
}

impl Shared {
    /// The summary and the instants sessions were found lost.
    fn sessions(&self) -> std::sync::MutexGuard<'_, (ProbeSessions, Vec<Instant>)> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The running probes and what they recorded.
pub struct ProbeWrites {
    prefix: String,
    shared: Arc<Shared>,
    stop: CancellationToken,
    tasks: JoinSet<()>,
}

impl ProbeWrites {
    /// Starts one probe per session; probe `i` writes `{prefix}/{i}/{n}` for n = 0, 1, ...
    /// and replaces a lost session from `source`.
    pub fn start(sessions: Vec<Box<dyn Session>>, prefix: &str, source: ProbeSource) -> Self {
        let shared = Arc::new(Shared::default());
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        for (i, session) in sessions.into_iter().enumerate() {
            let probe = Probe {
                index: i,
                prefix: prefix.to_string(),
                source: source.clone(),
                shared: shared.clone(),
            };
            tasks.spawn(run_probe(session, probe, stop.clone()));
        }
        Self {
            prefix: prefix.to_string(),
            shared,
            stop,
            tasks,
        }
    }

    /// Every acknowledged put as (key, value), for the read-back.
    pub fn acknowledged(&self) -> Vec<(String, Vec<u8>)> {
        let prefix = &self.prefix;
        self.acks()
            .iter()
            .map(|a| (key_of(prefix, a.probe, a.seq), value_of(a.seq)))
            .collect()
    }

    /// Acknowledgements so far, in order of their answers.
    pub fn acks(&self) -> Vec<Ack> {
        let mut acks = self
            .shared
            .acks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        acks.sort_by_key(|a| a.acked);
        acks
    }

    /// Whether a put issued at or after `t_f` has been acknowledged. Cheap enough to poll:
    /// it looks only at acknowledgements that came after `t_f`, newest first.
    pub fn resumed_after(&self, t_f: Instant) -> bool {
        let acks = self
            .shared
            .acks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        acks.iter()
            .rev()
            .take_while(|a| a.acked >= t_f)
            .any(|a| a.issued >= t_f)
    }

    /// Probe sessions found lost at or after `t_f`.
    pub fn sessions_lost_since(&self, t_f: Instant) -> u64 {
        let lost = self
            .shared
            .sessions()
            .1
            .iter()
            .filter(|&&at| at >= t_f)
            .count();
        u64::try_from(lost).unwrap_or(u64::MAX)
    }

    /// What happened to the probes' sessions so far.
    pub fn sessions(&self) -> ProbeSessions {
        self.shared.sessions().0.clone()
    }

    /// Stops the probes and closes their sessions (bounded by the put timeout).
    pub async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Which probe a task is, where its keys go, where a replacement session comes from and
/// what it records into.
struct Probe {
    index: usize,
    prefix: String,
    source: ProbeSource,
    shared: Arc<Shared>,
}

impl Probe {
    fn acked(&self, ack: Ack) {
        self.shared
            .acks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(ack);
    }

    fn lost(&self, at: Instant) {
        let mut sessions = self.shared.sessions();
        sessions.0.lost += 1;
        sessions.1.push(at);
    }

    fn reopened(&self) {
        self.shared.sessions().0.reopened += 1;
    }

    fn gave_up(&self, why: String) {
        self.shared
            .sessions()
            .0
            .gave_up
            .push(format!("probe {}: {why}", self.index));
    }
}

fn key_of(prefix: &str, probe: usize, seq: u64) -> String {
    format!("{prefix}/{probe}/{seq:08}")
}

fn value_of(seq: u64) -> Vec<u8> {
    seq.to_string().into_bytes()
}

/// A probe's session, or since when it has had none.
enum Slot {
    Live {
        session: Box<dyn Session>,
        /// The last acknowledgement (or when the session opened).
        last_ok: Instant,
    },
    Lost {
        since: Instant,
        last_error: String,
    },
}

/// Why a failed put means the session is gone for good, if it does: the server expired it,
/// or nothing was acknowledged for two TTLs (the server has expired it by then, whatever
/// the client library believes).
fn lost_because(
    error: Option<&DriverError>,
    last_ok: Instant,
    now: Instant,
    ttl: Duration,
) -> Option<String> {
    match error {
        Some(e @ DriverError::SessionExpired(_)) => Some(e.to_string()),
        _ if now.saturating_duration_since(last_ok) > ttl * 2 => Some(format!(
            "no put acknowledged for {:?} (twice the session TTL)",
            now - last_ok
        )),
        _ => None,
    }
}

/// How one attempt at a replacement session went.
enum Replaced {
    Session(Box<dyn Session>),
    NotYet,
    GaveUp,
    Stopped,
}

impl Probe {
    /// One put (number `seq`) on `session`; why the session is lost, if the outcome says so.
    async fn put(
        &self,
        session: &mut dyn Session,
        last_ok: &mut Instant,
        seq: u64,
    ) -> Option<String> {
        let issued = Instant::now();
        let key = key_of(&self.prefix, self.index, seq);
        let error = match tokio::time::timeout(TIMEOUT, session.put(&key, &value_of(seq))).await {
            Ok(Ok(())) => {
                let acked = Instant::now();
                *last_ok = acked;
                self.acked(Ack {
                    issued,
                    acked,
                    probe: self.index,
                    seq,
                });
                None
            }
            Ok(Err(e)) => Some(e),
            Err(_) => None,
        };
        lost_because(error.as_ref(), *last_ok, Instant::now(), self.source.ttl)
    }

    /// One attempt at a new session for a probe that has had none since `since`; gives up
    /// (recording why) once that is longer ago than [`GIVE_UP`].
    async fn replace(
        &self,
        since: Instant,
        last_error: &mut String,
        stop: &CancellationToken,
    ) -> Replaced {
        let attempt = tokio::select! {
            r = tokio::time::timeout(REOPEN_ATTEMPT, self.source.open(self.index)) => r,
            _ = stop.cancelled() => return Replaced::Stopped,
        };
        match attempt {
            Ok(Ok(session)) => {
                self.reopened();
                return Replaced::Session(session);
            }
            Ok(Err(e)) => *last_error = e.to_string(),
            Err(_) => *last_error = format!("no session within {REOPEN_ATTEMPT:?}"),
        }
        if since.elapsed() > GIVE_UP {
            self.gave_up(format!(
                "no new session within {GIVE_UP:?} of losing its own; last: {last_error}"
            ));
            return Replaced::GaveUp;
        }
        Replaced::NotYet
    }
}

async fn run_probe(session: Box<dyn Session>, probe: Probe, stop: CancellationToken) {
    let mut slot = Slot::Live {
        session,
        last_ok: Instant::now(),
    };
    let mut next = tokio::time::Instant::now();
    let mut seq = 0;
    while !stop.is_cancelled() {
        let pause = match &mut slot {
            Slot::Live { session, last_ok } => {
                let lost = probe.put(session.as_mut(), last_ok, seq).await;
                seq += 1;
                if let Some(why) = lost {
                    session.abandon();
                    let now = Instant::now();
                    probe.lost(now);
                    slot = Slot::Lost {
                        since: now,
                        last_error: why,
                    };
                }
                PERIOD
            }
            Slot::Lost { since, last_error } => {
                match probe.replace(*since, last_error, &stop).await {
                    Replaced::Session(session) => {
                        slot = Slot::Live {
                            session,
                            last_ok: Instant::now(),
                        };
                        PERIOD
                    }
                    Replaced::NotYet => REOPEN_PAUSE,
                    Replaced::GaveUp | Replaced::Stopped => break,
                }
            }
        };
        next += pause;
        let now = tokio::time::Instant::now();
        if next < now {
            next = now;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = stop.cancelled() => break,
        }
    }
    if let Slot::Live { mut session, .. } = slot {
        let _ = tokio::time::timeout(TIMEOUT, session.close()).await;
    }
}

/// t_f to the first acknowledgement of a put issued after t_f.
pub fn first_write_after(acks: &[Ack], t_f: Instant) -> Option<Duration> {
    acks.iter()
        .filter(|a| a.issued >= t_f)
        .map(|a| a.acked)
        .min()
        .map(|t| t - t_f)
}

/// The longest gap between consecutive acknowledgements (any issue time) from the last one
/// before `t_f` up to the first one of a put issued after `t_f`: what clients saw as
/// unavailability around the fault.
pub fn longest_gap_around(acks: &[Ack], t_f: Instant) -> Option<Duration> {
    let first_after = acks
        .iter()
        .filter(|a| a.issued >= t_f)
        .map(|a| a.acked)
        .min()?;
    let mut times: Vec<Instant> = acks.iter().map(|a| a.acked).collect();
    times.sort();
    let start = times.iter().rposition(|&t| t < t_f).unwrap_or(0);
    times[start..]
        .windows(2)
        .take_while(|w| w[0] < first_after)
        .map(|w| w[1] - w[0])
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_write_and_gap_come_from_the_acks_around_the_fault() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let ack = |i: u64, a: u64| Ack {
            issued: ms(i),
            acked: ms(a),
            probe: 0,
            seq: i,
        };
        // Acks every 10 ms, the fault at 100, a put issued at 95 answered at 400, the first
        // put issued after the fault answered at 420.
        let acks = vec![
            ack(70, 80),
            ack(80, 90),
            ack(95, 400),
            ack(150, 420),
            ack(420, 430),
        ];
        assert_eq!(
            first_write_after(&acks, ms(100)),
            Some(Duration::from_millis(320))
        );
        assert_eq!(
            longest_gap_around(&acks, ms(100)),
            Some(Duration::from_millis(310))
        );
        assert_eq!(first_write_after(&acks[..3], ms(100)), None);
        assert_eq!(longest_gap_around(&acks[..3], ms(100)), None);
        let probes = |acks: &[Ack]| ProbeWrites {
            prefix: "p".into(),
            shared: Arc::new(Shared {
                acks: Mutex::new(acks.to_vec()),
                ..Shared::default()
            }),
            stop: CancellationToken::new(),
            tasks: JoinSet::new(),
        };
        assert!(probes(&acks).resumed_after(ms(100)));
        assert!(
            !probes(&acks[..3]).resumed_after(ms(100)),
            "issued before the fault"
        );
    }

    #[test]
    fn a_session_is_lost_when_expired_or_silent_for_two_ttls() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(2);
        let expired = DriverError::SessionExpired("gone".into());
        let unreachable = DriverError::NoLeader("electing".into());
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(lost_because(Some(&expired), t0, at(1), ttl).is_some());
        assert!(lost_because(Some(&unreachable), t0, at(3), ttl).is_none());
        assert!(
            lost_because(None, t0, at(4), ttl).is_none(),
            "exactly two TTLs"
        );
        let why = lost_because(Some(&unreachable), t0, at(5), ttl).expect("silent too long");
        assert!(why.contains("twice the session TTL"), "{why}");
        assert!(
            lost_because(None, t0, at(5), ttl).is_some(),
            "timeouts count too"
        );
    }
}
