//! The config-watch workload: one writer updates a config key (an operation = one update),
//! and `watchers` watchers follow it with `watch_value`, spread over `sessions` background
//! sessions (thousands of watchers share a few sessions, as services share connections).
//!
//! Every value starts with its version (20 decimal digits), so a watcher knows which
//! version it holds; [`crate::versions`] judges what the watchers saw.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use coordbench_drivers::{
    ClientCounters, Coordinator, DriverError, Session, SessionOptions, ValueWatch,
};

use crate::background::Background;
use crate::bounded;
use crate::versions::VersionLog;
use crate::{Actor, CheckReport, OpResult, RunClock, Workload, WorkloadError};

/// The one config key every watcher follows.
pub const CONFIG_KEY: &str = "/coordbench/config-watch/config";
/// Digits of the version at the start of every value.
const VERSION_DIGITS: usize = 20;
/// How long the watchers may take to catch up with the last update once the window ends.
const DRAIN_BOUND: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct ConfigWatchOptions {
    pub watchers: usize,
    /// Background sessions the watchers are spread over.
    pub sessions: usize,
    pub value_size: usize,
    /// The target's watches deliver every version (etcd API); otherwise they are one-shot
    /// and may coalesce versions (ZooKeeper).
    pub every_version: bool,
    pub ttl: Duration,
}

/// The value of version `v`: its digits, padded to `size` bytes.
pub fn encode(v: u64, size: usize) -> Vec<u8> {
    let mut value = format!("{v:0VERSION_DIGITS$}").into_bytes();
    value.resize(size.max(VERSION_DIGITS), b'.');
    value
}

/// The version a value holds; `None` for a value this workload did not write.
pub fn decode(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value.get(..VERSION_DIGITS)?)
        .ok()?
        .parse()
        .ok()
}

type Log = Arc<Mutex<VersionLog>>;

fn locked(log: &Log) -> std::sync::MutexGuard<'_, VersionLog> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct ConfigWatchWorkload {
    options: ConfigWatchOptions,
    clock: RunClock,
    log: Log,
    /// Every watcher's latest version.
    finals: Arc<Vec<AtomicU64>>,
    background: Background,
}

impl ConfigWatchWorkload {
    pub fn new(options: ConfigWatchOptions, clock: RunClock) -> Result<Self, WorkloadError> {
        if options.watchers == 0 || options.sessions == 0 {
            return Err(WorkloadError::Invalid(
                "--watchers and --conns must be at least 1".into(),
            ));
        }
        let finals = Arc::new((0..options.watchers).map(|_| AtomicU64::new(0)).collect());
        Ok(ConfigWatchWorkload {
            options,
            clock,
            log: Log::default(),
            finals,
            background: Background::default(),
        })
    }

    fn finals(&self) -> Vec<u64> {
        self.finals
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect()
    }

    /// Opens session `s` and the watches of watchers `s`, `s + sessions`, ...
    async fn open_watchers(
        &self,
        coordinator: &Arc<dyn Coordinator>,
        s: usize,
    ) -> Result<(Box<dyn Session>, Vec<(usize, Box<dyn ValueWatch>)>), DriverError> {
        let options = SessionOptions {
            ttl: self.options.ttl,
        };
        // Client ids past the writer's, so drivers spread these sessions like clients.
        let mut session = coordinator.open_session(1 + s, &options).await?;
        let mut watches = Vec::new();
        for w in (s..self.options.watchers).step_by(self.options.sessions) {
            let mut watch = session.watch_value(CONFIG_KEY).await?;
            // The first call returns the current value: the watch is live from here.
            let first = watch.next().await?.as_deref().and_then(decode).unwrap_or(0);
            self.finals[w].store(first, Ordering::Relaxed);
            watches.push((w, watch));
        }
        Ok((session, watches))
    }
}

/// Follows the config until stopped, recording every new version it receives.
async fn follow(
    mut watch: Box<dyn ValueWatch>,
    watcher: usize,
    finals: Arc<Vec<AtomicU64>>,
    log: Log,
    clock: RunClock,
) {
    let mut last = finals[watcher].load(Ordering::Relaxed);
    // A watch that fails is over: what it did not see counts as missed.
    while let Ok(value) = watch.next().await {
        let at = clock.now();
        if let Some(v) = value.as_deref().and_then(decode) {
            locked(&log).seen(&mut last, v, at);
            finals[watcher].store(last, Ordering::Relaxed);
        }
    }
}

#[async_trait]
impl Workload for ConfigWatchWorkload {
    fn name(&self) -> &'static str {
        "config-watch"
    }

    async fn setup(&self, coordinator: &Arc<dyn Coordinator>) -> Result<(), WorkloadError> {
        // Version 0 first, so the key exists before anyone watches it.
        let options = SessionOptions {
            ttl: self.options.ttl,
        };
        let mut writer = coordinator
            .open_session(0, &options)
            .await
            .map_err(WorkloadError::Setup)?;
        let written = writer
            .put(CONFIG_KEY, &encode(0, self.options.value_size))
            .await;
        let _ = writer.close().await;
        written.map_err(WorkloadError::Setup)?;
        let sessions = self.options.sessions.min(self.options.watchers);
        let opened = bounded::at_most(
            (0..sessions).map(|s| self.open_watchers(coordinator, s)),
            bounded::AT_ONCE,
        )
        .await
        .map_err(WorkloadError::Setup)?;
        for (session, watches) in opened {
            self.background.keep(session);
            for (w, watch) in watches {
                self.background.spawn(follow(
                    watch,
                    w,
                    self.finals.clone(),
                    self.log.clone(),
                    self.clock,
                ));
            }
        }
        Ok(())
    }

    fn actor(&self, _client: usize, session: Box<dyn Session>) -> Box<dyn Actor> {
        Box::new(Writer {
            session,
            next: 1,
            value_size: self.options.value_size,
            clock: self.clock,
            log: self.log.clone(),
        })
    }

    fn check(&self, window: (Duration, Duration)) -> CheckReport {
        let check = locked(&self.log).check(&self.finals(), self.options.every_version, window);
        CheckReport {
            config_watch: Some(check),
            ..Default::default()
        }
    }

    fn background_counters(&self) -> ClientCounters {
        self.background.counters()
    }

    async fn stop(&self) {
        let target = locked(&self.log).last_acked();
        let deadline = tokio::time::Instant::now() + DRAIN_BOUND;
        while self.finals().iter().any(|f| *f < target) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.background.stop().await;
    }
}

/// The one writer.
struct Writer {
    session: Box<dyn Session>,
    /// The version the next update writes; advanced only once a write is acknowledged, so
    /// a failed or cancelled write is retried under the same version.
    next: u64,
    value_size: usize,
    clock: RunClock,
    log: Log,
}

#[async_trait]
impl Actor for Writer {
    async fn run_op(&mut self) -> Result<OpResult, DriverError> {
        let value = encode(self.next, self.value_size);
        self.session.put(CONFIG_KEY, &value).await?;
        locked(&self.log).acked(self.next, self.clock.now());
        self.next += 1;
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

    #[test]
    fn values_carry_their_version() {
        let v = encode(42, 256);
        assert_eq!((v.len(), decode(&v)), (256, Some(42)));
        assert_eq!(decode(&encode(7, 0)), Some(7));
        assert_eq!(decode(b"not a version"), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn null_target_watchers_see_every_version() {
        let coordinator: Arc<dyn Coordinator> = Arc::new(NullCoordinator::new());
        let clock = RunClock::start();
        let options = ConfigWatchOptions {
            watchers: 300,
            sessions: 4,
            value_size: 64,
            every_version: true,
            ttl: Duration::from_secs(2),
        };
        let workload = ConfigWatchWorkload::new(options, clock).unwrap();
        workload.setup(&coordinator).await.unwrap();
        let opts = SessionOptions {
            ttl: Duration::from_secs(2),
        };
        let mut writer = workload.actor(0, coordinator.open_session(0, &opts).await.unwrap());
        for _ in 0..50 {
            writer.run_op().await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        writer.finish().await;
        let notified = workload.background_counters().notifications;
        workload.stop().await;
        let c = workload
            .check((Duration::ZERO, Duration::MAX))
            .config_watch
            .unwrap();
        assert_eq!((c.watchers, c.updates), (300, 50));
        assert_eq!((c.missed, c.coalesced), (0, 0));
        assert_eq!(c.delivered_to_all, 50);
        assert_eq!(c.last_us.len(), 50);
        assert!(notified > 0 && notified <= 300 * 51, "{notified}");
    }
}
