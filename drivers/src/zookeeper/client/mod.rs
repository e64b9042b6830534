//! The driver's own ZooKeeper client: sessions over ZooKeeper's wire protocol, with the
//! records of `coordbench-zk-proto`, for real ZooKeeper and the Zab engine alike.
//!
//! Why not a client library: zookeeper-client keeps each session's read buffer at the size
//! of the largest reply it ever received, so 10,000 lock contenders, each listing a queue of
//! 10,000 names, held 4 GB in the load generator (RESULTS.md, "Memory at scale"). Here a
//! reply's buffer lives only while it is decoded ([`conn`]); a session costs its task, a
//! 4 KiB read buffer and its watches.
//!
//! What it offers is what the recipes use: create (with a Stat), delete, getData, setData,
//! exists, getChildren (with or without a one-shot watch), sync, multi, and the session's
//! state. Sessions resume on another server after a broken connection ([`task`]).

mod budget;
mod conn;
mod error;
mod names;
mod task;
mod watches;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use coordbench_tls::rustls::ClientConfig;
use coordbench_zk_proto::proto::{
    op, CreateRequest, PathVersion, PathWatch, SetDataRequest, Stat, WireAcl,
};
use coordbench_zk_proto::reply::{MultiResult, ReplyBody};
use coordbench_zk_proto::request::{MultiOp, Request};
use rand::seq::SliceRandom;
use tokio::sync::{mpsc, oneshot, watch};

pub use error::Error;
pub use names::Names;
use task::{Answer, Call, SessionTask, WatchSpec};
use watches::WatchKind;

/// How a session is opened.
#[derive(Clone, Default)]
pub struct Options {
    /// The session timeout asked for (the server may bound it).
    pub session_timeout: Duration,
    /// Bound on one connection attempt, handshake and authentication included.
    pub connect_timeout: Duration,
    /// `user:password`, sent as `addauth digest` on every connection.
    pub digest: Option<String>,
    pub tls: Option<Arc<ClientConfig>>,
    /// Dropping the client just closes its connection (no closeSession): the servers
    /// expire the session after its timeout, as they would a crashed client's.
    pub detached: bool,
    /// Resume this session (id, password) instead of opening a new one.
    pub session: Option<(i64, Vec<u8>)>,
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Connected,
    /// Between connections; calls wait for the next one.
    Disconnected,
    Expired,
    AuthFailed,
    /// Closed, or every handle dropped.
    Closed,
}

impl SessionState {
    pub fn is_terminated(self) -> bool {
        matches!(
            self,
            SessionState::Expired | SessionState::AuthFailed | SessionState::Closed
        )
    }
}

/// What a watch event says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    NodeCreated,
    NodeDeleted,
    NodeDataChanged,
    NodeChildrenChanged,
    /// The session ended ([`WatchedEvent::session_state`] says how).
    Session,
}

impl EventType {
    /// `Watcher.Event.EventType`'s codes for node events; others are not watch firings.
    fn from_code(code: i32) -> Option<EventType> {
        Some(match code {
            1 => EventType::NodeCreated,
            2 => EventType::NodeDeleted,
            3 => EventType::NodeDataChanged,
            4 => EventType::NodeChildrenChanged,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    pub event_type: EventType,
    pub session_state: SessionState,
    /// The node's path as the client names it (without the chroot).
    pub path: String,
}

/// A one-shot watch set by a read.
pub struct Watcher(oneshot::Receiver<WatchedEvent>);

impl Watcher {
    /// Waits for the event; a session that ended first gives a session event.
    pub async fn changed(self) -> WatchedEvent {
        self.0.await.unwrap_or(WatchedEvent {
            event_type: EventType::Session,
            session_state: SessionState::Closed,
            path: String::new(),
        })
    }
}

/// How nodes are created: ZooKeeper's CreateMode flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    Persistent = 0,
    Ephemeral = 1,
    PersistentSequential = 2,
    EphemeralSequential = 3,
}

/// One op of a [`Client::multi`].
#[derive(Debug, Clone)]
pub enum Op<'a> {
    Check {
        path: &'a str,
        version: i32,
    },
    SetData {
        path: &'a str,
        data: &'a [u8],
        version: i32,
    },
}

/// A session. Dropping it ends the session ([`Options::detached`] says how).
pub struct Client {
    calls: mpsc::UnboundedSender<Call>,
    state: watch::Receiver<SessionState>,
    session_id: i64,
    password: Vec<u8>,
    timeout: Duration,
    chroot: Option<String>,
    /// The server of the current connection.
    server: Arc<Mutex<String>>,
}

impl Client {
    /// Opens (or resumes) a session on the servers of `connect_string` (`host:port,...`
    /// with an optional chroot path), trying each server once, in a random order as
    /// ZooKeeper's own client does, so sessions spread over the servers.
    pub async fn connect(connect_string: &str, options: Options) -> Result<Client, Error> {
        let (mut endpoints, chroot) = parse_connect_string(connect_string)?;
        endpoints.shuffle(&mut rand::rng());
        let timeout_ms = i32::try_from(options.session_timeout.as_millis())
            .map_err(|_| Error::BadArguments("session timeout too long".into()))?;
        let resume = conn::Resume {
            session: options.session.clone(),
            last_zxid: 0,
        };
        let mut failures = Vec::new();
        for (index, endpoint) in endpoints.iter().enumerate() {
            let dial = conn::Dial {
                endpoint,
                tls: options.tls.as_ref(),
                timeout_ms,
                digest: options.digest.as_deref(),
            };
            let opened = tokio::time::timeout(options.connect_timeout, conn::open(&dial, &resume));
            let (reader, writer, negotiated) = match opened.await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) if e.is_terminal() => return Err(e),
                Ok(Err(e)) => {
                    failures.push(e.to_string());
                    continue;
                }
                Err(_) => {
                    failures.push(format!(
                        "{endpoint}: no session within {:?}",
                        options.connect_timeout
                    ));
                    continue;
                }
            };
            let (calls, queued) = mpsc::unbounded_channel();
            let (state_tx, state) = watch::channel(SessionState::Connected);
            let server = Arc::new(Mutex::new(endpoint.clone()));
            let client = Client {
                calls,
                state,
                session_id: negotiated.session_id,
                password: negotiated.password.clone(),
                timeout: negotiated.timeout,
                chroot: chroot.clone(),
                server: server.clone(),
            };
            let task = SessionTask::new(
                endpoints, index, options, negotiated, state_tx, queued, server,
            );
            tokio::spawn(task.run(reader, writer));
            return Ok(client);
        }
        Err(Error::Connect(format!(
            "no server took the session: {}",
            failures.join("; ")
        )))
    }

    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// Id and password, to resume the session from another client ([`Options::session`]).
    pub fn session(&self) -> (i64, Vec<u8>) {
        (self.session_id, self.password.clone())
    }

    /// The timeout the server granted.
    pub fn session_timeout(&self) -> Duration {
        self.timeout
    }

    /// The server (`host:port`) of the session's current or last connection.
    pub fn server(&self) -> String {
        self.server.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub fn state(&self) -> SessionState {
        *self.state.borrow()
    }

    pub fn state_watcher(&self) -> watch::Receiver<SessionState> {
        self.state.clone()
    }

    /// Ends the session on the servers (closeSession): its ephemeral nodes are gone when
    /// this returns `Ok`. The client is closed afterwards, detached or not. A connection lost
    /// before the answer leaves the session open (call again: it goes to the next
    /// connection); an expired session has nothing left to close.
    pub async fn close(&self) -> Result<(), Error> {
        self.call(op::CLOSE_SESSION, Request::CloseSession, None)
            .await
            .map(drop)
    }

    /// Creates `path`; returns the created path (a sequential node's with its number) and
    /// its Stat.
    pub async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &[WireAcl],
    ) -> Result<(String, Stat), Error> {
        let req = CreateRequest {
            path: self.server_path(path),
            data: Some(data.to_vec()),
            acl: acl.to_vec(),
            flags: mode as i32,
            ttl: None,
        };
        match self
            .call(
                op::CREATE2,
                Request::Create {
                    op: op::CREATE2,
                    req,
                },
                None,
            )
            .await?
        {
            ReplyBody::Create2 { path, stat } => Ok((self.client_path(&path), stat)),
            other => Err(unexpected("create2", &other)),
        }
    }

    /// Creates `path` and its missing ancestors as persistent nodes; existing ones are fine.
    pub async fn mkdir(&self, path: &str, acl: &[WireAcl]) -> Result<(), Error> {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            match self.create(&at, b"", CreateMode::Persistent, acl).await {
                Ok(_) | Err(Error::NodeExists) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), Error> {
        let req = Request::Delete(PathVersion {
            path: self.server_path(path),
            version: version.unwrap_or(-1),
        });
        self.call(op::DELETE, req, None).await.map(drop)
    }

    pub async fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat), Error> {
        self.read_data(path, None).await
    }

    /// getData with a watch on the node's data (set only if the node exists).
    pub async fn get_and_watch_data(&self, path: &str) -> Result<(Vec<u8>, Stat, Watcher), Error> {
        let (spec, watcher) = self.watch_spec(path, WatchKind::Data, None);
        let (data, stat) = self.read_data(path, Some(spec)).await?;
        Ok((data, stat, watcher))
    }

    async fn read_data(
        &self,
        path: &str,
        watch: Option<WatchSpec>,
    ) -> Result<(Vec<u8>, Stat), Error> {
        let req = Request::GetData(PathWatch {
            path: self.server_path(path),
            watch: watch.is_some(),
        });
        match self.call(op::GET_DATA, req, watch).await? {
            // Null data reads as empty, as the recipes treat it.
            ReplyBody::Data { data, stat } => Ok((data.unwrap_or_default(), stat)),
            other => Err(unexpected("getData", &other)),
        }
    }

    pub async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let req = Request::SetData(SetDataRequest {
            path: self.server_path(path),
            data: Some(data.to_vec()),
            version: version.unwrap_or(-1),
        });
        match self.call(op::SET_DATA, req, None).await? {
            ReplyBody::Stat(stat) => Ok(stat),
            other => Err(unexpected("setData", &other)),
        }
    }

    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        self.read_stat(path, None).await
    }

    /// exists with a watch: on the data if the node exists, on its creation if not.
    pub async fn exists_and_watch(&self, path: &str) -> Result<(Option<Stat>, Watcher), Error> {
        let (spec, watcher) = self.watch_spec(path, WatchKind::Data, Some(WatchKind::Exist));
        Ok((self.read_stat(path, Some(spec)).await?, watcher))
    }

    async fn read_stat(&self, path: &str, watch: Option<WatchSpec>) -> Result<Option<Stat>, Error> {
        let req = Request::Exists(PathWatch {
            path: self.server_path(path),
            watch: watch.is_some(),
        });
        match self.call(op::EXISTS, req, watch).await {
            Ok(ReplyBody::Stat(stat)) => Ok(Some(stat)),
            Ok(other) => Err(unexpected("exists", &other)),
            Err(Error::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn children(&self, path: &str) -> Result<Names, Error> {
        self.read_children(path, None).await
    }

    /// getChildren with a watch on the node's children (set only if the node exists).
    pub async fn children_and_watch(&self, path: &str) -> Result<(Names, Watcher), Error> {
        let (spec, watcher) = self.watch_spec(path, WatchKind::Child, None);
        Ok((self.read_children(path, Some(spec)).await?, watcher))
    }

    async fn read_children(&self, path: &str, watch: Option<WatchSpec>) -> Result<Names, Error> {
        let req = Request::GetChildren {
            req: PathWatch {
                path: self.server_path(path),
                watch: watch.is_some(),
            },
            with_stat: false,
        };
        let place = budget::listing().await;
        match self.call_answer(op::GET_CHILDREN, req, watch).await? {
            Answer::Names(names) => Ok(names.holding(place)),
            Answer::Body(other) => Err(unexpected("getChildren", &other)),
        }
    }

    /// A read barrier: the server has applied everything committed before it answers.
    pub async fn sync(&self, path: &str) -> Result<(), Error> {
        let req = Request::Sync(self.server_path(path));
        self.call(op::SYNC, req, None).await.map(drop)
    }

    /// A transaction: all of `ops` apply or none. The outer error is the call's; the inner
    /// one an aborted transaction's, with the index of its first failed op.
    pub async fn multi(&self, ops: &[Op<'_>]) -> Result<Result<(), (usize, Error)>, Error> {
        let ops = ops
            .iter()
            .map(|o| match *o {
                Op::Check { path, version } => MultiOp::Check(PathVersion {
                    path: self.server_path(path),
                    version,
                }),
                Op::SetData {
                    path,
                    data,
                    version,
                } => MultiOp::SetData(SetDataRequest {
                    path: self.server_path(path),
                    data: Some(data.to_vec()),
                    version,
                }),
            })
            .collect();
        match self.call(op::MULTI, Request::Multi(ops), None).await? {
            ReplyBody::Multi(results) => Ok(first_failure(&results).map_or(Ok(()), Err)),
            other => Err(unexpected("multi", &other)),
        }
    }

    async fn call(
        &self,
        op: i32,
        request: Request,
        watch: Option<WatchSpec>,
    ) -> Result<ReplyBody, Error> {
        match self.call_answer(op, request, watch).await? {
            Answer::Body(body) => Ok(body),
            Answer::Names(names) => Err(Error::Protocol(format!(
                "op {op} answered with a listing of {} names",
                names.len()
            ))),
        }
    }

    async fn call_answer(
        &self,
        op: i32,
        request: Request,
        watch: Option<WatchSpec>,
    ) -> Result<Answer, Error> {
        let (reply, answer) = oneshot::channel();
        let call = Call {
            op,
            request,
            reply,
            watch,
        };
        if self.calls.send(call).is_err() {
            return Err(self.ended());
        }
        answer.await.unwrap_or_else(|_| Err(self.ended()))
    }

    /// The error for a call made after the session's task ended.
    fn ended(&self) -> Error {
        match self.state() {
            SessionState::Expired => Error::SessionExpired,
            SessionState::AuthFailed => Error::AuthFailed,
            _ => Error::Closed,
        }
    }

    fn watch_spec(
        &self,
        path: &str,
        found: WatchKind,
        missing: Option<WatchKind>,
    ) -> (WatchSpec, Watcher) {
        let (fire, fired) = oneshot::channel();
        let spec = WatchSpec {
            found,
            missing,
            server_path: self.server_path(path),
            client_path: path.to_string(),
            fire,
        };
        (spec, Watcher(fired))
    }

    /// The path on the server: under the chroot, whose own path is `/` to the client.
    fn server_path(&self, path: &str) -> String {
        match &self.chroot {
            Some(root) if path == "/" => root.clone(),
            Some(root) => format!("{root}{path}"),
            None => path.to_string(),
        }
    }

    fn client_path(&self, server_path: &str) -> String {
        match &self.chroot {
            Some(root) => match server_path.strip_prefix(root.as_str()) {
                Some("") => "/".into(),
                Some(rest) => rest.into(),
                None => server_path.into(),
            },
            None => server_path.into(),
        }
    }
}

/// The first failed op of a multi's results: ZooKeeper answers an aborted multi with
/// OK for the ops before the failure, its code, then RUNTIME_INCONSISTENCY.
fn first_failure(results: &[MultiResult]) -> Option<(usize, Error)> {
    results.iter().enumerate().find_map(|(i, r)| match r {
        MultiResult::Error(code) if *code != 0 => Some((i, Error::from_code(*code))),
        _ => None,
    })
}

fn unexpected(what: &str, body: &ReplyBody) -> Error {
    Error::Protocol(format!("{what} answered with {body:?}"))
}

/// `host:port,host:port/chroot` into endpoints and chroot.
fn parse_connect_string(s: &str) -> Result<(Vec<String>, Option<String>), Error> {
    let (hosts, chroot) = match s.find('/') {
        Some(i) => (&s[..i], Some(s[i..].trim_end_matches('/').to_string())),
        None => (s, None),
    };
    let endpoints: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(String::from)
        .collect();
    if endpoints.is_empty() {
        return Err(Error::BadArguments(format!("no servers in {s:?}")));
    }
    Ok((endpoints, chroot.filter(|c| !c.is_empty())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_strings_split_into_servers_and_chroot() {
        let (hosts, chroot) = parse_connect_string("127.0.0.1:1,127.0.0.1:2/bench/run").unwrap();
        assert_eq!(hosts, vec!["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(chroot.as_deref(), Some("/bench/run"));
        assert_eq!(parse_connect_string("h:1").unwrap().1, None);
        assert!(parse_connect_string("/bench").is_err());
    }

    #[test]
    fn an_aborted_multi_names_its_first_failed_op() {
        let results = [
            MultiResult::Error(0),
            MultiResult::Error(-103),
            MultiResult::Error(-2),
        ];
        assert_eq!(first_failure(&results), Some((1, Error::BadVersion)));
        assert_eq!(first_failure(&[MultiResult::Check]), None);
    }
}
