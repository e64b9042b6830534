//! [`Core`]: what every service of a member shares (replicator, identity, options, watch
//! fan-out, shutdown signal) and the request paths they all use: resolve who sends a
//! request (its `token`), propose a command as that user, read serializably or
//! linearizably after the user's permissions are checked, wait on the watch fan-out.

use std::future::Future;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use coordbench_kv::auth::{AuthError, AuthInfo};
use coordbench_kv::txn;
use coordbench_kv::{
    Command, DeleteRangeRequest, DeleteRangeResponse, KvError, KvStore, LeaseAnswer, LeaseQuery,
    PutRequest, PutResponse, RangeRequest, RangeResponse, RequestOp, Response, TxnRequest,
    TxnResponse,
};
use coordbench_node::{NodeError, Replicator};
use tokio_util::sync::CancellationToken;
use tonic::metadata::MetadataMap;

use crate::convert::Stamp;
use crate::error::ApiError;
use crate::fanout::WatchFanout;
use crate::options::{MemberInfo, ServeOptions};
use crate::state_machine::KvStateMachine;
use crate::tokens::token_index;

/// Who sends a request: the user its token names, or `None` (no token, or auth is off),
/// whom every permission check refuses while auth is on.
pub(crate) type Caller = Option<AuthInfo>;

/// The gRPC metadata key etcd's clients send their token in.
const TOKEN_KEY: &str = "token";

/// Proposals retried when the auth state changed between resolving the caller and apply
/// (etcd's server retries "revision of auth store is old" the same way).
const AUTH_RETRIES: usize = 8;

/// `who` as of the store's current auth revision: reads check against the state they read.
pub(crate) fn at_current(who: &Caller, store: &KvStore) -> Caller {
    who.as_ref().map(|c| AuthInfo {
        user: c.user.clone(),
        revision: store.auth().revision(),
    })
}
pub(crate) struct Core<R> {
    pub replicator: R,
    pub cluster_id: u64,
    pub members: Vec<MemberInfo>,
    pub options: ServeOptions,
    pub watches: Arc<WatchFanout>,
    /// Cancelled when the server shuts down: ends streams and waits.
    pub shutdown: CancellationToken,
}

/// Milliseconds on this member's wall clock, which lease commands carry for the log only:
/// lease deadlines are on the leader's monotonic clock (see `KvStateMachine`).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn mismatch(what: &str) -> ApiError {
    ApiError::Internal(format!("unexpected output for a {what} command"))
}

/// etcd serves a read-only txn without ReadIndex only when every op is a serializable range.
fn serializable(t: &TxnRequest) -> bool {
    t.success
        .iter()
        .chain(&t.failure)
        .all(|op| matches!(op, RequestOp::Range(r) if r.serializable))
}

impl<R: Replicator<KvStateMachine>> Core<R> {
    /// Header fields of this member as of now.
    pub fn stamp(&self) -> Stamp {
        let st = self.replicator.status();
        Stamp {
            cluster_id: self.cluster_id,
            member_id: st.id,
            raft_term: st.term,
        }
    }

    /// Runs `f` unless the server shuts down first.
    pub async fn until_shutdown<T>(&self, f: impl Future<Output = T>) -> Result<T, ApiError> {
        tokio::select! {
            t = f => Ok(t),
            () = self.shutdown.cancelled() => Err(ApiError::Node(NodeError::Stopped)),
        }
    }

    /// The user a request's `token` names. Unknown tokens are etcd's "invalid auth token",
    /// unless they name an authentication this member has not applied yet: then it waits
    /// for a read barrier (the authentication committed before the client had the token)
    /// and looks again.
    pub async fn caller(&self, metadata: &MetadataMap) -> Result<Caller, ApiError> {
        let Some(token) = metadata.get(TOKEN_KEY).and_then(|v| v.to_str().ok()) else {
            return Ok(None);
        };
        let resolve = || {
            self.replicator.read(|sm| {
                let auth = sm.store().auth();
                if !auth.enabled() {
                    return Ok(None);
                }
                match sm.tokens().user_of(token) {
                    Some(user) => Ok(Some(AuthInfo {
                        user,
                        revision: auth.revision(),
                    })),
                    None => Err(sm.store().applied_index()),
                }
            })
        };
        match resolve() {
            Ok(caller) => return Ok(caller),
            Err(applied) if token_index(token).is_some_and(|i| i > applied) => {
                self.replicator.read_barrier().await?;
            }
            Err(_) => return Err(AuthError::InvalidAuthToken.into()),
        }
        resolve().map_err(|_| AuthError::InvalidAuthToken.into())
    }

    /// Replicates `cmd` as sent by `who` (permissions checked at apply); returns its
    /// successful response.
    pub async fn propose(&self, who: &Caller, cmd: Command) -> Result<Response, ApiError> {
        let Some(caller) = who else {
            return self.propose_once(&cmd).await;
        };
        let mut cmd = Command::As {
            caller: caller.clone(),
            command: Box::new(cmd),
        };
        for _ in 0..AUTH_RETRIES {
            match self.propose_once(&cmd).await {
                Err(ApiError::Kv(KvError::Auth(AuthError::AuthOldRevision))) => {
                    if let Command::As { caller, .. } = &mut cmd {
                        caller.revision = self.replicator.read(|sm| sm.store().auth().revision());
                    }
                }
                other => return other,
            }
        }
        Err(AuthError::AuthOldRevision.into())
    }

    /// Validates, size-checks and replicates a command; returns its successful response.
    async fn propose_once(&self, cmd: &Command) -> Result<Response, ApiError> {
        cmd.validate()?;
        let bytes = cmd.encode();
        if bytes.len() > self.options.max_request_bytes {
            return Err(ApiError::TooLarge);
        }
        let applied = self.replicator.propose(bytes).await??;
        Ok(applied.result?)
    }

    /// The leader's lease clock's answer to `query` (a follower forwards it to the leader).
    pub async fn ask_leases(&self, query: &LeaseQuery) -> Result<LeaseAnswer, ApiError> {
        let bytes = self.replicator.ask_leader(query.encode()).await?;
        LeaseAnswer::decode(&bytes)
            .map_err(|e| ApiError::Internal(format!("leader's lease answer: {e}")))
    }

    /// Current store revision (a local read).
    pub fn revision(&self) -> i64 {
        self.replicator.read(|sm| sm.store().revision())
    }

    pub async fn range(&self, who: &Caller, req: RangeRequest) -> Result<RangeResponse, ApiError> {
        txn::validate_range(&req)?;
        if !req.serializable {
            self.replicator.read_barrier().await?;
        }
        self.replicator.read(|sm| {
            let store = sm.store();
            store.permit_range(at_current(who, store).as_ref(), &req)?;
            Ok(store.range(&req)?)
        })
    }

    pub async fn put(&self, who: &Caller, req: PutRequest) -> Result<PutResponse, ApiError> {
        match self.propose(who, Command::Put(req)).await? {
            Response::Put(r) => Ok(r),
            _ => Err(mismatch("put")),
        }
    }

    pub async fn delete(
        &self,
        who: &Caller,
        req: DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse, ApiError> {
        match self.propose(who, Command::DeleteRange(req)).await? {
            Response::DeleteRange(r) => Ok(r),
            _ => Err(mismatch("delete")),
        }
    }

    /// A txn without writes is served locally (after ReadIndex unless all serializable);
    /// others go through the log.
    pub async fn txn(&self, who: &Caller, req: TxnRequest) -> Result<TxnResponse, ApiError> {
        if txn::is_read_only(&req) {
            txn::validate_txn(&req)?;
            if !serializable(&req) {
                self.replicator.read_barrier().await?;
            }
            return self.replicator.read(|sm| {
                let store = sm.store();
                store.permit_txn(at_current(who, store).as_ref(), &req)?;
                Ok(store.txn_read_only(&req)?)
            });
        }
        match self.propose(who, Command::Txn(req)).await? {
            Response::Txn(r) => Ok(r),
            _ => Err(mismatch("txn")),
        }
    }
}
