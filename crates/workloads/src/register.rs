//! The register workload: clients read, write and compare-and-set a few keys, and every
//! operation goes into a history the linearizability checker ([`crate::linearizability`])
//! judges afterwards.
//!
//! Client `c` picks a key uniformly (seeded by `--seed + c`) and, of its operations, reads
//! half, writes a quarter, and compare-and-sets a quarter: a CAS expects the version (and so
//! the value) this client last read of that key, and is a read when it has read none yet.
//! Every write and CAS writes a value unique in the run (`c<client>-<n>`), which is what
//! lets the checker tell writes apart. Setup writes each key's first value; after the window
//! one linearizable read per key ([`Workload::stop`]) makes a write the cluster lost visible.
//!
//! An operation is recorded as invoked before it is sent. One that returns is complete; one
//! that fails or is cancelled (the operation timeout) is *indeterminate* unless it is a read
//! (a read has no effect, so a failed one is simply ignored): it may have taken effect at
//! any time after its invoke, or never, and the checker treats it so.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{
    CasOutcome, ClientCounters, Consistency, Coordinator, DriverError, Session, SessionOptions,
    Versioned,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::linearizability::{self, Call, Checked, Op, Ret, Verdict, Violation};
use crate::{Actor, CheckReport, OpResult, RunClock, Workload, WorkloadError};

/// The client id setup's and the final reads' operations are recorded under.
const SETUP_CLIENT: usize = usize::MAX;
/// Attempts of each final read (a cluster that just healed may still be electing).
const FINAL_READ_ATTEMPTS: usize = 10;
const FINAL_READ_RETRY: Duration = Duration::from_millis(300);

#[derive(Debug, Clone)]
pub struct RegisterOptions {
    /// Keys the clients share.
    pub keys: usize,
    /// How clients read (serializable reads may be stale: the checker then says so).
    pub consistency: Consistency,
    pub seed: u64,
    /// Wall-clock bound on the linearizability check; past it the verdict is `unknown`.
    pub check_budget: Duration,
    /// Operation timeout of setup and the final reads.
    pub op_timeout: Duration,
}

/// The key of register `i`.
pub fn register_key(i: usize) -> String {
    format!("/coordbench/register/{i:04}")
}

/// Operations a history keeps (about 150 bytes each): enough for minutes against any real
/// cluster; the null target fills it in about a minute, after which ops go unrecorded and
/// the verdict is `unknown`.
const HISTORY_CAP: usize = 5_000_000;

/// Every operation of the run, in invoke order (an op's id is its index).
#[derive(Default)]
struct History {
    ops: Mutex<Vec<Op>>,
    /// Set once an op went unrecorded because the history was full.
    truncated: std::sync::atomic::AtomicBool,
}

impl History {
    fn ops(&self) -> MutexGuard<'_, Vec<Op>> {
        // A panic while pushing cannot leave a Vec half-written; keep going.
        self.ops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `call` as invoked now; returns its id, `None` if the history is full.
    fn invoke(&self, clock: &RunClock, client: usize, key: &str, call: Call) -> Option<usize> {
        let mut ops = self.ops();
        let id = ops.len();
        if id >= HISTORY_CAP {
            self.truncated
                .store(true, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        ops.push(Op {
            id: id as u64,
            client,
            key: key.to_string(),
            call,
            invoke_us: micros(clock.now()),
            complete_us: None,
            ret: None,
        });
        Some(id)
    }

    /// Records op `id`'s return now (nothing for an op the full history did not take).
    fn complete(&self, clock: &RunClock, id: Option<usize>, ret: Ret) {
        let Some(id) = id else { return };
        let mut ops = self.ops();
        ops[id].complete_us = Some(micros(clock.now()));
        ops[id].ret = Some(ret);
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn text(value: &[u8]) -> String {
    String::from_utf8_lossy(value).into_owned()
}

/// What the register history shows, for run.json and summary.csv.
#[derive(Debug, Clone, Serialize)]
pub struct RegisterCheck {
    /// `true`, `false` or `unknown` (the check ran out of its budget).
    pub linearizable: &'static str,
    pub ops: usize,
    pub keys: usize,
    /// Operations that failed or timed out and may or may not have taken effect.
    pub indeterminate: usize,
    /// Indeterminate operations nobody observed, which the checker could drop.
    pub pruned: usize,
    /// Reads of a value already overwritten before the read began.
    pub stale_reads: u64,
    /// The shortest excerpt of the history that proves a violation.
    pub violation: Option<Violation>,
    /// Why the verdict is unknown.
    pub unknown_reason: Option<String>,
    pub check_ms: u64,
}

impl RegisterCheck {
    fn of(checked: Checked) -> Self {
        let (linearizable, violation, unknown_reason) = match checked.verdict {
            Verdict::Linearizable => ("true", None, None),
            Verdict::NotLinearizable(v) => ("false", Some(v), None),
            Verdict::Unknown { reason } => ("unknown", None, Some(reason)),
        };
        RegisterCheck {
            linearizable,
            ops: checked.ops,
            keys: checked.keys,
            indeterminate: checked.indeterminate,
            pruned: checked.pruned,
            stale_reads: checked.stale_reads,
            violation,
            unknown_reason,
            check_ms: checked.elapsed.as_millis() as u64,
        }
    }
}

pub struct RegisterWorkload {
    options: RegisterOptions,
    clock: RunClock,
    history: Arc<History>,
    /// Set in setup: where the final reads' session comes from.
    coordinator: Mutex<Option<Arc<dyn Coordinator>>>,
}

impl RegisterWorkload {
    pub fn new(options: RegisterOptions, clock: RunClock) -> Result<Self, WorkloadError> {
        if options.keys == 0 {
            return Err(WorkloadError::Invalid("--keys must be at least 1".into()));
        }
        Ok(RegisterWorkload {
            options,
            clock,
            history: Arc::default(),
            coordinator: Mutex::default(),
        })
    }

    /// The history so far.
    pub fn history(&self) -> Vec<Op> {
        self.history.ops().clone()
    }

    async fn session(
        &self,
        coordinator: &Arc<dyn Coordinator>,
    ) -> Result<Box<dyn Session>, DriverError> {
        let options = SessionOptions {
            ttl: Duration::from_secs(10),
        };
        coordinator.open_session(SETUP_CLIENT, &options).await
    }

    /// One recorded linearizable read of `key` by the setup client, retried on errors.
    async fn final_read(&self, session: &mut dyn Session, key: &str) {
        for attempt in 0..FINAL_READ_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(FINAL_READ_RETRY).await;
            }
            let id = self
                .history
                .invoke(&self.clock, SETUP_CLIENT, key, Call::Read);
            let read = tokio::time::timeout(
                self.options.op_timeout,
                session.get(key, Consistency::Linearizable),
            )
            .await;
            match read {
                Ok(Ok(value)) => {
                    let value = value.as_deref().map(text);
                    self.history.complete(&self.clock, id, Ret::Read { value });
                    return;
                }
                _ => self.history.complete(&self.clock, id, Ret::Failed),
            }
        }
    }
}

#[async_trait]
impl Workload for RegisterWorkload {
    fn name(&self) -> &'static str {
        "register"
    }

    async fn setup(&self, coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        *self
            .coordinator
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(coordinator.clone());
        let mut session = self
            .session(coordinator)
            .await
            .map_err(WorkloadError::Setup)?;
        for k in 0..self.options.keys {
            let key = register_key(k);
            let value = format!("init-{k}");
            let call = Call::Write {
                value: value.clone(),
            };
            let id = self.history.invoke(&self.clock, SETUP_CLIENT, &key, call);
            session
                .put(&key, value.as_bytes())
                .await
                .map_err(WorkloadError::Setup)?;
            self.history.complete(&self.clock, id, Ret::Written);
        }
        let _ = session.close().await;
        Ok(())
    }

    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        Box::new(RegisterActor {
            session,
            client,
            keys: self.options.keys,
            consistency: self.options.consistency,
            rng: SmallRng::seed_from_u64(self.options.seed.wrapping_add(client as u64)),
            clock: self.clock,
            history: self.history.clone(),
            last_read: HashMap::new(),
            written: 0,
        })
    }

    fn check(&self, _window: (Duration, Duration)) -> CheckReport {
        let history = self.history.ops().clone();
        let mut checked = linearizability::check(&history, self.options.check_budget);
        if self
            .history
            .truncated
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            checked.verdict = Verdict::Unknown {
                reason: format!(
                    "the history filled its {HISTORY_CAP} operations and later ones were not recorded; shorten the run"
                ),
            };
        }
        CheckReport {
            register: Some(RegisterCheck::of(checked)),
            ..Default::default()
        }
    }

    /// The final reads: one linearizable read of every key, recorded in the history.
    async fn stop(&self) {
        let coordinator = self
            .coordinator
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(coordinator) = coordinator else {
            return;
        };
        let Ok(mut session) = self.session(&coordinator).await else {
            return;
        };
        for k in 0..self.options.keys {
            self.final_read(session.as_mut(), &register_key(k)).await;
        }
        let _ = session.close().await;
    }

    fn write_history(&self, dir: &Path) -> std::io::Result<()> {
        linearizability::write_jsonl(&dir.join("history.jsonl"), &self.history.ops())
            .map_err(std::io::Error::other)
    }
}

struct RegisterActor {
    session: Box<dyn Session>,
    client: usize,
    keys: usize,
    consistency: Consistency,
    rng: SmallRng,
    clock: RunClock,
    history: Arc<History>,
    /// The version and value this client last read of each key, for its next CAS.
    last_read: HashMap<usize, Versioned>,
    /// Values this client wrote so far: the next one's number.
    written: u64,
}

impl RegisterActor {
    fn next_value(&mut self) -> String {
        self.written += 1;
        format!("c{}-{}", self.client, self.written)
    }

    async fn read(&mut self, k: usize, key: &str) -> Result<(), DriverError> {
        let id = self
            .history
            .invoke(&self.clock, self.client, key, Call::Read);
        match self.session.read_versioned(key, self.consistency).await {
            Ok(read) => {
                let value = read.as_ref().map(|v| text(&v.value));
                self.history.complete(&self.clock, id, Ret::Read { value });
                match read {
                    Some(v) => self.last_read.insert(k, v),
                    None => self.last_read.remove(&k),
                };
                Ok(())
            }
            Err(e) => {
                self.history.complete(&self.clock, id, Ret::Failed);
                Err(e)
            }
        }
    }

    async fn write(&mut self, key: &str) -> Result<(), DriverError> {
        let value = self.next_value();
        let call = Call::Write {
            value: value.clone(),
        };
        let id = self.history.invoke(&self.clock, self.client, key, call);
        // An error leaves the op indeterminate: the write may still take effect.
        self.session.put(key, value.as_bytes()).await?;
        self.history.complete(&self.clock, id, Ret::Written);
        Ok(())
    }

    async fn compare_and_set(
        &mut self,
        k: usize,
        key: &str,
        expected: Versioned,
    ) -> Result<(), DriverError> {
        let new = self.next_value();
        let call = Call::Cas {
            expected: Some(text(&expected.value)),
            new: new.clone(),
        };
        let id = self.history.invoke(&self.clock, self.client, key, call);
        // Whatever happens, the version read is spent.
        self.last_read.remove(&k);
        let outcome = self
            .session
            .compare_and_set(key, expected.version, new.as_bytes())
            .await?;
        let ret = match outcome {
            CasOutcome::Applied => Ret::CasApplied,
            CasOutcome::Rejected { current } => Ret::CasRejected {
                current: current.map(|c| c.as_deref().map(text)),
            },
        };
        self.history.complete(&self.clock, id, ret);
        Ok(())
    }
}

#[async_trait]
impl Actor for RegisterActor {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        let k = self.rng.random_range(0..self.keys);
        let key = register_key(k);
        match self.rng.random_range(0..4) {
            0 | 1 => self.read(k, &key).await?,
            2 => self.write(&key).await?,
            _ => match self.last_read.get(&k).cloned() {
                Some(expected) => self.compare_and_set(k, &key, expected).await?,
                None => self.read(k, &key).await?,
            },
        }
        Ok(OpResult::default())
    }

    async fn finish(&mut self) {
        let _ = self.session.close().await;
    }

    fn counters(&self) -> ClientCounters {
        self.session.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_drivers::null::NullCoordinator;

    fn options() -> RegisterOptions {
        RegisterOptions {
            keys: 2,
            consistency: Consistency::Linearizable,
            seed: 7,
            check_budget: Duration::from_secs(30),
            op_timeout: Duration::from_secs(1),
        }
    }

    /// Sets up, runs `clients` actors for `ops` operations each, stops, and checks.
    async fn run(coordinator: Arc<dyn Coordinator>, clients: usize, ops: usize) -> RegisterCheck {
        let workload = Arc::new(RegisterWorkload::new(options(), RunClock::start()).unwrap());
        workload.setup(&coordinator).await.unwrap();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let session = workload.session(&coordinator).await.unwrap();
            let mut actor = workload.actor(c, session);
            tasks.push(tokio::spawn(async move {
                for _ in 0..ops {
                    actor.run_op().await.unwrap();
                    tokio::task::yield_now().await;
                }
                actor.finish().await;
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        workload.stop().await;
        let history = workload.history();
        assert_eq!(
            history.len(),
            2 + clients * ops + 2,
            "setup, ops, final reads"
        );
        assert!(history.iter().enumerate().all(|(i, op)| op.id == i as u64));
        workload
            .check((Duration::ZERO, Duration::MAX))
            .register
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_correct_target_gives_a_linearizable_history_with_every_kind_of_op() {
        let check = run(Arc::new(NullCoordinator::new()), 4, 300).await;
        assert_eq!(check.linearizable, "true", "{check:?}");
        assert_eq!((check.stale_reads, check.indeterminate), (0, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_target_that_drops_acknowledged_writes_is_not_linearizable() {
        let check = run(Arc::new(NullCoordinator::losing_writes(10)), 4, 300).await;
        assert_eq!(check.linearizable, "false", "{check:?}");
        let violation = check.violation.unwrap();
        assert!(!violation.ops.is_empty() && !violation.why.is_empty());
    }

    #[tokio::test]
    async fn the_history_file_round_trips() {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::new());
        let workload = RegisterWorkload::new(options(), RunClock::start()).unwrap();
        workload.setup(&coordinator).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        workload.write_history(dir.path()).unwrap();
        let read = linearizability::read_jsonl(&dir.path().join("history.jsonl")).unwrap();
        assert_eq!(read, workload.history());
    }
}
