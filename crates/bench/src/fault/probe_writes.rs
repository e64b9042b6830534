//! Probe writes around a fault: a few sessions put small keys in a closed loop, each at
//! most every 10 ms (>= 100 Hz together, as docs/reference.md's definition of failover asks) with
//! a short timeout, and record when each acknowledged put was issued and answered. The
//! failover figures read the time to the first write after a fault and the longest gap
//! between acknowledgements.
//! Every put writes a key of its own (`{prefix}/{probe}/{n}`), so the lost-write check
//! ([`super::lost_writes`]) can read back every acknowledged one at the end.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use coordbench_drivers::coordinator::Session;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Probe sessions; they alternate, so one stuck on a dead member does not blind the rest.
pub const PROBES: usize = 4;
/// Each session issues at most one put per period.
const PERIOD: Duration = Duration::from_millis(10);
/// A put slower than this is abandoned (not acknowledged) and the next one issued.
const TIMEOUT: Duration = Duration::from_millis(250);

/// One acknowledged probe put.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    pub issued: Instant,
    pub acked: Instant,
    /// Which probe wrote it, and its sequence number there: the key it wrote.
    pub probe: usize,
    pub seq: u64,
}

/// The running probes and what they recorded.
pub struct ProbeWrites {
    prefix: String,
    acks: Arc<Mutex<Vec<Ack>>>,
    stop: CancellationToken,
    tasks: JoinSet<()>,
}

impl ProbeWrites {
    /// Starts one probe per session; probe `i` writes `{prefix}/{i}/{n}` for n = 0, 1, ...
    pub fn start(sessions: Vec<Box<dyn Session>>, prefix: &str) -> Self {
        let acks = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        for (i, session) in sessions.into_iter().enumerate() {
            let probe = Probe {
                index: i,
                prefix: prefix.to_string(),
            };
            tasks.spawn(run_probe(session, probe, acks.clone(), stop.clone()));
        }
        Self {
            prefix: prefix.to_string(),
            acks,
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
        let acks = self.acks.lock().unwrap_or_else(PoisonError::into_inner);
        acks.iter()
            .rev()
            .take_while(|a| a.acked >= t_f)
            .any(|a| a.issued >= t_f)
    }

    /// Stops the probes and closes their sessions (bounded by the put timeout).
    pub async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Which probe a task is and where its keys go.
struct Probe {
    index: usize,
    prefix: String,
}

fn key_of(prefix: &str, probe: usize, seq: u64) -> String {
    format!("{prefix}/{probe}/{seq:08}")
}

fn value_of(seq: u64) -> Vec<u8> {
    seq.to_string().into_bytes()
}

async fn run_probe(
    mut session: Box<dyn Session>,
    probe: Probe,
    acks: Arc<Mutex<Vec<Ack>>>,
    stop: CancellationToken,
) {
    let mut next = tokio::time::Instant::now();
    let mut seq = 0;
    while !stop.is_cancelled() {
        let issued = Instant::now();
        let key = key_of(&probe.prefix, probe.index, seq);
        let put = tokio::time::timeout(TIMEOUT, session.put(&key, &value_of(seq))).await;
        if let Ok(Ok(())) = put {
            let ack = Ack {
                issued,
                acked: Instant::now(),
                probe: probe.index,
                seq,
            };
            acks.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(ack);
        }
        seq += 1;
        next += PERIOD;
        let now = tokio::time::Instant::now();
        if next < now {
            next = now;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = stop.cancelled() => break,
        }
    }
    let _ = tokio::time::timeout(TIMEOUT, session.close()).await;
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
            acks: Arc::new(Mutex::new(acks.to_vec())),
            stop: CancellationToken::new(),
            tasks: JoinSet::new(),
        };
        assert!(probes(&acks).resumed_after(ms(100)));
        assert!(
            !probes(&acks[..3]).resumed_after(ms(100)),
            "issued before the fault"
        );
    }
}
