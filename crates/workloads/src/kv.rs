//! Key-value workloads: `kv-put` writes and `kv-get` reads uniformly random keys;
//! `kv-mixed` reads with a probability (the read ratio, drawn per operation from the
//! client's seeded generator) and writes otherwise, over the same keys; `kv-put
//! --create-keys` creates a new key with every write instead.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{ClientCounters, Consistency, Coordinator, DriverError, Session};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::preload::{fill_keys, Fill};
use crate::{Actor, CheckReport, OpClass, OpResult, Workload, WorkloadError};

/// Whether clients write, read, or do both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KvOp {
    Put,
    /// Every write creates a key no one wrote before (the ZooKeeper paper's Table 2).
    Create,
    Get(Consistency),
    /// Each operation a read with probability `read_ratio` (in [0, 1]), else a write.
    Mixed {
        read_ratio: f64,
        consistency: Consistency,
    },
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

/// The `n`th key `client` creates: its own, so no two clients create the same one.
pub fn created_key_name(client: usize, n: u64) -> String {
    format!("/coordbench/kv/new/c{client:06}-{n:010}")
}

pub struct KvWorkload {
    options: KvOptions,
    value: Arc<Vec<u8>>,
    /// Keys `0..preloaded` are already in the store (`--preload-keys`); setup skips them.
    preloaded: usize,
}

impl KvWorkload {
    pub fn new(options: KvOptions) -> Result<Self, WorkloadError> {
        if options.keys == 0 {
            return Err(WorkloadError::Invalid("--keys must be at least 1".into()));
        }
        if let KvOp::Mixed { read_ratio, .. } = options.op {
            if !(0.0..=1.0).contains(&read_ratio) {
                return Err(WorkloadError::Invalid(format!(
                    "--read-ratio must be within [0, 1] (got {read_ratio})"
                )));
            }
        }
        let value = Arc::new(vec![b'x'; options.value_size]);
        Ok(KvWorkload {
            options,
            value,
            preloaded: 0,
        })
    }

    /// The same workload over a store whose first `n` keys were written with the same
    /// value size before it ([`crate::preload`]): setup writes only the rest.
    pub fn after_preload(mut self, n: usize) -> Self {
        self.preloaded = n;
        self
    }
}

#[async_trait]
impl Workload for KvWorkload {
    fn name(&self) -> &'static str {
        match self.options.op {
            KvOp::Put | KvOp::Create => "kv-put",
            KvOp::Get(_) => "kv-get",
            KvOp::Mixed { .. } => "kv-mixed",
        }
    }

    async fn setup(&self, coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        // Creates start from nothing: their keys are new by definition.
        if self.options.op == KvOp::Create {
            return Ok(());
        }
        // Reads need keys to exist; writes start from the same state so runs compare.
        // Enough writers to fill a cluster's group commits (8 took 1-3 s for 1,000 keys
        // on 3 members), in small claims so a short fill still spreads over all of them.
        const SETUP: Fill = Fill {
            writers: 32,
            batch: 16,
        };
        let keys = self.preloaded.min(self.options.keys)..self.options.keys;
        fill_keys(coordinator, keys, self.value.clone(), SETUP, &|_| {}).await
    }

    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        Box::new(KvActor {
            session,
            op: self.options.op,
            keys: self.options.keys,
            value: self.value.clone(),
            rng: SmallRng::seed_from_u64(self.options.seed.wrapping_add(client as u64)),
            last: None,
            client,
            created: 0,
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
    /// kv-mixed: the kind of the operation begun last.
    last: Option<OpClass>,
    client: usize,
    /// Keys this client created so far (`--create-keys`).
    created: u64,
}

impl KvActor {
    /// What the next operation does: kv-mixed draws it (after the key) from the client's
    /// generator, so the same seed gives the same sequence of keys and kinds.
    fn next_op(&mut self) -> KvOp {
        match self.op {
            KvOp::Mixed {
                read_ratio,
                consistency,
            } => {
                // random() is in [0, 1): a ratio of 0 never reads, 1 always does.
                let read = self.rng.random::<f64>() < read_ratio;
                self.last = Some(if read { OpClass::Read } else { OpClass::Write });
                if read {
                    KvOp::Get(consistency)
                } else {
                    KvOp::Put
                }
            }
            op => op,
        }
    }
}

#[async_trait]
impl Actor for KvActor {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        if self.op == KvOp::Create {
            // Numbered before the attempt: a failed create's key is not tried again.
            self.created += 1;
            let key = created_key_name(self.client, self.created);
            self.session.create(&key, &self.value).await?;
            return Ok(OpResult::default());
        }
        let key = key_name(self.rng.random_range(0..self.keys));
        match self.next_op() {
            KvOp::Get(consistency) => {
                self.session.get(&key, consistency).await?;
            }
            _ => self.session.put(&key, &self.value).await?,
        }
        Ok(OpResult::default())
    }

    async fn finish(&mut self) {
        let _ = self.session.close().await;
    }

    fn counters(&self) -> ClientCounters {
        self.session.counters()
    }

    fn op_class(&self) -> Option<OpClass> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_drivers::null::NullCoordinator;
    use coordbench_drivers::SessionOptions;

    /// The kinds client 0 of a kv-mixed workload at `read_ratio` runs in `ops` operations
    /// against the null target.
    async fn kinds(read_ratio: f64, seed: u64, ops: usize) -> Vec<OpClass> {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::new());
        let workload = KvWorkload::new(KvOptions {
            op: KvOp::Mixed {
                read_ratio,
                consistency: Consistency::Linearizable,
            },
            keys: 16,
            value_size: 8,
            seed,
        })
        .unwrap();
        workload.setup(&coordinator).await.unwrap();
        let options = SessionOptions {
            ttl: Duration::from_secs(2),
        };
        let session = coordinator.open_session(0, &options).await.unwrap();
        let mut actor = workload.actor(0, session);
        let mut kinds = Vec::with_capacity(ops);
        for _ in 0..ops {
            actor.run_op().await.unwrap();
            kinds.push(actor.op_class().expect("kv-mixed classifies every op"));
        }
        actor.finish().await;
        kinds
    }

    fn read_share(kinds: &[OpClass]) -> f64 {
        kinds.iter().filter(|k| **k == OpClass::Read).count() as f64 / kinds.len() as f64
    }

    #[tokio::test]
    async fn mixed_reads_at_the_ratio_reproducibly_from_the_seed() {
        let a = kinds(0.7, 42, 20_000).await;
        // 20,000 draws: the share's standard deviation is about 0.003.
        assert!((read_share(&a) - 0.7).abs() < 0.02, "{}", read_share(&a));
        assert_eq!(a, kinds(0.7, 42, 20_000).await, "same seed, same kinds");
        assert_ne!(a, kinds(0.7, 43, 20_000).await, "another seed, other kinds");
    }

    #[tokio::test]
    async fn ratios_zero_and_one_run_one_kind_only() {
        assert!(kinds(0.0, 1, 2_000)
            .await
            .iter()
            .all(|k| *k == OpClass::Write));
        assert!(kinds(1.0, 1, 2_000)
            .await
            .iter()
            .all(|k| *k == OpClass::Read));
    }

    #[test]
    fn a_ratio_outside_zero_to_one_is_refused() {
        for read_ratio in [-0.1, 1.5, f64::NAN] {
            let made = KvWorkload::new(KvOptions {
                op: KvOp::Mixed {
                    read_ratio,
                    consistency: Consistency::Serializable,
                },
                keys: 1,
                value_size: 1,
                seed: 1,
            });
            assert!(
                matches!(made, Err(WorkloadError::Invalid(_))),
                "{read_ratio}"
            );
        }
    }
}
