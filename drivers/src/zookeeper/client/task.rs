//! The task that owns a session: it writes calls to the current connection, a reader task
//! beside it matches replies to calls and notifications to watches, and when the connection
//! breaks it resumes the session on the next server.
//!
//! As in ZooKeeper's own client: calls in flight when a connection breaks fail with
//! ConnectionLoss (they may or may not have applied); calls made while disconnected wait
//! for the next connection; watches survive and are re-registered (SetWatches) from the
//! last zxid seen. Unlike it, and like Curator's default, the client gives the session up
//! as expired once it has been disconnected for longer than the negotiated session timeout,
//! since the servers will have expired it by then.
//!
//! When every handle of the client is dropped the task ends: a plain session sends
//! closeSession first; a detached one just drops its connection and leaves the session to
//! expire on the servers (how an abandoned client is modelled).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coordbench_zk_proto::code;
use coordbench_zk_proto::jute::Reader;
use coordbench_zk_proto::proto::{op, xid, ReplyHeader, SetWatches, WatcherEvent};
use coordbench_zk_proto::reply::ReplyBody;
use coordbench_zk_proto::request::Request;
use tokio::io::WriteHalf;
use tokio::sync::{mpsc, oneshot, watch};

use super::conn::{self, BoxStream, Dial, FrameReader, Negotiated, Resume};
use super::names::Names;
use super::watches::{WatchKind, Watches};
use super::{Error, EventType, Options, SessionState, WatchedEvent};

/// Calls written to the socket before it is flushed, when many are queued.
const WRITE_BATCH: usize = 64;
/// The pause after a pass over every server failed, before the next pass.
const PASS_PAUSE: Duration = Duration::from_millis(100);

/// What a successful call returns: the decoded record, or a listing kept in its frame.
pub(super) enum Answer {
    Body(ReplyBody),
    Names(Names),
}

type ReplyTo = oneshot::Sender<Result<Answer, Error>>;

/// One call: the request, where its reply goes, and the watch it sets if it succeeds.
pub(super) struct Call {
    pub op: i32,
    pub request: Request,
    pub reply: ReplyTo,
    pub watch: Option<WatchSpec>,
}

/// The watch a read sets: its kind when the node exists, and when it does not (exists
/// sets one on a missing node; getData and getChildren do not).
pub(super) struct WatchSpec {
    pub found: WatchKind,
    pub missing: Option<WatchKind>,
    pub server_path: String,
    pub client_path: String,
    pub fire: oneshot::Sender<WatchedEvent>,
}

/// A call written and not yet answered.
struct InFlight {
    xid: i32,
    op: i32,
    reply: ReplyTo,
    watch: Option<WatchSpec>,
}

/// What the writer and the reader of a session share.
struct Wire {
    /// ZooKeeper answers a session's requests in order, so the oldest is next.
    in_flight: VecDeque<InFlight>,
    watches: Watches,
    last_zxid: i64,
    last_received: Instant,
    /// The server answered closeSession: the connection's end is the session's.
    closed: bool,
}

type Shared = Arc<Mutex<Wire>>;

/// Locks the shared state; a reader that panicked cannot leave it half-updated in a way
/// that matters more than the panic itself, so a poisoned lock is used as is.
fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Wire> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) struct SessionTask {
    pub endpoints: Vec<String>,
    /// The endpoint of the current connection.
    pub current: usize,
    pub options: Options,
    pub negotiated: Negotiated,
    pub state: watch::Sender<SessionState>,
    pub calls: mpsc::UnboundedReceiver<Call>,
    pub next_xid: i32,
    /// Where the client reads which server the session is on.
    server: Arc<Mutex<String>>,
    shared: Shared,
}

/// How a connection ended.
enum Ending {
    /// Every handle was dropped; the task is done.
    Dropped,
    /// The connection broke (or went silent): resume elsewhere.
    Lost,
    /// The session is over (expired, moved, refused authentication).
    Terminal(Error),
}

impl SessionTask {
    pub(super) fn new(
        endpoints: Vec<String>,
        current: usize,
        options: Options,
        negotiated: Negotiated,
        state: watch::Sender<SessionState>,
        calls: mpsc::UnboundedReceiver<Call>,
        server: Arc<Mutex<String>>,
    ) -> SessionTask {
        let shared = Arc::new(Mutex::new(Wire {
            in_flight: VecDeque::new(),
            watches: Watches::default(),
            last_zxid: 0,
            last_received: Instant::now(),
            closed: false,
        }));
        SessionTask {
            endpoints,
            current,
            options,
            negotiated,
            state,
            calls,
            next_xid: 1,
            server,
            shared,
        }
    }

    /// Serves the session from its first connection until it ends.
    pub(super) async fn run(mut self, reader: FrameReader, writer: WriteHalf<BoxStream>) {
        let mut connection = Some((reader, writer));
        let terminal = loop {
            let (reader, writer) = match connection.take() {
                Some(c) => c,
                None => match self.resume().await {
                    Ok(c) => c,
                    Err(e) => break e,
                },
            };
            self.state.send_replace(SessionState::Connected);
            match self.serve(reader, writer).await {
                Ending::Dropped => break Error::Closed,
                Ending::Terminal(e) => break e,
                Ending::Lost if lock(&self.shared).closed => break Error::Closed,
                Ending::Lost => {
                    self.state.send_replace(SessionState::Disconnected);
                    self.fail_in_flight(Error::ConnectionLoss);
                }
            }
        };
        self.end(terminal);
    }

    /// Writes calls and pings on one connection while its reader task reads.
    async fn serve(&mut self, reader: FrameReader, mut writer: WriteHalf<BoxStream>) -> Ending {
        let mut reading = tokio::spawn(read_loop(reader, self.shared.clone()));
        let ping_every = self.negotiated.timeout / 3;
        let silent_after = self.negotiated.timeout * 2 / 3;
        let mut tick = tokio::time::interval(ping_every.max(Duration::from_millis(10)));
        let mut last_sent = Instant::now();
        let ending = loop {
            tokio::select! {
                ended = &mut reading => break match ended {
                    Ok(Some(e)) => Ending::Terminal(e),
                    _ => Ending::Lost,
                },
                call = self.calls.recv() => {
                    let Some(call) = call else {
                        self.close_on_drop(&mut writer).await;
                        break Ending::Dropped;
                    };
                    if self.write_calls(call, &mut writer).await.is_err() {
                        break Ending::Lost;
                    }
                    last_sent = Instant::now();
                }
                _ = tick.tick() => {
                    if lock(&self.shared).last_received.elapsed() > silent_after {
                        break Ending::Lost;
                    }
                    if last_sent.elapsed() >= ping_every {
                        let ping = conn::encode(xid::PING, op::PING, &Request::Ping);
                        if conn::send(&mut writer, &ping).await.is_err() {
                            break Ending::Lost;
                        }
                        last_sent = Instant::now();
                    }
                }
            }
        };
        reading.abort();
        ending
    }

    /// Writes `first` and whatever else is queued (up to [`WRITE_BATCH`]), registering each
    /// as in flight before its bytes leave, so the reader always finds it.
    async fn write_calls(
        &mut self,
        first: Call,
        writer: &mut WriteHalf<BoxStream>,
    ) -> Result<(), Error> {
        let mut frames = Vec::new();
        let mut next = Some(first);
        let mut written = 0;
        while let Some(call) = next.take() {
            written += 1;
            let xid = self.take_xid();
            frames.extend_from_slice(&conn::encode(xid, call.op, &call.request));
            lock(&self.shared).in_flight.push_back(InFlight {
                xid,
                op: call.op,
                reply: call.reply,
                watch: call.watch,
            });
            if written < WRITE_BATCH {
                next = self.calls.try_recv().ok();
            }
        }
        conn::send(writer, &frames).await
    }

    fn take_xid(&mut self) -> i32 {
        let xid = self.next_xid;
        // Positive xids only: negative ones are the protocol's own (ping, auth, ...).
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        xid
    }

    /// A plain session's last act: closeSession, answered (bounded) before the connection
    /// drops, so what it held is gone when the task ends.
    async fn close_on_drop(&mut self, writer: &mut WriteHalf<BoxStream>) {
        if self.options.detached || lock(&self.shared).closed {
            return;
        }
        let (reply, answered) = oneshot::channel();
        let xid = self.take_xid();
        lock(&self.shared).in_flight.push_back(InFlight {
            xid,
            op: op::CLOSE_SESSION,
            reply,
            watch: None,
        });
        let frame = conn::encode(xid, op::CLOSE_SESSION, &Request::CloseSession);
        if conn::send(writer, &frame).await.is_ok() {
            let _ = tokio::time::timeout(self.options.connect_timeout, answered).await;
        }
    }

    /// Resumes the session on the servers in turn, from the one after the broken
    /// connection's, until one takes it or the session timeout has passed.
    async fn resume(&mut self) -> Result<(FrameReader, WriteHalf<BoxStream>), Error> {
        let give_up = Instant::now() + self.negotiated.timeout;
        let per_attempt = (self.negotiated.timeout / self.endpoints.len() as u32)
            .max(Duration::from_millis(100))
            .min(self.options.connect_timeout);
        let mut attempts = 0usize;
        while Instant::now() < give_up {
            // Every handle was dropped meanwhile: nobody is left to resume for.
            if self.calls.is_closed() {
                return Err(Error::Closed);
            }
            if attempts > 0 && attempts % self.endpoints.len() == 0 {
                tokio::time::sleep(PASS_PAUSE).await;
            }
            attempts += 1;
            self.current = (self.current + 1) % self.endpoints.len();
            let resume = Resume {
                session: Some((self.negotiated.session_id, self.negotiated.password.clone())),
                last_zxid: lock(&self.shared).last_zxid,
            };
            let dial = Dial {
                endpoint: &self.endpoints[self.current],
                tls: self.options.tls.as_ref(),
                timeout_ms: self.negotiated.timeout.as_millis() as i32,
                digest: self.options.digest.as_deref(),
            };
            let bound = per_attempt.min(give_up.saturating_duration_since(Instant::now()));
            match tokio::time::timeout(bound, conn::open(&dial, &resume)).await {
                Ok(Ok((reader, mut writer, negotiated))) => {
                    self.negotiated.timeout = negotiated.timeout;
                    if self.rearm_watches(&mut writer).await.is_ok() {
                        lock(&self.shared).last_received = Instant::now();
                        if let Ok(mut server) = self.server.lock() {
                            server.clone_from(&self.endpoints[self.current]);
                        }
                        return Ok((reader, writer));
                    }
                }
                Ok(Err(e)) if e.is_terminal() => return Err(e),
                _ => {}
            }
        }
        Err(Error::SessionExpired)
    }

    /// Re-registers the session's watches on a new connection, from the last zxid seen:
    /// the server fires at once those whose node changed meanwhile.
    async fn rearm_watches(&mut self, writer: &mut WriteHalf<BoxStream>) -> Result<(), Error> {
        let (request, empty) = {
            let mut wire = lock(&self.shared);
            let (data, exist, child) = wire.watches.paths();
            let empty = data.is_empty() && exist.is_empty() && child.is_empty();
            let request = Request::SetWatches(SetWatches {
                relative_zxid: wire.last_zxid,
                data,
                exist,
                child,
                persistent: Vec::new(),
                persistent_recursive: Vec::new(),
            });
            (request, empty)
        };
        if empty {
            return Ok(());
        }
        conn::send(
            writer,
            &conn::encode(xid::SET_WATCHES, op::SET_WATCHES, &request),
        )
        .await
    }

    fn fail_in_flight(&self, error: Error) {
        let failed: Vec<InFlight> = lock(&self.shared).in_flight.drain(..).collect();
        for call in failed {
            let _ = call.reply.send(Err(error.clone()));
        }
    }

    /// The session is over: every call, queued or in flight, and every watch learns it.
    fn end(mut self, error: Error) {
        let state = match &error {
            Error::SessionExpired | Error::SessionMoved => SessionState::Expired,
            Error::AuthFailed => SessionState::AuthFailed,
            _ => SessionState::Closed,
        };
        self.state.send_replace(state);
        self.fail_in_flight(error.clone());
        lock(&self.shared).watches.end_all(state);
        self.calls.close();
        while let Ok(call) = self.calls.try_recv() {
            let _ = call.reply.send(Err(error.clone()));
        }
    }
}

/// Reads one connection's frames until it breaks. `Some(error)` when the server ended the
/// session; `None` when only the connection broke.
async fn read_loop(mut reader: FrameReader, shared: Shared) -> Option<Error> {
    loop {
        let frame = match reader.next().await {
            Ok(Some(frame)) => frame,
            Ok(None) | Err(_) => return None,
        };
        if let Err(e) = dispatch(frame, &shared) {
            return e.is_terminal().then_some(e);
        }
    }
}

/// Hands one frame to its call or its watches.
fn dispatch(frame: Vec<u8>, shared: &Shared) -> Result<(), Error> {
    let mut r = Reader::new(&frame);
    let header = ReplyHeader::decode(&mut r).map_err(|e| Error::Protocol(e.to_string()))?;
    let mut wire = lock(shared);
    wire.last_received = Instant::now();
    if header.zxid > 0 {
        wire.last_zxid = wire.last_zxid.max(header.zxid);
    }
    match header.xid {
        xid::NOTIFICATION => {
            let event = WatcherEvent::decode(&mut r).map_err(|e| Error::Protocol(e.to_string()))?;
            if let Some(kind) = EventType::from_code(event.kind) {
                wire.watches.fire(&event.path, kind);
            }
            Ok(())
        }
        xid::PING | xid::SET_WATCHES => Ok(()),
        xid::AUTH if header.err != 0 => Err(Error::AuthFailed),
        xid::AUTH => Ok(()),
        _ => {
            let call = wire.in_flight.pop_front().ok_or_else(|| {
                Error::Protocol(format!(
                    "reply to xid {} with no call in flight",
                    header.xid
                ))
            })?;
            if call.xid != header.xid {
                let _ = call.reply.send(Err(Error::ConnectionLoss));
                return Err(Error::Protocol(format!(
                    "reply to xid {}, awaiting {}",
                    header.xid, call.xid
                )));
            }
            let body_at = frame.len() - r.remaining();
            wire.closed |= call.op == op::CLOSE_SESSION && header.err == 0;
            answer(&mut wire, call, header.err, frame, body_at);
            match header.err {
                code::SESSION_EXPIRED => Err(Error::SessionExpired),
                _ => Ok(()),
            }
        }
    }
}

/// Decodes a reply (its body at `frame[body_at..]`) for its call, registers the watch it
/// set, and answers the caller.
fn answer(wire: &mut Wire, call: InFlight, err: i32, frame: Vec<u8>, body_at: usize) {
    let result = match err {
        0 => decode(call.op, frame, body_at).map_err(|e| Error::Protocol(e.to_string())),
        e => Err(Error::from_code(e)),
    };
    if let Some(spec) = call.watch {
        let kind = match &result {
            Ok(_) => Some(spec.found),
            Err(Error::NoNode) => spec.missing,
            Err(_) => None,
        };
        if let Some(kind) = kind {
            wire.watches
                .add(spec.server_path, kind, spec.client_path, spec.fire);
        }
    }
    let _ = call.reply.send(result);
}

/// A reply's body: a listing stays in its frame ([`Names`]); other records are decoded.
fn decode(
    op: i32,
    frame: Vec<u8>,
    body_at: usize,
) -> Result<Answer, coordbench_zk_proto::jute::DecodeError> {
    if op == op::GET_CHILDREN {
        return Names::parse(frame, body_at).map(Answer::Names);
    }
    let mut r = Reader::new(frame.get(body_at..).unwrap_or_default());
    ReplyBody::decode(op, &mut r).map(Answer::Body)
}
