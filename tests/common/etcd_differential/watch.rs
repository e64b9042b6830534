//! A run's watch streams, and how their asynchronous answers become a transcript.
//!
//! Events arrive when the server sends them, so after every step each stream with a
//! watcher is drained: a progress request is sent and everything before its answer is the
//! stream's output of that step. etcd answers a progress request only while every watcher
//! of the stream is in step, and drops it otherwise: a watcher replaying history is not
//! (for up to its 100 ms sync loop: the drain asks again until answered), nor one whose
//! start revision is ahead of the store, nor one canceled for compaction until the client
//! cancels it. The client knows the last two from its own requests and answers: while one
//! of them is on the stream, the drain sends no progress request and collects what comes
//! within a quiet period instead. A progress answer whose revision is older than the
//! newest the run has seen is a late one, skipped.
//! What a drain collected is printed per watcher (by id: etcd sends the events of one
//! revision to a stream's watchers in map order), events flattened (etcd batches a
//! replaying watcher's revisions into one response, the engine sends one per revision; the
//! header of an event response is left out for that reason).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::proto::PbWatchResponse;
use futures::channel::mpsc::UnboundedSender;
use tonic::Streaming;

use super::normalise::{self, is_progress, only_events, Names};
use super::wire::{
    path, WatchCancelRequest, WatchProgressRequest, WatchRequest, WatchRequestUnion, Wire,
    CALL_BOUND,
};

/// How long a drain waits for a progress answer before asking again (etcd drops requests
/// while a watcher replays history).
const MAY_NOT_COME: Duration = Duration::from_millis(300);
/// Progress requests sent by one drain before it gives up.
const DRAIN_TRIES: usize = 6;
/// How long to wait for what may not come: the events of a stream that cannot be asked
/// for progress (etcd sends those of a write to its synced watchers at once), the answer
/// to a cancel of an id the client does not know or to a progress request etcd will drop.
const QUIET: Duration = Duration::from_millis(200);

pub struct WatchStream {
    tx: UnboundedSender<WatchRequest>,
    rx: Streaming<PbWatchResponse>,
    /// Watchers created and not canceled, as the answers tell, with the start revision
    /// each was asked for.
    active: BTreeMap<i64, i64>,
    /// Watchers canceled for compaction that the client has not canceled yet.
    compacted: BTreeSet<i64>,
    /// What arrived since the last drain, per watcher.
    pending: BTreeMap<i64, Vec<String>>,
    /// Why the stream ended, once it has.
    ended: Option<String>,
    /// The end is in a transcript already.
    end_told: bool,
}

enum Next {
    Message(PbWatchResponse),
    Timeout,
    Ended,
}

impl WatchStream {
    /// Opens a stream with `create` as its first request; the created answer is left for
    /// [`WatchStream::created`].
    pub async fn open(wire: &mut Wire, create: WatchRequest) -> Result<WatchStream, String> {
        let (tx, rx) = wire
            .stream(path::WATCH, create)
            .await
            .map_err(|s| normalise::status(&s))?;
        Ok(WatchStream {
            tx,
            rx,
            active: BTreeMap::new(),
            compacted: BTreeSet::new(),
            pending: BTreeMap::new(),
            ended: None,
            end_told: false,
        })
    }

    pub fn send(&mut self, req: WatchRequestUnion) {
        let req = WatchRequest {
            request_union: Some(req),
        };
        if self.tx.unbounded_send(req).is_err() && self.ended.is_none() {
            self.ended = Some("request side closed".into());
        }
    }

    async fn next(&mut self, wait: Duration) -> Next {
        if self.ended.is_some() {
            return Next::Ended;
        }
        match tokio::time::timeout(wait, self.rx.message()).await {
            Err(_) => Next::Timeout,
            Ok(Ok(Some(m))) => Next::Message(m),
            Ok(Ok(None)) => {
                self.ended = Some("stream ended".into());
                Next::Ended
            }
            Ok(Err(s)) => {
                self.ended = Some(format!("stream ended: {}", normalise::status(&s)));
                Next::Ended
            }
        }
    }

    /// Keeps a response that is not the one a step waits for, for the next drain.
    fn absorb(&mut self, r: &PbWatchResponse, names: &Names) {
        let entries = self.pending.entry(r.watch_id).or_default();
        if only_events(r) {
            entries.extend(r.events.iter().map(|e| names.event(e)));
            return;
        }
        entries.push(format!("<{}>", names.watch_control(r)));
        if r.canceled {
            self.active.remove(&r.watch_id);
            if r.compact_revision != 0 {
                self.compacted.insert(r.watch_id);
            }
        }
    }

    /// Whether etcd would answer a progress request at revision `latest` (see the module
    /// doc), as far as the client can tell.
    fn in_step(&self, latest: i64) -> bool {
        !self.active.is_empty()
            && self.compacted.is_empty()
            && self.active.values().all(|&start| start <= latest)
    }

    /// Waits for the answer to a create sent on this stream, asking to start at `start`.
    pub async fn created(&mut self, start: i64, names: &Names) -> String {
        loop {
            match self.next(CALL_BOUND).await {
                Next::Message(r) if r.created => {
                    if !r.canceled {
                        self.active.insert(r.watch_id, start);
                    }
                    return names.watch_control(&r);
                }
                Next::Message(r) => self.absorb(&r, names),
                Next::Timeout => return "no created answer".into(),
                Next::Ended => return self.ended.clone().unwrap_or_default(),
            }
        }
    }

    /// Cancels `watch_id`: its canceled answer, or none (etcd answers no unknown id).
    pub async fn cancel(&mut self, watch_id: i64, names: &Names) -> String {
        self.send(WatchRequestUnion::Cancel(WatchCancelRequest { watch_id }));
        let known = self.active.contains_key(&watch_id) || self.compacted.remove(&watch_id);
        let wait = match known {
            true => CALL_BOUND,
            false => QUIET,
        };
        loop {
            match self.next(wait).await {
                Next::Message(r) if r.canceled && r.watch_id == watch_id && !r.created => {
                    self.active.remove(&watch_id);
                    return names.watch_control(&r);
                }
                Next::Message(r) => self.absorb(&r, names),
                Next::Timeout => return "no answer".into(),
                Next::Ended => return self.ended.clone().unwrap_or_default(),
            }
        }
    }

    /// A progress request as a step: its answer, or none (etcd answers none on a stream
    /// without watchers).
    pub async fn progress(&mut self, latest: i64, names: &Names) -> String {
        self.send(WatchRequestUnion::Progress(WatchProgressRequest {}));
        let wait = match self.in_step(latest) {
            true => CALL_BOUND / 10,
            false => QUIET,
        };
        loop {
            match self.next(wait).await {
                Next::Message(r) if is_progress(&r) && revision(&r) >= latest => {
                    return format!("progress {}", names.watch_control(&r));
                }
                Next::Message(r) if is_progress(&r) => {}
                Next::Message(r) => self.absorb(&r, names),
                Next::Timeout => return "no answer".into(),
                Next::Ended => return self.ended.clone().unwrap_or_default(),
            }
        }
    }

    /// Collects what the stream sent up to now (see the module doc) and prints it.
    pub async fn drain(&mut self, latest: i64, names: &Names) -> String {
        if self.in_step(latest) {
            self.fence(latest, names).await;
        } else if !self.active.is_empty() {
            while let Next::Message(r) = self.next(QUIET).await {
                self.absorb(&r, names);
            }
        }
        let mut parts: Vec<String> = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(id, entries)| format!("w{id}[{}]", entries.join(", ")))
            .collect();
        if let (Some(why), false) = (&self.ended, self.end_told) {
            parts.push(why.clone());
            self.end_told = true;
        }
        parts.join(" ")
    }

    /// Asks for progress until answered, keeping what comes before the answer. After an
    /// answer to a repeated request, waits for the answer to an earlier one that may still
    /// come, so that it cannot end a later drain early.
    async fn fence(&mut self, latest: i64, names: &Names) {
        for tries in 1..=DRAIN_TRIES {
            self.send(WatchRequestUnion::Progress(WatchProgressRequest {}));
            loop {
                match self.next(MAY_NOT_COME).await {
                    Next::Message(r) if is_progress(&r) && revision(&r) >= latest => {
                        if tries > 1 {
                            self.settle(names).await;
                        }
                        return;
                    }
                    Next::Message(r) if is_progress(&r) => {}
                    Next::Message(r) => self.absorb(&r, names),
                    Next::Timeout => break,
                    Next::Ended => return,
                }
            }
        }
    }

    /// Takes what arrives within [`MAY_NOT_COME`], progress answers dropped.
    async fn settle(&mut self, names: &Names) {
        while let Next::Message(r) = self.next(MAY_NOT_COME).await {
            if !is_progress(&r) {
                self.absorb(&r, names);
            }
        }
    }

    pub fn watching(&self) -> bool {
        !self.active.is_empty() || !self.pending.is_empty()
    }
}

fn revision(r: &PbWatchResponse) -> i64 {
    r.header.as_ref().map_or(0, |h| h.revision)
}
