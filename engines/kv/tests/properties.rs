//! Seeded property tests: determinism, a reference model of every past
//! revision, snapshot/restore mid-sequence, and watch replay vs live events.

mod common;

use std::collections::BTreeMap;

use common::*;
use coordbench_kv::*;

const SEEDS: u64 = 32;
const STEPS: usize = 300;

fn apply_checked(store: &mut KvStore, index: u64, cmd: &Command) -> Applied {
    let applied = store.apply(index, cmd);
    store
        .check_invariants()
        .unwrap_or_else(|e| panic!("after {cmd:?}: {e}"));
    // Events come in revision order and only at new revisions.
    let mut last = 0;
    for ev in &applied.events {
        assert!(ev.revision() >= last && ev.revision() <= applied.revision);
        last = ev.revision();
    }
    applied
}

/// (1) Two replicas fed the same (encoded, decoded) commands agree on every
/// result and on their snapshots.
#[test]
fn replicas_agree() {
    for seed in 0..SEEDS {
        let mut rng = Rng::new(seed);
        let (mut a, mut b) = (KvStore::new(), KvStore::new());
        let mut now = 0;
        let mut errors = 0;
        for i in 0..STEPS {
            let cmd = command(&mut rng, &a, &mut now);
            let decoded = Command::decode(&cmd.encode()).unwrap();
            assert_eq!(decoded, cmd);
            let index = i as u64 + 1;
            let ra = apply_checked(&mut a, index, &cmd);
            let rb = apply_checked(&mut b, index, &decoded);
            assert_eq!(ra, rb, "seed {seed} step {i}: {cmd:?}");
            errors += ra.result.is_err() as usize;
            if i % 50 == 0 {
                assert_eq!(a.snapshot(), b.snapshot());
            }
        }
        assert_eq!(a.snapshot(), b.snapshot(), "seed {seed}");
        assert!(
            errors < STEPS / 2,
            "the generator should mostly produce valid commands ({errors} errors)"
        );
        assert!(a.revision() > 20, "seed {seed}: too few writes");
    }
}

/// (3) A replica restored from a snapshot taken mid-sequence continues
/// exactly like the one that never stopped.
#[test]
fn snapshot_restore_mid_sequence() {
    for seed in 0..SEEDS {
        let mut rng = Rng::new(1000 + seed);
        let mut a = KvStore::new();
        let mut b: Option<KvStore> = None;
        let cut = 20 + rng.below(STEPS as u64 - 40) as usize;
        let mut now = 0;
        for i in 0..STEPS {
            if i == cut {
                let snap = a.snapshot();
                let mut restored = KvStore::new();
                restored.restore(&snap).unwrap();
                assert_eq!(restored.snapshot(), snap);
                assert_eq!(restored, a);
                b = Some(restored);
            }
            let cmd = command(&mut rng, &a, &mut now);
            let ra = apply_checked(&mut a, i as u64 + 1, &cmd);
            if let Some(b) = b.as_mut() {
                let rb = apply_checked(b, i as u64 + 1, &cmd);
                assert_eq!(ra, rb, "seed {seed} step {i}");
            }
        }
        assert_eq!(b.unwrap().snapshot(), a.snapshot());
    }
}

/// (4) History replay from any start revision and over any range equals the
/// events recorded live; a WatchHub delivers exactly those events.
#[test]
fn watch_replay_matches_live_events() {
    struct Probe {
        id: i64,
        start: i64,
        range: KeyRange,
        filter: Option<WatchFilter>,
        prev_kv: bool,
        /// The store's revision and compaction when the watcher was created: its replay
        /// has no prev_kv where the revision before an event was compacted by then.
        created_at: i64,
        compacted: i64,
        got: Vec<Event>,
    }
    for seed in 0..SEEDS {
        let mut rng = Rng::new(2000 + seed);
        let mut store = KvStore::new();
        let mut hub = WatchHub::new();
        let mut live: Vec<Event> = Vec::new();
        let mut probes: Vec<Probe> = Vec::new();
        let mut now = 0;
        for i in 0..STEPS {
            if rng.chance(10) {
                let key = key(&mut rng);
                let req = WatchCreateRequest {
                    range_end: range_end(&mut rng, &key),
                    key,
                    start_revision: rng.between(-1, store.revision() + 2),
                    filters: match rng.below(4) {
                        0 => vec![WatchFilter::NoPut],
                        1 => vec![WatchFilter::NoDelete],
                        _ => vec![],
                    },
                    prev_kv: rng.chance(50),
                    ..Default::default()
                };
                match hub.create(&store, &req) {
                    Ok(c) => probes.push(Probe {
                        id: c.watch_id,
                        start: if req.start_revision > 0 {
                            req.start_revision
                        } else {
                            store.revision() + 1
                        },
                        range: KeyRange::new(&req.key, &req.range_end),
                        filter: req.filters.first().copied(),
                        prev_kv: req.prev_kv,
                        created_at: store.revision(),
                        compacted: store.compact_revision(),
                        got: c.replay,
                    }),
                    Err(WatchError::Compacted { compact_revision }) => {
                        assert!(req.start_revision > 0 && req.start_revision < compact_revision);
                        assert_eq!(compact_revision, store.compact_revision());
                    }
                    Err(WatchError::EmptyRange) => {
                        assert!(req.range_end != [0] && req.key >= req.range_end);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            let cmd = command(&mut rng, &store, &mut now);
            let applied = apply_checked(&mut store, i as u64 + 1, &cmd);
            for d in hub.dispatch(&applied.events) {
                probes
                    .iter_mut()
                    .find(|p| p.id == d.watch_id)
                    .unwrap()
                    .got
                    .extend(d.events);
            }
            live.extend(applied.events);
        }

        let ranges: Vec<KeyRange> = std::iter::once(KeyRange::all())
            .chain(KEYS.iter().map(|k| KeyRange::new(k, b"")))
            .chain(KEYS.iter().map(|k| KeyRange::prefix(k)))
            .chain((0..8).map(|_| {
                let k = key(&mut rng);
                KeyRange::new(&k, &range_end(&mut rng, &k))
            }))
            .collect();
        for start in 1..=store.revision() + 1 {
            for range in &ranges {
                let replay = store.events_since(start, range);
                if start < store.compact_revision() {
                    assert!(replay.is_err());
                    continue;
                }
                // As etcd: an event whose previous revision is compacted has no prev_kv.
                let compacted = store.compact_revision();
                let expected: Vec<Event> = live
                    .iter()
                    .filter(|e| e.revision() >= start && range.contains(&e.kv.key))
                    .map(|e| Event {
                        prev_kv: e.prev_kv.clone().filter(|_| e.revision() > compacted),
                        ..e.clone()
                    })
                    .collect();
                assert_eq!(
                    replay.unwrap(),
                    expected,
                    "seed {seed} start {start} range {range:?}"
                );
            }
        }
        assert!(!probes.is_empty());
        for p in &probes {
            let expected: Vec<Event> = live
                .iter()
                .filter(|e| {
                    e.revision() >= p.start
                        && p.range.contains(&e.kv.key)
                        && !matches!(
                            (p.filter, e.kind),
                            (Some(WatchFilter::NoPut), EventKind::Put)
                                | (Some(WatchFilter::NoDelete), EventKind::Delete)
                        )
                })
                .map(|e| {
                    let replayed = e.revision() <= p.created_at;
                    let gone = replayed && e.revision() - 1 < p.compacted;
                    Event {
                        prev_kv: e.prev_kv.clone().filter(|_| p.prev_kv && !gone),
                        ..e.clone()
                    }
                })
                .collect();
            assert_eq!(p.got, expected, "seed {seed} watcher {}", p.id);
        }
    }
}

// ---------------------------------------------------------------------------
// (2) Reference model: the full key space at every revision.

#[derive(Default)]
struct Model {
    /// `revs[r]` = key space at revision `r` (`revs[0]` unused).
    revs: Vec<BTreeMap<Vec<u8>, KeyValue>>,
    leases: Vec<i64>,
    compact: i64,
}

fn in_range(key: &[u8], start: &[u8], end: &[u8]) -> bool {
    match end {
        [] => key == start,
        [0] => key >= start,
        _ => key >= start && key < end,
    }
}

enum Write {
    Put(PutRequest),
    Del(DeleteRangeRequest),
}

impl Model {
    fn new() -> Self {
        Model {
            revs: vec![BTreeMap::new(), BTreeMap::new()],
            ..Default::default()
        }
    }
    fn rev(&self) -> i64 {
        self.revs.len() as i64 - 1
    }
    fn cur(&self) -> &BTreeMap<Vec<u8>, KeyValue> {
        self.revs.last().unwrap()
    }

    /// Applies writes as one revision; false (and no change) if one fails.
    fn write(&mut self, writes: &[Write]) -> bool {
        let rev = self.rev() + 1;
        let mut next = self.cur().clone();
        let mut changed = false;
        for w in writes {
            match w {
                Write::Put(p) => {
                    if p.key.is_empty()
                        || (p.ignore_value && !p.value.is_empty())
                        || (p.ignore_lease && p.lease != 0)
                    {
                        return false;
                    }
                    if p.lease != 0 && !self.leases.contains(&p.lease) {
                        return false;
                    }
                    let old = next.get(&p.key).cloned();
                    if (p.ignore_value || p.ignore_lease) && old.is_none() {
                        return false;
                    }
                    let kv = KeyValue {
                        key: p.key.clone(),
                        create_revision: old.as_ref().map_or(rev, |o| o.create_revision),
                        mod_revision: rev,
                        version: old.as_ref().map_or(1, |o| o.version + 1),
                        value: if p.ignore_value {
                            old.as_ref().unwrap().value.clone()
                        } else {
                            p.value.clone()
                        },
                        lease: if p.ignore_lease {
                            old.as_ref().unwrap().lease
                        } else {
                            p.lease
                        },
                    };
                    next.insert(p.key.clone(), kv);
                    changed = true;
                }
                Write::Del(d) => {
                    if d.key.is_empty() {
                        return false;
                    }
                    let before = next.len();
                    next.retain(|k, _| !in_range(k, &d.key, &d.range_end));
                    changed |= next.len() != before;
                }
            }
        }
        if changed {
            self.revs.push(next);
        }
        true
    }

    fn compare(&self, c: &Compare) -> bool {
        let kvs: Vec<&KeyValue> = self
            .cur()
            .values()
            .filter(|kv| in_range(&kv.key, &c.key, &c.range_end))
            .collect();
        let zero = KeyValue::default();
        let kvs = if kvs.is_empty() {
            if matches!(c.target, CompareTarget::Value(_)) {
                return false;
            }
            vec![&zero]
        } else {
            kvs
        };
        kvs.iter().all(|kv| {
            let ord = match &c.target {
                CompareTarget::Version(v) => kv.version.cmp(v),
                CompareTarget::Create(v) => kv.create_revision.cmp(v),
                CompareTarget::Mod(v) => kv.mod_revision.cmp(v),
                CompareTarget::Lease(v) => kv.lease.cmp(v),
                CompareTarget::Value(v) => kv.value.cmp(v),
                CompareTarget::Unknown => std::cmp::Ordering::Equal,
            };
            match c.result {
                CompareResult::Equal => ord.is_eq(),
                CompareResult::NotEqual => ord.is_ne(),
                CompareResult::Less => ord.is_lt(),
                CompareResult::Greater => ord.is_gt(),
                CompareResult::Unknown => true,
            }
        })
    }

    /// etcd's Range over the model's map at the requested revision.
    fn range(&self, r: &RangeRequest) -> Result<(Vec<KeyValue>, bool, i64), KvError> {
        if r.revision > self.rev() {
            return Err(KvError::FutureRevision {
                current_revision: self.rev(),
            });
        }
        let at = if r.revision <= 0 {
            self.rev()
        } else {
            r.revision
        };
        if at < self.compact {
            return Err(KvError::Compacted {
                compact_revision: self.compact,
            });
        }
        let all: Vec<KeyValue> = self.revs[at as usize]
            .values()
            .filter(|kv| in_range(&kv.key, &r.key, &r.range_end))
            .cloned()
            .collect();
        let count = all.len() as i64;
        if r.count_only {
            return Ok((vec![], false, count));
        }
        let filtered = r.min_mod_revision != 0
            || r.max_mod_revision != 0
            || r.min_create_revision != 0
            || r.max_create_revision != 0;
        let mut kvs: Vec<KeyValue> = if r.sort_order != SortOrder::None || filtered || r.limit <= 0
        {
            all
        } else {
            all.into_iter().take(r.limit as usize + 1).collect()
        };
        kvs.retain(|kv| {
            (r.max_mod_revision == 0 || kv.mod_revision <= r.max_mod_revision)
                && (r.min_mod_revision == 0 || kv.mod_revision >= r.min_mod_revision)
                && (r.max_create_revision == 0 || kv.create_revision <= r.max_create_revision)
                && (r.min_create_revision == 0 || kv.create_revision >= r.min_create_revision)
        });
        let descend = r.sort_order == SortOrder::Descend;
        if r.sort_target != SortTarget::Key || descend {
            // Stable sort of key-ordered input; descending reverses the comparison only.
            let field = |kv: &KeyValue| -> (i64, Vec<u8>) {
                match r.sort_target {
                    SortTarget::Key => (0, kv.key.clone()),
                    SortTarget::Version => (kv.version, vec![]),
                    SortTarget::Create => (kv.create_revision, vec![]),
                    SortTarget::Mod => (kv.mod_revision, vec![]),
                    SortTarget::Value => (0, kv.value.clone()),
                }
            };
            kvs.sort_by(|a, b| {
                if descend {
                    field(b).cmp(&field(a))
                } else {
                    field(a).cmp(&field(b))
                }
            });
        }
        let mut more = false;
        if r.limit > 0 && kvs.len() > r.limit as usize {
            kvs.truncate(r.limit as usize);
            more = true;
        }
        if r.keys_only {
            kvs.iter_mut().for_each(|kv| kv.value.clear());
        }
        Ok((kvs, more, count))
    }
}

/// Commands the model understands: puts, deletes, flat txns without
/// duplicate keys, lease grant/revoke, compaction.
fn model_command(rng: &mut Rng, store: &KvStore, now: &mut u64) -> Command {
    match rng.below(20) {
        0..=6 => Command::Put(put_request(rng, store)),
        7..=9 => Command::DeleteRange(delete_request(rng)),
        10..=15 => {
            let mut t = txn_request(rng, store, 2);
            for ops in [&mut t.success, &mut t.failure] {
                // No duplicates: distinct put keys, none inside a delete range.
                let dels: Vec<(Vec<u8>, Vec<u8>)> = ops
                    .iter()
                    .filter_map(|op| match op {
                        RequestOp::DeleteRange(d) => Some((d.key.clone(), d.range_end.clone())),
                        _ => None,
                    })
                    .collect();
                let mut seen = Vec::new();
                ops.retain(|op| match op {
                    RequestOp::Put(p) => {
                        let ok = !seen.contains(&p.key)
                            && !dels.iter().any(|(s, e)| in_range(&p.key, s, e));
                        seen.push(p.key.clone());
                        ok
                    }
                    _ => true,
                });
            }
            Command::Txn(t)
        }
        16 | 17 => {
            *now += 1;
            Command::LeaseGrant {
                id: rng.between(1, 4),
                ttl: 5,
                now_ms: *now,
            }
        }
        18 => Command::LeaseRevoke {
            id: lease_id(rng, store),
        },
        _ => Command::Compact(CompactionRequest {
            revision: rng.between(store.compact_revision(), store.revision()),
            physical: false,
        }),
    }
}

impl Model {
    /// Applies `cmd`; returns whether it should succeed.
    fn apply(&mut self, cmd: &Command) -> bool {
        match cmd {
            Command::Put(p) => self.write(&[Write::Put(p.clone())]),
            Command::DeleteRange(d) => self.write(&[Write::Del(d.clone())]),
            Command::Txn(t) => {
                let ok = t.compare.iter().all(|c| self.compare(c));
                let ops = if ok { &t.success } else { &t.failure };
                // Ranges inside the txn must be valid too.
                for op in ops {
                    if let RequestOp::Range(r) = op {
                        if r.key.is_empty() || self.range(r).is_err() {
                            return false;
                        }
                    }
                }
                let writes: Vec<Write> = ops
                    .iter()
                    .filter_map(|op| match op {
                        RequestOp::Put(p) => Some(Write::Put(p.clone())),
                        RequestOp::DeleteRange(d) => Some(Write::Del(d.clone())),
                        _ => None,
                    })
                    .collect();
                // Empty keys fail validation whichever branch runs.
                let all_ops = t.success.iter().chain(&t.failure);
                if all_ops.clone().any(|op| match op {
                    RequestOp::Put(p) => {
                        p.key.is_empty()
                            || (p.ignore_value && !p.value.is_empty())
                            || (p.ignore_lease && p.lease != 0)
                    }
                    RequestOp::DeleteRange(d) => d.key.is_empty(),
                    RequestOp::Range(r) => r.key.is_empty(),
                    RequestOp::Txn(_) => false,
                }) {
                    return false;
                }
                self.write(&writes)
            }
            Command::LeaseGrant { id, .. } => {
                if self.leases.contains(id) {
                    return false;
                }
                self.leases.push(*id);
                true
            }
            Command::LeaseRevoke { id } => {
                let Some(pos) = self.leases.iter().position(|l| l == id) else {
                    return false;
                };
                self.leases.remove(pos);
                let keys: Vec<Vec<u8>> = self
                    .cur()
                    .values()
                    .filter(|kv| kv.lease == *id)
                    .map(|kv| kv.key.clone())
                    .collect();
                let writes: Vec<Write> = keys
                    .into_iter()
                    .map(|key| {
                        Write::Del(DeleteRangeRequest {
                            key,
                            ..Default::default()
                        })
                    })
                    .collect();
                self.write(&writes)
            }
            Command::Compact(c) => {
                if c.revision <= self.compact || c.revision > self.rev() {
                    return false;
                }
                self.compact = c.revision;
                true
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn ranges_at_every_revision_match_model() {
    for seed in 0..SEEDS {
        let mut rng = Rng::new(3000 + seed);
        let mut store = KvStore::new();
        let mut model = Model::new();
        let mut now = 0;
        for i in 0..STEPS {
            let cmd = model_command(&mut rng, &store, &mut now);
            let applied = apply_checked(&mut store, i as u64 + 1, &cmd);
            let expect_ok = model.apply(&cmd);
            assert_eq!(
                applied.result.is_ok(),
                expect_ok,
                "seed {seed} step {i}: {cmd:?} -> {:?}",
                applied.result
            );
            assert_eq!(
                store.revision(),
                model.rev(),
                "seed {seed} step {i}: {cmd:?}"
            );
            // Random reads against the model at random revisions.
            for _ in 0..3 {
                let r = range_request(&mut rng, &store);
                let got = store.range(&r).map(|resp| {
                    assert_eq!(resp.header.revision, store.revision());
                    (resp.kvs, resp.more, resp.count)
                });
                let want = if r.key.is_empty() {
                    Err(KvError::EmptyKey)
                } else {
                    model.range(&r)
                };
                assert_eq!(got, want, "seed {seed} step {i}: {r:?}");
            }
        }
        // The whole key space at every past revision.
        for rev in 1..=store.revision() {
            let r = RangeRequest {
                key: vec![0],
                range_end: vec![0],
                revision: rev,
                ..Default::default()
            };
            let got = store.range(&r);
            if rev < model.compact {
                assert_eq!(
                    got,
                    Err(KvError::Compacted {
                        compact_revision: model.compact
                    })
                );
            } else {
                let kvs: Vec<KeyValue> = model.revs[rev as usize].values().cloned().collect();
                assert_eq!(got.unwrap().kvs, kvs, "seed {seed} revision {rev}");
            }
        }
    }
}
