//! [`KvStateMachine`]: the kv store as the runtime's [`StateMachine`], with the watch
//! fan-out fed from every apply, the simple tokens of applied authentications, and the
//! lease clock the leader answers keep-alives from ([`StateMachine::leader_query`]).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use coordbench_kv::auth::AuthCommand;
use coordbench_kv::{
    Applied, CodecError, Command, KvStore, LeaseAnswer, LeaseClock, LeaseQuery, LeaseTiming,
    Response,
};
use coordbench_node::{SnapshotSync, StateMachine};

use crate::fanout::WatchFanout;
use crate::tokens::SimpleTokens;

/// What applying one log entry yields: the store's [`Applied`], or the decode error of an
/// entry that is not a kv command (identical on every replica).
pub type ApplyOutput = Result<Applied, CodecError>;

/// The etcd data model of one member: its [`KvStore`], the watchers of its clients, and
/// the lease deadlines it keeps while it leads.
pub struct KvStateMachine {
    store: KvStore,
    watches: Arc<WatchFanout>,
    /// Tokens this member accepts (see tokens.rs).
    tokens: Arc<SimpleTokens>,
    /// Bytes of commands applied since the last restore plus the snapshot restored: a
    /// stand-in for etcd's (append-only, never shrinking) database size.
    db_size: u64,
    /// Lease deadlines on this member's clock, used while it leads. Locked by leader
    /// queries, which run with the state machine shared; apply has it exclusively.
    leases: Mutex<LeaseClock>,
    /// The lease clock's zero: deadlines are on this monotonic clock, never the wall clock.
    epoch: Instant,
}

impl Default for KvStateMachine {
    fn default() -> Self {
        KvStateMachine {
            store: KvStore::default(),
            watches: Arc::default(),
            tokens: Arc::default(),
            db_size: 0,
            leases: Mutex::new(LeaseClock::new(LeaseTiming::default())),
            epoch: Instant::now(),
        }
    }
}

impl KvStateMachine {
    pub fn new() -> Self {
        Self::default()
    }

    /// This state machine with leases timed by `timing` (promotion extension, checkpoint
    /// interval) instead of the defaults.
    pub fn with_lease_timing(self, timing: LeaseTiming) -> Self {
        KvStateMachine {
            leases: Mutex::new(LeaseClock::new(timing)),
            ..self
        }
    }

    /// Milliseconds on the lease clock.
    fn clock_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn lease_clock(&self) -> MutexGuard<'_, LeaseClock> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lease_clock_mut(&mut self) -> &mut LeaseClock {
        self.leases.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// The leader's answer to a lease query (see [`LeaseClock::answer`]).
    fn answer_lease_query(&self, term: u64, query: &[u8]) -> LeaseAnswer {
        match LeaseQuery::decode(query) {
            Ok(q) => self
                .lease_clock()
                .answer(term, self.clock_ms(), &self.store, &q),
            // Members run one build: a query this one cannot read is a bug, answered as
            // nothing to renew rather than a crash of the leader.
            Err(e) => {
                tracing::warn!(error = %e, "undecodable lease query");
                LeaseAnswer::NotFound
            }
        }
    }

    /// A state machine whose values live in an append-only file under `dir` (see
    /// [`KvStore::with_value_dir`]); its snapshots are indexes into that file.
    pub fn with_value_dir(dir: &std::path::Path) -> std::io::Result<Self> {
        Ok(KvStateMachine {
            store: KvStore::with_value_dir(dir)?,
            ..Self::default()
        })
    }

    pub fn store(&self) -> &KvStore {
        &self.store
    }

    /// The watch fan-out; services register their streams here.
    pub fn watches(&self) -> &Arc<WatchFanout> {
        &self.watches
    }

    /// The simple tokens this member accepts.
    pub fn tokens(&self) -> &Arc<SimpleTokens> {
        &self.tokens
    }

    /// Keeps the tokens in step with an applied auth command.
    fn track_tokens(&self, command: &Command, applied: &Applied) {
        let auth = match command {
            Command::Auth(a) => a,
            Command::As { command, .. } => match command.as_ref() {
                Command::Auth(a) => a,
                _ => return,
            },
            _ => return,
        };
        let Ok(Response::Auth { token, .. }) = &applied.result else {
            return;
        };
        match auth {
            AuthCommand::Authenticate { name, .. } => {
                self.tokens.assign(token.clone(), name.clone());
            }
            AuthCommand::Disable => self.tokens.clear(),
            other => {
                if let Some(user) = other.invalidates_user() {
                    self.tokens.invalidate_user(user);
                }
            }
        }
    }

    /// Estimated database size in bytes (see the field's doc).
    pub fn db_size(&self) -> u64 {
        self.db_size
    }
}

impl StateMachine for KvStateMachine {
    type Output = ApplyOutput;

    fn apply(&mut self, index: u64, command: &[u8]) -> ApplyOutput {
        let command_bytes = command.len() as u64;
        let command = Command::decode(command)?;
        let applied = self.store.apply(index, &command);
        let now = self.clock_ms();
        self.lease_clock_mut().observe(&command, &applied, now);
        self.track_tokens(&command, &applied);
        self.db_size = self.db_size.saturating_add(command_bytes);
        // Dispatch never blocks: slow watchers are canceled instead (see fanout.rs).
        self.watches.dispatch(&applied.events);
        Ok(applied)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.store.snapshot()
    }

    fn snapshot_unsynced(&self) -> (Vec<u8>, Option<SnapshotSync>) {
        let (data, pending) = self.store.snapshot_unsynced();
        let sync = pending.map(|p| -> SnapshotSync {
            Box::new(move || p.sync().map_err(|e| format!("value log sync: {e}")))
        });
        (data, sync)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        self.store.restore(snapshot).map_err(|e| e.to_string())?;
        self.lease_clock_mut().demote();
        self.db_size = snapshot.len() as u64;
        self.watches.resync(&self.store);
        Ok(())
    }

    fn transfer_snapshot(&self, local: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.store
            .transfer_snapshot(local)
            .map_err(|e| e.to_string())
    }

    fn failure(&self) -> Option<String> {
        self.store.failure().map(str::to_string)
    }

    /// Lease queries; the runtime's empty one of a new term promotes the lease clock.
    fn leader_query(&self, term: u64, query: &[u8]) -> Vec<u8> {
        if query.is_empty() {
            let now = self.clock_ms();
            self.lease_clock().lead(term, now, &self.store);
            return Vec::new();
        }
        self.answer_lease_query(term, query).encode()
    }
}
