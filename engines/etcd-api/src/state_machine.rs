//! [`KvStateMachine`]: the kv store as the runtime's [`StateMachine`], with the watch
//! fan-out fed from every apply, and the simple tokens of applied authentications.

use std::sync::Arc;

use coordbench_kv::auth::AuthCommand;
use coordbench_kv::{Applied, CodecError, Command, KvStore, Response};
use coordbench_node::{SnapshotSync, StateMachine};

use crate::fanout::WatchFanout;
use crate::tokens::SimpleTokens;

/// What applying one log entry yields: the store's [`Applied`], or the decode error of an
/// entry that is not a kv command (identical on every replica).
pub type ApplyOutput = Result<Applied, CodecError>;

/// The etcd data model of one member: its [`KvStore`] and the watchers of its clients.
#[derive(Default)]
pub struct KvStateMachine {
    store: KvStore,
    watches: Arc<WatchFanout>,
    /// Tokens this member accepts (see tokens.rs).
    tokens: Arc<SimpleTokens>,
    /// Bytes of commands applied since the last restore plus the snapshot restored: a
    /// stand-in for etcd's (append-only, never shrinking) database size.
    db_size: u64,
}

impl KvStateMachine {
    pub fn new() -> Self {
        Self::default()
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
}
