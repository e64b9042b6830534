//! [`WatchHub`]: which watcher gets which event. Synchronous and I/O-free;
//! streaming, batching and fragmenting are the runtime's job.
//!
//! Use: keep the hub next to the [`KvStore`] under the same lock. Call
//! [`WatchHub::create`] (replays history from `start_revision` up to the
//! current revision) and pass every [`crate::Applied::events`] to
//! [`WatchHub::dispatch`] right after apply. Because creation and dispatch
//! both happen between applies, each watcher sees every matching event
//! exactly once, in revision order. Watch ids are per hub: one hub per
//! gRPC watch stream mirrors etcd, one per node works as well.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::error::KvError;
use crate::key_range::KeyRange;
use crate::store::KvStore;
use crate::types::{Event, EventKind};

/// etcd's `WatchCreateRequest.FilterType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WatchFilter {
    NoPut,
    NoDelete,
}

/// etcd's `WatchCreateRequest` (minus `fragment`, a delivery matter).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchCreateRequest {
    pub key: Vec<u8>,
    pub range_end: Vec<u8>,
    /// First revision to deliver; `<= 0` = only future events.
    pub start_revision: i64,
    pub progress_notify: bool,
    pub filters: Vec<WatchFilter>,
    pub prev_kv: bool,
    /// Requested id; 0 = the hub picks the next free one.
    pub watch_id: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WatchError {
    /// `start_revision` is below the compaction point; etcd answers with a
    /// canceled watch carrying `compact_revision`.
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted { compact_revision: i64 },
    #[error("mvcc: duplicate watch ID provided on the WatchStream")]
    DuplicateId { watch_id: i64 },
    /// `range_end` is not after `key` (a `"\0"` range_end, from the key on, is fine).
    #[error("mvcc: watcher range is empty")]
    EmptyRange,
}

/// A created watch and the history it must be sent first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchCreated {
    pub watch_id: i64,
    /// Matching events from `start_revision` to the current revision.
    pub replay: Vec<Event>,
}

/// Events for one watcher out of one dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchDelivery {
    pub watch_id: i64,
    pub events: Vec<Event>,
}

#[derive(Debug, Clone)]
struct Watcher {
    range: KeyRange,
    no_put: bool,
    no_delete: bool,
    prev_kv: bool,
    progress_notify: bool,
    /// Lowest revision this watcher has not been given yet.
    next_rev: i64,
    /// Set aside by the runtime (its consumer is behind): dispatch skips it, and
    /// [`WatchHub::resume`] replays from `next_rev`.
    paused: bool,
}

impl Watcher {
    fn wants(&self, ev: &Event) -> bool {
        ev.revision() >= self.next_rev
            && self.range.contains(&ev.kv.key)
            && !match ev.kind {
                EventKind::Put => self.no_put,
                EventKind::Delete => self.no_delete,
            }
    }

    fn shape(&self, ev: &Event) -> Event {
        let mut ev = ev.clone();
        if !self.prev_kv {
            ev.prev_kv = None;
        }
        ev
    }

    /// The events of `events` this watcher is to be given, shaped for it.
    fn matching(&self, events: &[Event]) -> Vec<Event> {
        events
            .iter()
            .filter(|ev| self.wants(ev))
            .map(|ev| self.shape(ev))
            .collect()
    }

    /// The history from `next_rev` up to the store's current revision, after which the
    /// watcher is at the current revision.
    fn catch_up(&mut self, store: &KvStore) -> Result<Vec<Event>, WatchError> {
        let current = store.revision();
        if self.next_rev > current {
            return Ok(Vec::new());
        }
        let history = store
            .events_since(self.next_rev, &self.range)
            .map_err(|e| match e {
                KvError::Compacted { compact_revision } => {
                    WatchError::Compacted { compact_revision }
                }
                // events_since fails only on compaction; keep the mapping total.
                _ => WatchError::Compacted {
                    compact_revision: store.compact_revision(),
                },
            })?;
        let replay = self.matching(&history);
        self.next_rev = current + 1;
        Ok(replay)
    }
}

#[derive(Debug, Clone, Default)]
pub struct WatchHub {
    watchers: BTreeMap<i64, Watcher>,
    next_id: i64,
}

impl WatchHub {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a watcher and returns its id and history replay.
    pub fn create(
        &mut self,
        store: &KvStore,
        req: &WatchCreateRequest,
    ) -> Result<WatchCreated, WatchError> {
        let watch_id = if req.watch_id != 0 {
            req.watch_id
        } else {
            while self.watchers.contains_key(&self.next_id) {
                self.next_id = self.next_id.wrapping_add(1);
            }
            self.next_id
        };
        let created = self.create_with_id(store, req, watch_id)?;
        if req.watch_id == 0 {
            self.next_id = watch_id.wrapping_add(1);
        }
        Ok(created)
    }

    /// Registers a watcher under exactly `watch_id` (0 included, unlike a request's 0,
    /// which asks for the next free id): how a watcher is re-created after a restore.
    pub fn create_with_id(
        &mut self,
        store: &KvStore,
        req: &WatchCreateRequest,
        watch_id: i64,
    ) -> Result<WatchCreated, WatchError> {
        let to_end = req.range_end.is_empty() || req.range_end == [0];
        if !to_end && req.key >= req.range_end {
            return Err(WatchError::EmptyRange);
        }
        if self.watchers.contains_key(&watch_id) {
            return Err(WatchError::DuplicateId { watch_id });
        }
        let current = store.revision();
        let mut w = Watcher {
            range: KeyRange::new(&req.key, &req.range_end),
            no_put: req.filters.contains(&WatchFilter::NoPut),
            no_delete: req.filters.contains(&WatchFilter::NoDelete),
            prev_kv: req.prev_kv,
            progress_notify: req.progress_notify,
            next_rev: if req.start_revision > 0 {
                req.start_revision
            } else {
                current + 1
            },
            paused: false,
        };
        let replay = w.catch_up(store)?;
        self.watchers.insert(watch_id, w);
        Ok(WatchCreated { watch_id, replay })
    }

    /// Sets a watcher aside: it keeps its id but gets nothing until [`WatchHub::resume`],
    /// which starts at `from_revision` (the first revision its consumer was not given).
    /// False if there is none with that id.
    pub fn pause(&mut self, watch_id: i64, from_revision: i64) -> bool {
        let Some(w) = self.watchers.get_mut(&watch_id) else {
            return false;
        };
        w.paused = true;
        w.next_rev = w.next_rev.min(from_revision);
        true
    }

    /// Takes a paused watcher back: the history it missed, after which dispatch gives it
    /// live events again (nothing for a watcher that is not paused). On compacted history
    /// it stays paused, holding its id until canceled, as etcd keeps a compacted watcher's.
    pub fn resume(&mut self, store: &KvStore, watch_id: i64) -> Result<Vec<Event>, WatchError> {
        let Some(w) = self.watchers.get_mut(&watch_id).filter(|w| w.paused) else {
            return Ok(Vec::new());
        };
        let replay = w.catch_up(store)?;
        w.paused = false;
        Ok(replay)
    }

    /// Removes a watcher; false if there was none with that id.
    pub fn cancel(&mut self, watch_id: i64) -> bool {
        self.watchers.remove(&watch_id).is_some()
    }

    /// Routes the events of one apply to the watchers that match them,
    /// ascending by watch id; watchers with nothing new are left out.
    pub fn dispatch(&mut self, events: &[Event]) -> Vec<WatchDelivery> {
        let Some(last) = events.iter().map(Event::revision).max() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (&watch_id, w) in self.watchers.iter_mut().filter(|(_, w)| !w.paused) {
            let matched = w.matching(events);
            if w.next_rev <= last {
                w.next_rev = last + 1;
            }
            if !matched.is_empty() {
                out.push(WatchDelivery {
                    watch_id,
                    events: matched,
                });
            }
        }
        out
    }

    /// Ids of watchers that asked for progress notifications; the runtime
    /// sends them the store revision when they have been idle.
    pub fn progress_notify_ids(&self) -> Vec<i64> {
        self.watchers
            .iter()
            .filter(|(_, w)| w.progress_notify)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Revision up to which a watcher has been given every event (etcd's
    /// progress revision); `None` for an unknown id. A watcher created with
    /// a future `start_revision` reports the revision before it.
    pub fn progress_revision(&self, watch_id: i64) -> Option<i64> {
        self.watchers.get(&watch_id).map(|w| w.next_rev - 1)
    }

    pub fn len(&self) -> usize {
        self.watchers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.watchers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::types::{DeleteRangeRequest, PutRequest};

    fn put(k: &[u8], v: &[u8]) -> Command {
        Command::Put(PutRequest {
            key: k.to_vec(),
            value: v.to_vec(),
            ..Default::default()
        })
    }

    fn del(k: &[u8]) -> Command {
        Command::DeleteRange(DeleteRangeRequest {
            key: k.to_vec(),
            ..Default::default()
        })
    }

    #[test]
    fn replay_then_live() {
        let mut s = KvStore::new();
        let mut hub = WatchHub::new();
        s.apply(1, &put(b"a", b"1")); // 2
        s.apply(2, &put(b"b", b"1")); // 3
        let c = hub
            .create(
                &s,
                &WatchCreateRequest {
                    key: b"a".to_vec(),
                    range_end: b"c".to_vec(),
                    start_revision: 2,
                    prev_kv: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(c.watch_id, 0);
        assert_eq!(
            c.replay.iter().map(Event::revision).collect::<Vec<_>>(),
            vec![2, 3]
        );
        let now = hub
            .create(
                &s,
                &WatchCreateRequest {
                    key: b"a".to_vec(),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(now.replay.is_empty());
        let no_del = hub
            .create(
                &s,
                &WatchCreateRequest {
                    key: b"a".to_vec(),
                    filters: vec![WatchFilter::NoDelete],
                    watch_id: 7,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(no_del.watch_id, 7);
        assert_eq!(
            hub.create(
                &s,
                &WatchCreateRequest {
                    key: b"a".to_vec(),
                    watch_id: 7,
                    ..Default::default()
                }
            ),
            Err(WatchError::DuplicateId { watch_id: 7 })
        );

        let applied = s.apply(3, &put(b"a", b"2")); // 4
        let d = hub.dispatch(&applied.events);
        assert_eq!(
            d.iter().map(|d| d.watch_id).collect::<Vec<_>>(),
            vec![0, 1, 7]
        );
        assert!(d[0].events[0].prev_kv.is_some());
        assert!(d[1].events[0].prev_kv.is_none(), "prev_kv only when asked");
        let applied = s.apply(4, &del(b"a")); // 5
        let d = hub.dispatch(&applied.events);
        assert_eq!(
            d.iter().map(|d| d.watch_id).collect::<Vec<_>>(),
            vec![0, 1],
            "NoDelete filters deletes"
        );
        assert_eq!(hub.progress_revision(7), Some(5));
        assert!(hub.cancel(1) && !hub.cancel(1));
        let applied = s.apply(5, &put(b"zz", b"1"));
        assert!(hub.dispatch(&applied.events).is_empty());
        assert_eq!(hub.len(), 2);
    }

    #[test]
    fn future_start_and_compaction() {
        let mut s = KvStore::new();
        let mut hub = WatchHub::new();
        let w = hub
            .create(
                &s,
                &WatchCreateRequest {
                    key: b"k".to_vec(),
                    start_revision: 4,
                    ..Default::default()
                },
            )
            .unwrap();
        for i in 1..=4 {
            let applied = s.apply(i, &put(b"k", &[i as u8]));
            let d = hub.dispatch(&applied.events);
            let got: Vec<i64> = d
                .iter()
                .flat_map(|d| d.events.iter().map(Event::revision))
                .collect();
            assert_eq!(
                got,
                if applied.revision >= 4 {
                    vec![applied.revision]
                } else {
                    vec![]
                }
            );
            assert_eq!(
                d.first().map(|d| d.watch_id),
                if applied.revision >= 4 {
                    Some(w.watch_id)
                } else {
                    None
                }
            );
        }
        s.apply(
            5,
            &Command::Compact(crate::types::CompactionRequest {
                revision: 4,
                physical: false,
            }),
        );
        assert_eq!(
            hub.create(
                &s,
                &WatchCreateRequest {
                    key: b"k".to_vec(),
                    start_revision: 3,
                    ..Default::default()
                }
            ),
            Err(WatchError::Compacted {
                compact_revision: 4
            })
        );
        let c = hub
            .create(
                &s,
                &WatchCreateRequest {
                    key: b"k".to_vec(),
                    start_revision: 4,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(c.replay.len(), 2);
    }
}
