//! etcd's `Watch` service: one session task per bidirectional stream.
//!
//! The task owns the stream's [`Subscriber`] and forwards, in order: `created` responses
//! with their history replay, live batches from the fan-out, cancel and progress answers.
//! Responses go to the client through a small bounded channel; while the client does not
//! read, the task waits there, its fan-out queue fills, and the fan-out sets its busy
//! watchers aside. Once the client reads again the task sends what was queued, then brings
//! each of those watchers back from the revision it missed (a history replay), as etcd
//! catches up its unsynced watchers: the client sees every event, in order, and the
//! member holds no more for it than the queue.
//!
//! With auth on, the stream runs as the user its `token` names, and a watch on keys that
//! user cannot read is answered created and canceled with etcd's "permission denied".

use std::collections::BTreeMap;
use std::sync::Arc;

use coordbench_kv::auth::{Access, AuthError};
use coordbench_kv::{Event, WatchCreateRequest};
use coordbench_node::Replicator;
use etcd_client::proto::{PbWatchRequest, PbWatchResponse, PbWatchService};
use tokio::sync::mpsc;
use tokio::time::{interval_at, Instant, MissedTickBehavior};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::convert::{self, WatchRequest};
use crate::core::{at_current, Caller, Core};
use crate::fanout::{Batch, Canceled, Created, Subscriber};
use crate::state_machine::KvStateMachine;

/// Responses buffered towards one client.
const OUT_BUFFER: usize = 64;

/// etcd's id for a response that belongs to no watcher (a progress answer, a refused
/// create).
const NO_WATCH: i64 = -1;

pub(crate) struct WatchService<R> {
    pub core: Arc<Core<R>>,
}

#[tonic::async_trait]
impl<R: Replicator<KvStateMachine>> PbWatchService for WatchService<R> {
    type WatchStream = ReceiverStream<Result<PbWatchResponse, Status>>;

    async fn watch(
        &self,
        req: Request<Streaming<PbWatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let who = self.core.caller(req.metadata()).await?;
        let (out, rx) = mpsc::channel(OUT_BUFFER);
        let session = Session {
            who,
            sub: self.core.watches.register(self.core.options.watch_buffer),
            core: self.core.clone(),
            out,
            watchers: BTreeMap::new(),
        };
        tokio::spawn(session.run(req.into_inner()));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// `r` as etcd's notice that a watcher's history is compacted: canceled, with the
/// compaction's revision, no reason, and (as etcd sends it) revision 0 in the header.
fn compacted(r: PbWatchResponse, compact_revision: i64) -> PbWatchResponse {
    PbWatchResponse {
        canceled: true,
        compact_revision,
        ..r
    }
}

/// The client stopped reading; the session ends.
struct Gone;

struct Watcher {
    progress_notify: bool,
    /// No events sent since the last progress tick.
    idle: bool,
    /// Canceled because its start revision was compacted, and not yet canceled by the
    /// client: as in etcd, it keeps its id, a cancel answers for it, and the stream's
    /// progress requests go unanswered until then.
    compacted: bool,
    /// The start revision asked for: etcd answers no progress request while the store
    /// has not reached it.
    start_revision: i64,
}

struct Session<R> {
    core: Arc<Core<R>>,
    who: Caller,
    sub: Subscriber,
    out: mpsc::Sender<Result<PbWatchResponse, Status>>,
    watchers: BTreeMap<i64, Watcher>,
}

enum Step {
    Stop,
    Shutdown,
    Canceled,
    Batch(Batch),
    Request(PbWatchRequest),
    Tick,
}

impl<R: Replicator<KvStateMachine>> Session<R> {
    async fn run(mut self, mut input: Streaming<PbWatchRequest>) {
        let period = self.core.options.watch_progress_interval;
        let mut tick = interval_at(Instant::now() + period, period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let signal = self.sub.cancel_signal();
        loop {
            let step = tokio::select! {
                () = self.core.shutdown.cancelled() => Step::Shutdown,
                () = self.out.closed() => Step::Stop,
                () = signal.wait() => Step::Canceled,
                b = self.sub.recv() => b.map_or(Step::Stop, Step::Batch),
                m = input.message() => match m {
                    Ok(Some(m)) => Step::Request(m),
                    // Client closed its side or reset the stream: etcd ends the call.
                    Ok(None) | Err(_) => Step::Stop,
                },
                _ = tick.tick() => Step::Tick,
            };
            let done = match step {
                Step::Stop => break,
                Step::Shutdown => {
                    let _ = self
                        .out
                        .try_send(Err(Status::unavailable("etcdserver: server stopped")));
                    break;
                }
                Step::Canceled => self.catch_up().await,
                Step::Batch(b) => self.forward(b).await,
                Step::Request(m) => self.handle(m).await,
                Step::Tick => self.progress_notify().await,
            };
            if done.is_err() {
                break;
            }
        }
    }

    fn response(&self, revision: i64, watch_id: i64) -> PbWatchResponse {
        PbWatchResponse {
            header: Some(self.core.stamp().header(revision)),
            watch_id,
            ..Default::default()
        }
    }

    /// Waits for room towards the client, but never past shutdown.
    async fn send(&self, r: PbWatchResponse) -> Result<(), Gone> {
        tokio::select! {
            sent = self.out.send(Ok(r)) => sent.map_err(|_| Gone),
            () = self.core.shutdown.cancelled() => Err(Gone),
        }
    }

    async fn handle(&mut self, m: PbWatchRequest) -> Result<(), Gone> {
        match convert::watch_request(m.request_union) {
            Some(WatchRequest::Create(c)) => self.create(c).await,
            Some(WatchRequest::Cancel { watch_id }) => {
                // Unknown ids get no answer, as in etcd.
                if self.sub.cancel(watch_id) && self.watchers.remove(&watch_id).is_some() {
                    let mut r = self.response(self.core.revision(), watch_id);
                    r.canceled = true;
                    self.send(r).await?;
                }
                Ok(())
            }
            Some(WatchRequest::Progress) => {
                let revision = self.core.revision();
                if !self.in_step(revision) {
                    return Ok(());
                }
                // Everything up to `revision` is queued already: send it first.
                self.drain().await?;
                self.send(self.response(revision, NO_WATCH)).await
            }
            None => Ok(()),
        }
    }

    /// etcd answers a progress request only when the stream has watchers and all of them
    /// are in step at `revision` (a compacted one never is, one waiting for a start
    /// revision ahead of it is not).
    fn in_step(&self, revision: i64) -> bool {
        !self.watchers.is_empty()
            && !self.sub.has_behind()
            && self
                .watchers
                .values()
                .all(|w| !w.compacted && w.start_revision <= revision)
    }

    async fn create(&mut self, req: WatchCreateRequest) -> Result<(), Gone> {
        let (sub, who) = (&self.sub, &self.who);
        // Inside `read`: between applies, so replay and live events neither overlap nor gap.
        let (revision, created) = self.core.replicator.read(|sm| {
            let store = sm.store();
            let who = at_current(who, store);
            let permitted =
                store
                    .auth()
                    .check(who.as_ref(), Access::Read, &req.key, &req.range_end);
            let created = match permitted {
                // etcd refuses a negative start revision as compacted history.
                _ if req.start_revision < 0 => Created::Refused {
                    reason: coordbench_kv::KvError::Compacted {
                        compact_revision: 0,
                    }
                    .to_string(),
                },
                Ok(()) => sub.create(store, &req),
                Err(_) => Created::Refused {
                    reason: AuthError::PermissionDenied.to_string(),
                },
            };
            (store.revision(), created)
        });
        match created {
            Created::Watching { watch_id, replay } => {
                self.watchers.insert(
                    watch_id,
                    Watcher {
                        progress_notify: req.progress_notify,
                        idle: true,
                        compacted: false,
                        start_revision: req.start_revision,
                    },
                );
                let mut r = self.response(revision, watch_id);
                r.created = true;
                self.send(r).await?;
                self.send_events(watch_id, replay).await
            }
            Created::Compacted {
                watch_id,
                compact_revision,
            } => {
                self.watchers.insert(
                    watch_id,
                    Watcher {
                        progress_notify: false,
                        idle: true,
                        compacted: true,
                        start_revision: req.start_revision,
                    },
                );
                let mut r = self.response(revision, watch_id);
                r.created = true;
                self.send(r).await?;
                self.send(compacted(self.response(0, watch_id), compact_revision))
                    .await
            }
            Created::Refused { reason } => {
                let mut r = self.response(revision, NO_WATCH);
                r.created = true;
                r.canceled = true;
                r.cancel_reason = reason;
                self.send(r).await
            }
        }
    }

    /// Sends a watcher's events, one response per revision (a txn's events stay together).
    async fn send_events(&mut self, watch_id: i64, events: Vec<Event>) -> Result<(), Gone> {
        if events.is_empty() {
            return Ok(());
        }
        if let Some(w) = self.watchers.get_mut(&watch_id) {
            w.idle = false;
        }
        let mut group: Vec<Event> = Vec::new();
        for ev in events {
            if group.last().is_some_and(|g| g.revision() != ev.revision()) {
                self.send_group(watch_id, std::mem::take(&mut group))
                    .await?;
            }
            group.push(ev);
        }
        self.send_group(watch_id, group).await
    }

    async fn send_group(&self, watch_id: i64, group: Vec<Event>) -> Result<(), Gone> {
        let Some(revision) = group.first().map(Event::revision) else {
            return Ok(());
        };
        let mut r = self.response(revision, watch_id);
        r.events = group.into_iter().map(convert::event).collect();
        self.send(r).await
    }

    async fn forward(&mut self, batch: Batch) -> Result<(), Gone> {
        for d in batch {
            // Batches queued before a cancel may still name the watcher: skip them.
            if self.watchers.contains_key(&d.watch_id) {
                self.send_events(d.watch_id, d.events).await?;
            }
        }
        Ok(())
    }

    /// Sends the batches queued now, not those queued meanwhile (bounded under load): all
    /// that was dispatched before the call.
    async fn drain(&mut self) -> Result<(), Gone> {
        for _ in 0..self.sub.queued_batches() {
            match self.sub.try_recv() {
                Some(b) => self.forward(b).await?,
                None => break,
            }
        }
        Ok(())
    }

    /// Watchers the fan-out set aside or canceled: first what was queued for them, then
    /// each set-aside watcher's missed history and its return to live events, and each
    /// canceled watcher's cancel.
    async fn catch_up(&mut self) -> Result<(), Gone> {
        let behind = self.sub.take_behind();
        self.drain().await?;
        for watch_id in behind {
            // The client may have canceled it meanwhile.
            if self.watchers.contains_key(&watch_id) {
                self.resume(watch_id).await?;
            }
        }
        self.report_canceled().await
    }

    /// Brings a set-aside watcher back: its missed events, then live ones.
    async fn resume(&mut self, watch_id: i64) -> Result<(), Gone> {
        let sub = &self.sub;
        // Inside `read`, as a create: replay and live events neither overlap nor gap.
        let created = self
            .core
            .replicator
            .read(|sm| sub.resume(sm.store(), watch_id));
        match created {
            Created::Watching { watch_id, replay } => self.send_events(watch_id, replay).await,
            Created::Compacted {
                watch_id,
                compact_revision,
            } => {
                if let Some(w) = self.watchers.get_mut(&watch_id) {
                    w.compacted = true;
                }
                self.send(compacted(self.response(0, watch_id), compact_revision))
                    .await
            }
            Created::Refused { reason } => {
                self.watchers.remove(&watch_id);
                let r = PbWatchResponse {
                    canceled: true,
                    cancel_reason: reason,
                    ..self.response(self.core.revision(), watch_id)
                };
                self.send(r).await
            }
        }
    }

    /// Watchers the fan-out dropped (their history compacted across a snapshot restore):
    /// deliver what was queued for them, then the cancel.
    async fn report_canceled(&mut self) -> Result<(), Gone> {
        self.drain().await?;
        let revision = self.core.revision();
        for Canceled {
            watch_id,
            compact_revision,
            reason,
        } in self.sub.take_canceled()
        {
            if self.watchers.remove(&watch_id).is_some() {
                let r = match compact_revision {
                    0 => PbWatchResponse {
                        canceled: true,
                        cancel_reason: reason,
                        ..self.response(revision, watch_id)
                    },
                    _ => compacted(self.response(0, watch_id), compact_revision),
                };
                self.send(r).await?;
            }
        }
        Ok(())
    }

    /// etcd's progress notification: the current revision, to watchers that asked for it
    /// and got no events in the last interval.
    async fn progress_notify(&mut self) -> Result<(), Gone> {
        if !self.watchers.values().any(|w| w.progress_notify && w.idle) {
            self.watchers.values_mut().for_each(|w| w.idle = true);
            return Ok(());
        }
        let revision = self.core.revision();
        self.drain().await?;
        let idle: Vec<i64> = self
            .watchers
            .iter()
            .filter(|(_, w)| w.progress_notify && w.idle && w.start_revision <= revision)
            .map(|(&id, _)| id)
            .collect();
        for id in idle {
            self.send(self.response(revision, id)).await?;
        }
        self.watchers.values_mut().for_each(|w| w.idle = true);
        Ok(())
    }
}
