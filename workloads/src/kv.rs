//! Key-value workloads: `kv-put` writes and `kv-get` reads uniformly random keys.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{
    ClientCounters, Consistency, Coordinator, DriverError, Session, SessionOptions,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{Actor, CheckReport, OpResult, Workload, WorkloadError};

/// Whether clients write or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvOp {
    Put,
    Get(Consistency),
}

/// Options of the kv workloads.
#[derive(Debug, Clone)]
pub struct KvOptions {
    pub op: KvOp,
    /// Number of distinct keys (clients pick among them uniformly).
    pub keys: usize,
    /// Value size in bytes.
    pub value_size: usize,
    /// Seed of every client's key choice (client `i` uses `seed + i`).
    pub seed: u64,
}

/// The key of index `i`: fixed width so every key has the same size.
pub fn key_name(i: usize) -> String {
    format!("/coordbench/kv/{i:08}")
}

pub struct KvWorkload {
    options: KvOptions,
    value: Arc<Vec<u8>>,
}

impl KvWorkload {
    pub fn new(options: KvOptions) -> Result<Self, WorkloadError> {
        if options.keys == 0 {
            return Err(WorkloadError::Invalid("--keys must be at least 1".into()));
        }
        let value = Arc::new(vec![b'x'; options.value_size]);
        Ok(KvWorkload { options, value })
    }
}

#[async_trait]
impl Workload for KvWorkload {
    fn name(&self) -> &'static str {
        match self.options.op {
            KvOp::Put => "kv-put",
            KvOp::Get(_) => "kv-get",
        }
    }

    async fn setup(&self, coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        // Reads need keys to exist; writes start from the same state so runs compare.
        const WRITERS: usize = 8;
        let options = SessionOptions {
            ttl: Duration::from_secs(10),
        };
        let mut tasks = Vec::new();
        for w in 0..WRITERS.min(self.options.keys) {
            let mut session = coordinator
                .open_session(w, &options)
                .await
                .map_err(WorkloadError::Setup)?;
            let keys = self.options.keys;
            let value = self.value.clone();
            tasks.push(tokio::spawn(async move {
                for i in (w..keys).step_by(WRITERS) {
                    session.put(&key_name(i), &value).await?;
                }
                session.close().await
            }));
        }
        for task in tasks {
            task.await
                .map_err(|e| {
                    WorkloadError::Setup(DriverError::Server(format!("setup task failed: {e}")))
                })?
                .map_err(WorkloadError::Setup)?;
        }
        Ok(())
    }

    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        Box::new(KvActor {
            session,
            op: self.options.op,
            keys: self.options.keys,
            value: self.value.clone(),
            rng: SmallRng::seed_from_u64(self.options.seed.wrapping_add(client as u64)),
        })
    }

    fn check(&self, _window: (Duration, Duration)) -> CheckReport {
        CheckReport::default()
    }
}

struct KvActor {
    session: Box<dyn Session>,
    op: KvOp,
    keys: usize,
    value: Arc<Vec<u8>>,
    rng: SmallRng,
}

#[async_trait]
impl Actor for KvActor {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        let key = key_name(self.rng.random_range(0..self.keys));
        match self.op {
            KvOp::Put => self.session.put(&key, &self.value).await?,
            KvOp::Get(consistency) => {
                self.session.get(&key, consistency).await?;
            }
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
