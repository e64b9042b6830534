//! The barrier workload: `clients` clients pass `barriers` double barriers in sequence
//! (the ZooKeeper paper's Table 3). Each operation is one client passing one barrier:
//!
//! - **enter**: register in the barrier's group (an ephemeral znode on ZooKeeper, a leased
//!   key on the etcd API: the discovery seam, [`Session::register`]) and read the group: a
//!   client that finds all `clients` there registers in the barrier's *ready* group; the
//!   others watch the ready group until it is not empty. (Watching the count instead
//!   strands a slow client: the first ones through may leave before it saw them all.)
//! - **leave**: deregister and watch the group until it is empty. Nobody registers in a
//!   group again once it emptied, so empty is final.
//!
//! This is ZooKeeper's double-barrier recipe (children of one node, a ready node, children
//! watches), and on the etcd API the same over key prefixes and prefix watches, as etcd's
//! own DoubleBarrier recipe waits on keys under a prefix. Every waiter in leave is told of
//! every departure, so one barrier costs each client O(clients) notifications.
//!
//! The check: nobody returns from enter before every client has sent its registration, and
//! nobody returns from leave before every client has sent its deregistration (a violation
//! each otherwise); every client passed every barrier.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{ClientCounters, Coordinator, DriverError, Registration, Session};
use serde::Serialize;

use crate::{Actor, CheckReport, OpResult, RunClock, Workload, WorkloadError};

#[derive(Debug, Clone)]
pub struct BarrierOptions {
    /// Clients that must meet at every barrier (all clients of the run).
    pub clients: usize,
    /// A prefix unique to the run, so barriers of earlier runs on an attached cluster do
    /// not count.
    pub run_tag: String,
}

/// One client's pass through one barrier, on the run clock.
#[derive(Debug, Clone, Copy)]
struct Pass {
    client: usize,
    barrier: u64,
    /// When it sent its registration and its deregistration, and when enter and leave
    /// returned.
    registering: Duration,
    entered: Duration,
    deregistering: Duration,
    left: Duration,
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BarrierCheck {
    /// Barriers every client passed.
    pub barriers_passed: u64,
    /// Passes recorded (clients × barriers when every client passed every barrier).
    pub passes: u64,
    /// Clients that left `enter` before the last registration, or `leave` before the last
    /// deregistration, summed over barriers.
    pub violations: u64,
}

pub struct BarrierWorkload {
    options: BarrierOptions,
    clock: RunClock,
    passes: Arc<Mutex<Vec<Pass>>>,
}

impl BarrierWorkload {
    pub fn new(options: BarrierOptions, clock: RunClock) -> Result<Self, WorkloadError> {
        if options.clients < 2 {
            return Err(WorkloadError::Invalid(
                "a barrier needs at least 2 clients (--clients)".into(),
            ));
        }
        Ok(BarrierWorkload {
            options,
            clock,
            passes: Arc::default(),
        })
    }
}

#[async_trait]
impl Workload for BarrierWorkload {
    fn name(&self) -> &'static str {
        "barrier"
    }

    async fn setup(&self, _coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        Ok(())
    }

    fn actor(&self, client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        Box::new(Participant {
            session,
            client,
            next_barrier: 0,
            current: None,
            options: self.options.clone(),
            clock: self.clock,
            passes: self.passes.clone(),
        })
    }

    fn check(&self, _window: (Duration, Duration)) -> CheckReport {
        let passes = self.passes.lock().unwrap_or_else(|p| p.into_inner());
        CheckReport {
            barrier: Some(judge(&passes, self.options.clients)),
            ..Default::default()
        }
    }
}

fn judge(passes: &[Pass], clients: usize) -> BarrierCheck {
    let barriers: BTreeSet<u64> = passes.iter().map(|p| p.barrier).collect();
    let mut check = BarrierCheck {
        passes: passes.len() as u64,
        ..Default::default()
    };
    for b in barriers {
        let at: Vec<&Pass> = passes.iter().filter(|p| p.barrier == b).collect();
        let clients_here: BTreeSet<usize> = at.iter().map(|p| p.client).collect();
        if clients_here.len() == clients {
            check.barriers_passed += 1;
        }
        let last_registered = at.iter().map(|p| p.registering).max().unwrap_or_default();
        let last_deregistered = at.iter().map(|p| p.deregistering).max().unwrap_or_default();
        check.violations += at.iter().filter(|p| p.entered < last_registered).count() as u64;
        check.violations += at.iter().filter(|p| p.left < last_deregistered).count() as u64;
    }
    check
}

struct Participant {
    session: Box<dyn Session>,
    client: usize,
    next_barrier: u64,
    /// How far this client got through barrier `next_barrier`: an operation cut off by the
    /// op timeout resumes there (re-registering after leaving would strand the others).
    current: Option<InBarrier>,
    options: BarrierOptions,
    clock: RunClock,
    passes: Arc<Mutex<Vec<Pass>>>,
}

/// One client's progress through one barrier, on the run clock.
#[derive(Debug, Clone, Default)]
struct InBarrier {
    start: Duration,
    registering: Duration,
    /// Until deregistered.
    registration: Option<Registration>,
    entered: Option<Duration>,
    deregistering: Option<Duration>,
}

impl Participant {
    /// Watches `group` until `done` holds of its membership.
    async fn wait_until(
        &mut self,
        group: &str,
        done: impl Fn(usize) -> bool,
    ) -> Result<Duration, DriverError> {
        let mut watch = self.session.watch_members(group).await?;
        loop {
            if done(watch.next().await?.len()) {
                return Ok(self.clock.now());
            }
        }
    }

    /// Enter: once every client is in `group`, whoever sees it says so in `group`'s ready
    /// group (which stays until the run ends), and everyone else waits for that. Waiting
    /// for the count itself would strand a slow client: the first ones through may leave
    /// before it has seen them all.
    async fn enter(&mut self, group: &str) -> Result<Duration, DriverError> {
        let ready = format!("{group}-ready");
        let clients = self.options.clients;
        let mut watch = self.session.watch_members(group).await?;
        if watch.next().await?.len() >= clients {
            let me = format!("c{:05}", self.client);
            self.session.register(&ready, &me, b"").await?;
            return Ok(self.clock.now());
        }
        drop(watch);
        self.wait_until(&ready, |n| n > 0).await
    }
}

#[async_trait]
impl Actor for Participant {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        let barrier = self.next_barrier;
        let group = format!("barrier-{}-{barrier:06}", self.options.run_tag);
        let mut at = self.current.clone().unwrap_or_else(|| InBarrier {
            start: self.clock.now(),
            ..Default::default()
        });
        if at.registration.is_none() && at.deregistering.is_none() {
            let me = format!("c{:05}", self.client);
            at.registering = self.clock.now();
            at.registration = Some(self.session.register(&group, &me, b"").await?);
            self.current = Some(at.clone());
        }
        let entered = match at.entered {
            Some(entered) => entered,
            None => self.enter(&group).await?,
        };
        at.entered = Some(entered);
        self.current = Some(at.clone());
        if let Some(registration) = at.registration.take() {
            at.deregistering = Some(self.clock.now());
            self.session.deregister(registration).await?;
            self.current = Some(at.clone());
        }
        let left = self.wait_until(&group, |n| n == 0).await?;
        self.current = None;
        self.next_barrier += 1;
        self.passes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Pass {
                client: self.client,
                barrier,
                registering: at.registering,
                entered,
                deregistering: at.deregistering.unwrap_or(left),
                left,
            });
        Ok(OpResult {
            latency: Some(left - at.start),
        })
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

    fn pass(client: usize, barrier: u64, times: [u64; 4]) -> Pass {
        let ms = Duration::from_millis;
        Pass {
            client,
            barrier,
            registering: ms(times[0]),
            entered: ms(times[1]),
            deregistering: ms(times[2]),
            left: ms(times[3]),
        }
    }

    #[test]
    fn passes_are_judged_per_barrier() {
        let good = [pass(0, 0, [1, 5, 6, 9]), pass(1, 0, [4, 5, 7, 9])];
        assert_eq!(
            judge(&good, 2),
            BarrierCheck {
                barriers_passed: 1,
                passes: 2,
                violations: 0
            }
        );
        // Client 0 entered at 3, before client 1 registered at 4; and left at 6, before
        // client 1 deregistered at 7.
        let early = [pass(0, 0, [1, 3, 5, 6]), pass(1, 0, [4, 5, 7, 9])];
        assert_eq!(judge(&early, 2).violations, 2);
        assert_eq!(
            judge(&good[..1], 2).barriers_passed,
            0,
            "one client missing"
        );
    }
}
