//! Sequences of steps: one hand-written sequence per family of requests (puts, ranges,
//! deletes, txns, leases, compaction, watches; each walks the family's options and error
//! cases), and seeded random sequences over the run's six keys that mix them all.

use coordbench_splitmix::SplitMix64;

use super::steps::{
    Compare, Delete, End, Key, Keys, Lease, Put, Range, Rev, Step, Target, Txn, TxnOp, Watch, KEYS,
};

/// A lease TTL no run outlives: leases never expire while a run reads them.
pub const LONG_TTL: i64 = 3600;

// ---- building steps ----

pub fn put(k: u8, v: &str) -> Put {
    Put {
        key: Key::K(k),
        value: v.into(),
        ..Default::default()
    }
}

pub fn get(keys: Keys) -> Range {
    Range {
        keys,
        ..Default::default()
    }
}

fn del(keys: Keys, prev_kv: bool) -> Delete {
    Delete { keys, prev_kv }
}

/// Every key of the run.
fn all() -> Keys {
    Keys {
        key: Key::K(0),
        end: End::Prefix,
    }
}

fn cmp(keys: Keys, result: i32, target: Target) -> Compare {
    Compare {
        keys,
        result,
        target,
    }
}

fn txn(compare: Vec<Compare>, success: Vec<TxnOp>, failure: Vec<TxnOp>) -> Step {
    Step::Txn(Txn {
        compare,
        success,
        failure,
    })
}

fn watch(stream: u8, w: Watch) -> Step {
    Step::Watch { stream, create: w }
}

fn watching(keys: Keys) -> Watch {
    Watch {
        keys,
        ..Default::default()
    }
}

fn grant(n: u8) -> Step {
    Step::Grant {
        id: Some(n),
        ttl: LONG_TTL,
    }
}

// ---- hand-written families ----

/// Put with prev_kv, a lease, ignore_value and ignore_lease, and the errors around them.
pub fn put_steps() -> Vec<Step> {
    let leased = |k, v: &str, l| Put {
        lease: l,
        ..put(k, v)
    };
    vec![
        Step::Put(put(0, "a")),
        Step::Put(Put {
            prev_kv: true,
            ..put(0, "b")
        }),
        Step::Put(Put {
            prev_kv: true,
            ..put(1, "x")
        }),
        grant(0),
        Step::Put(Put {
            prev_kv: true,
            ..leased(0, "c", Lease::Chosen(0))
        }),
        Step::Put(Put {
            ignore_value: true,
            prev_kv: true,
            ..put(0, "")
        }),
        Step::Put(Put {
            ignore_lease: true,
            ..put(0, "d")
        }),
        Step::Put(Put {
            ignore_value: true,
            ..leased(0, "", Lease::Chosen(0))
        }),
        Step::Put(Put {
            ignore_lease: true,
            prev_kv: true,
            ..put(0, "e")
        }),
        Step::Put(Put {
            ignore_value: true,
            ..put(5, "")
        }),
        Step::Put(Put {
            ignore_lease: true,
            ..put(5, "v")
        }),
        Step::Put(Put {
            ignore_value: true,
            ..put(0, "x")
        }),
        Step::Put(Put {
            ignore_lease: true,
            ..leased(0, "x", Lease::Chosen(0))
        }),
        Step::Put(Put {
            key: Key::Empty,
            ..put(0, "v")
        }),
        Step::Put(leased(2, "v", Lease::Chosen(7))),
        Step::Put(put(2, "")),
        Step::Range(get(all())),
        Step::TimeToLive {
            lease: Lease::Chosen(0),
            keys: true,
        },
        Step::Revoke(Lease::Chosen(0)),
        Step::Range(get(all())),
    ]
}

/// Three keys of different versions, revisions and values: k1 = "b" (version 1), k2 =
/// "a" (version 3), k4 = "c", then k2 deleted and k3 = "d".
fn range_setup() -> Vec<Step> {
    vec![
        Step::Put(put(2, "z")),
        Step::Put(put(1, "b")),
        Step::Put(put(2, "y")),
        Step::Put(put(4, "c")),
        Step::Put(put(2, "a")),
        Step::Put(put(5, "e")),
        Step::Delete(del(Keys::one(5), false)),
        Step::Put(put(3, "d")),
    ]
}

/// Range's every option: range_end, limit, revision, sort order and target, serializable,
/// keys_only, count_only and the mod/create revision filters, and the errors.
pub fn range_steps() -> Vec<Step> {
    let mut steps = range_setup();
    let r = |f: &dyn Fn(&mut Range)| {
        let mut q = get(all());
        f(&mut q);
        Step::Range(q)
    };
    steps.extend([
        Step::Range(get(Keys::one(1))),
        Step::Range(get(Keys::one(5))),
        Step::Range(get(Keys::span(1, End::To(4)))),
        Step::Range(get(Keys::span(4, End::To(1)))),
        Step::Range(get(Keys::span(2, End::FromKey))),
        Step::Range(get(Keys {
            key: Key::Empty,
            end: End::One,
        })),
        r(&|q| q.limit = 2),
        r(&|q| q.limit = 4),
        r(&|q| q.limit = -1),
        r(&|q| q.revision = Rev::Rel(3)),
        r(&|q| q.revision = Rev::Rel(7)),
        r(&|q| q.revision = Rev::Rel(100)),
        r(&|q| q.revision = Rev::Raw(-1)),
        r(&|q| q.serializable = true),
        r(&|q| q.keys_only = true),
        r(&|q| q.count_only = true),
        r(&|q| {
            q.count_only = true;
            q.limit = 1;
        }),
        r(&|q| q.min_mod = Rev::Rel(4)),
        r(&|q| q.max_mod = Rev::Rel(4)),
        r(&|q| q.min_create = Rev::Rel(2)),
        r(&|q| q.max_create = Rev::Rel(2)),
        r(&|q| {
            q.min_mod = Rev::Rel(3);
            q.max_create = Rev::Rel(4);
            q.limit = 1;
        }),
        r(&|q| {
            q.revision = Rev::Rel(5);
            q.count_only = true;
        }),
    ]);
    for order in 0..3 {
        for target in 0..5 {
            steps.push(r(&|q| {
                q.sort_order = order;
                q.sort_target = target;
            }));
            steps.push(r(&|q| {
                q.sort_order = order;
                q.sort_target = target;
                q.limit = 2;
            }));
        }
    }
    steps.push(r(&|q| q.sort_order = 3));
    steps.push(r(&|q| q.sort_target = 9));
    steps
}

/// DeleteRange of one key, a range, from a key, nothing, with and without prev_kv.
pub fn delete_steps() -> Vec<Step> {
    let mut steps: Vec<Step> = (0..KEYS).map(|k| Step::Put(put(k, "v"))).collect();
    steps.extend([
        Step::Delete(del(Keys::one(0), true)),
        Step::Delete(del(Keys::one(0), true)),
        Step::Delete(del(Keys::span(1, End::To(3)), true)),
        Step::Delete(del(Keys::span(4, End::To(3)), true)),
        Step::Delete(del(
            Keys {
                key: Key::Empty,
                end: End::One,
            },
            false,
        )),
        Step::Put(put(1, "again")),
        Step::Delete(del(Keys::span(1, End::FromKey), false)),
        Step::Range(get(all())),
    ]);
    steps
}

/// Every compare target with every result, on a key that exists and one that does not.
fn compare_grid() -> Vec<Step> {
    let targets = [
        (Keys::one(0), Target::Version(2)),
        (Keys::one(0), Target::Create(Rev::Rel(1))),
        (Keys::one(0), Target::Mod(Rev::Rel(2))),
        (Keys::one(0), Target::Value("b".into())),
        (Keys::one(1), Target::Lease(Lease::Chosen(0))),
        (Keys::one(5), Target::Version(0)),
        (Keys::one(5), Target::Create(Rev::Zero)),
        (Keys::one(5), Target::Value(String::new())),
        (Keys::one(5), Target::Lease(Lease::No)),
        (Keys::span(0, End::To(2)), Target::Mod(Rev::Rel(3))),
        (Keys::span(0, End::FromKey), Target::Version(1)),
    ];
    let mut steps = Vec::new();
    for (keys, target) in targets {
        for result in 0..4 {
            steps.push(txn(
                vec![cmp(keys, result, target.clone())],
                vec![TxnOp::Range(get(Keys::one(0)))],
                vec![TxnOp::Range(get(Keys::one(1)))],
            ));
        }
    }
    for t in 0..5 {
        steps.push(txn(
            vec![cmp(Keys::one(0), 1, Target::Unset(t))],
            vec![],
            vec![],
        ));
    }
    steps.push(txn(
        vec![cmp(Keys::one(0), 7, Target::Version(1))],
        vec![],
        vec![],
    ));
    steps.push(txn(
        vec![cmp(Keys::one(0), 0, Target::Unset(9))],
        vec![],
        vec![],
    ));
    steps
}

/// Txns that write: both branches, nested txns, a failing op, read-only ones.
fn txn_writes() -> Vec<Step> {
    let nested = |c: Vec<Compare>, s: Vec<TxnOp>, f: Vec<TxnOp>| {
        TxnOp::Txn(Txn {
            compare: c,
            success: s,
            failure: f,
        })
    };
    let absent = |k| cmp(Keys::one(k), 0, Target::Version(0));
    vec![
        txn(
            vec![absent(2)],
            vec![
                TxnOp::Put(put(2, "new")),
                TxnOp::Delete(del(Keys::one(0), true)),
                TxnOp::Range(get(all())),
            ],
            vec![TxnOp::Range(get(all()))],
        ),
        txn(
            vec![absent(2)],
            vec![TxnOp::Put(put(2, "again"))],
            vec![TxnOp::Put(Put {
                prev_kv: true,
                ..put(2, "else")
            })],
        ),
        txn(
            vec![],
            vec![
                TxnOp::Put(put(4, "n")),
                nested(
                    vec![absent(4)],
                    vec![TxnOp::Range(get(Keys::one(4))), TxnOp::Put(put(3, "x"))],
                    vec![TxnOp::Delete(del(Keys::one(2), true))],
                ),
                TxnOp::Range(get(all())),
            ],
            vec![],
        ),
        txn(
            vec![],
            vec![
                TxnOp::Put(put(5, "z")),
                TxnOp::Put(Put {
                    lease: Lease::Chosen(9),
                    ..put(3, "y")
                }),
            ],
            vec![],
        ),
        txn(
            vec![],
            vec![TxnOp::Put(Put {
                ignore_value: true,
                ..put(5, "")
            })],
            vec![],
        ),
        txn(
            vec![absent(1)],
            vec![],
            vec![
                TxnOp::Range(Range {
                    serializable: true,
                    ..get(all())
                }),
                nested(vec![], vec![TxnOp::Range(get(Keys::one(1)))], vec![]),
            ],
        ),
        txn(vec![], vec![], vec![]),
        Step::Range(get(all())),
        // etcd's overlap check takes "\0" as a range end literally: no overlap.
        txn(
            vec![],
            vec![
                TxnOp::Put(put(1, "p")),
                TxnOp::Delete(del(Keys::span(0, End::FromKey), true)),
            ],
            vec![],
        ),
        txn(
            vec![],
            vec![
                TxnOp::Delete(del(Keys::span(0, End::FromKey), true)),
                TxnOp::Put(put(1, "q")),
                TxnOp::Range(get(all())),
            ],
            vec![],
        ),
        Step::Range(get(all())),
    ]
}

/// Txns etcd refuses: duplicate keys, too many ops, empty ops and keys.
fn txn_errors() -> Vec<Step> {
    let p = |k| TxnOp::Put(put(k, "d"));
    let nested = |s: Vec<TxnOp>, f: Vec<TxnOp>| {
        TxnOp::Txn(Txn {
            compare: vec![],
            success: s,
            failure: f,
        })
    };
    let many = |op: TxnOp| vec![op; 129];
    vec![
        txn(vec![], vec![p(1), p(1)], vec![]),
        txn(vec![], vec![p(1)], vec![p(1)]),
        txn(
            vec![],
            vec![p(1), TxnOp::Delete(del(Keys::span(0, End::To(3)), false))],
            vec![],
        ),
        txn(
            vec![],
            vec![
                TxnOp::Delete(del(Keys::one(1), false)),
                TxnOp::Delete(del(Keys::one(1), false)),
            ],
            vec![],
        ),
        txn(vec![], vec![p(1), nested(vec![p(1)], vec![])], vec![]),
        txn(vec![], vec![nested(vec![p(2)], vec![p(2)])], vec![]),
        txn(
            vec![],
            vec![nested(vec![p(2)], vec![]), nested(vec![], vec![p(2)])],
            vec![],
        ),
        txn(vec![], many(TxnOp::Range(get(Keys::one(0)))), vec![]),
        txn(vec![], vec![TxnOp::Range(get(Keys::one(0))); 128], vec![]),
        txn(
            vec![cmp(Keys::one(0), 0, Target::Version(1)); 129],
            vec![],
            vec![],
        ),
        txn(vec![], vec![TxnOp::Empty], vec![]),
        txn(vec![], vec![], vec![TxnOp::Empty]),
        txn(
            vec![],
            vec![TxnOp::Put(Put {
                key: Key::Empty,
                ..put(0, "v")
            })],
            vec![],
        ),
        txn(
            vec![],
            vec![TxnOp::Range(get(Keys {
                key: Key::Empty,
                end: End::One,
            }))],
            vec![],
        ),
        txn(
            vec![cmp(
                Keys {
                    key: Key::Empty,
                    end: End::One,
                },
                0,
                Target::Version(0),
            )],
            vec![],
            vec![],
        ),
        txn(
            vec![],
            vec![TxnOp::Put(Put {
                ignore_value: true,
                ..put(0, "v")
            })],
            vec![],
        ),
    ]
}

/// Txn: every compare target and result, both branches, nested txns, the errors.
pub fn txn_steps() -> Vec<Step> {
    let mut steps = vec![
        Step::Put(put(0, "a")),
        Step::Put(put(0, "b")),
        grant(0),
        Step::Put(Put {
            lease: Lease::Chosen(0),
            ..put(1, "x")
        }),
    ];
    steps.extend(compare_grid());
    steps.extend(txn_writes());
    steps.extend(txn_errors());
    steps
}

/// Grants with chosen and server-chosen ids, TTLs out of bounds, keys on leases, revoke,
/// TimeToLive with keys, Leases, one keep-alive, and the lease-not-found answers.
pub fn lease_steps() -> Vec<Step> {
    let leased = |k, l| {
        Step::Put(Put {
            lease: l,
            ..put(k, "v")
        })
    };
    let ttl = |lease, keys| Step::TimeToLive { lease, keys };
    vec![
        grant(0),
        grant(0),
        Step::Grant {
            id: None,
            ttl: LONG_TTL,
        },
        Step::Grant {
            id: Some(1),
            ttl: 1,
        },
        Step::Revoke(Lease::Chosen(1)),
        Step::Grant {
            id: Some(2),
            ttl: 0,
        },
        Step::Revoke(Lease::Chosen(2)),
        Step::Grant {
            id: Some(3),
            ttl: -5,
        },
        Step::Revoke(Lease::Chosen(3)),
        Step::Grant {
            id: Some(4),
            ttl: 9_000_000_001,
        },
        Step::Grant {
            id: Some(5),
            ttl: 9_000_000_000,
        },
        Step::Revoke(Lease::Chosen(5)),
        leased(0, Lease::Chosen(0)),
        leased(1, Lease::Auto(0)),
        leased(2, Lease::Chosen(0)),
        leased(3, Lease::Chosen(6)),
        ttl(Lease::Chosen(0), true),
        ttl(Lease::Chosen(0), false),
        ttl(Lease::Auto(0), true),
        ttl(Lease::Chosen(6), true),
        Step::Leases,
        Step::KeepAlive(Lease::Chosen(0)),
        Step::KeepAlive(Lease::Chosen(6)),
        ttl(Lease::Chosen(0), false),
        Step::Revoke(Lease::Chosen(0)),
        Step::Range(get(all())),
        Step::Revoke(Lease::Chosen(0)),
        ttl(Lease::Chosen(0), true),
        leased(3, Lease::Chosen(0)),
        Step::Leases,
        Step::Revoke(Lease::No),
        Step::Revoke(Lease::Auto(0)),
        Step::Range(get(all())),
    ]
}

/// Compaction, and reads, txns and watches at compacted, current and future revisions.
pub fn compact_steps() -> Vec<Step> {
    let at = |rev| {
        Step::Range(Range {
            revision: rev,
            ..get(Keys::one(0))
        })
    };
    let compact = |revision, physical| Step::Compact { revision, physical };
    let mut steps: Vec<Step> = (0..4)
        .map(|i| Step::Put(put(0, &format!("v{i}"))))
        .collect();
    steps.extend([
        compact(Rev::Rel(2), false),
        at(Rev::Rel(1)),
        at(Rev::Rel(2)),
        at(Rev::Rel(4)),
        compact(Rev::Rel(2), false),
        compact(Rev::Rel(1), false),
        compact(Rev::Rel(100), false),
        compact(Rev::Rel(3), true),
        txn(
            vec![],
            vec![TxnOp::Range(Range {
                revision: Rev::Rel(2),
                ..get(Keys::one(0))
            })],
            vec![],
        ),
        watch(
            0,
            Watch {
                start: Rev::Rel(3),
                prev_kv: true,
                ..watching(Keys::one(0))
            },
        ),
        Step::Put(put(0, "v4")),
        watch(
            1,
            Watch {
                start: Rev::Rel(1),
                ..watching(Keys::one(0))
            },
        ),
        watch(
            0,
            Watch {
                start: Rev::Raw(-1),
                ..watching(Keys::one(0))
            },
        ),
        Step::Delete(del(Keys::one(0), false)),
        compact(Rev::Rel(6), false),
        at(Rev::Rel(6)),
        at(Rev::Zero),
    ]);
    steps
}

/// Watches: from now and from history, ranges, prev_kv, filters, chosen and duplicate ids,
/// progress requests, cancels, two streams, a future start revision.
pub fn watch_steps() -> Vec<Step> {
    let w = |keys, f: &dyn Fn(&mut Watch)| {
        let mut w = watching(keys);
        f(&mut w);
        w
    };
    vec![
        watch(0, watching(Keys::one(0))),
        Step::Put(put(0, "a")),
        watch(0, w(all(), &|w| w.prev_kv = true)),
        Step::Put(put(1, "b")),
        Step::Put(put(0, "c")),
        Step::Delete(del(Keys::one(0), true)),
        watch(0, w(Keys::one(1), &|w| w.filters = vec![0])),
        watch(0, w(Keys::one(1), &|w| w.filters = vec![1])),
        Step::Put(put(1, "c")),
        Step::Delete(del(Keys::one(1), false)),
        watch(1, w(all(), &|w| w.start = Rev::Rel(1))),
        watch(1, w(Keys::one(2), &|w| w.watch_id = 7)),
        watch(1, w(Keys::one(2), &|w| w.watch_id = 7)),
        watch(
            1,
            w(Keys::one(3), &|w| {
                w.progress_notify = true;
                w.fragment = true;
            }),
        ),
        txn(
            vec![],
            vec![TxnOp::Put(put(2, "t")), TxnOp::Put(put(3, "t"))],
            vec![],
        ),
        Step::Progress { stream: 0 },
        Step::Cancel {
            stream: 1,
            watch_id: 7,
        },
        Step::Cancel {
            stream: 1,
            watch_id: 99,
        },
        Step::Cancel {
            stream: 0,
            watch_id: 0,
        },
        Step::Put(put(0, "d")),
        watch(0, w(Keys::span(4, End::FromKey), &|w| w.prev_kv = true)),
        watch(
            0,
            w(
                Keys {
                    key: Key::Empty,
                    end: End::One,
                },
                &|_| {},
            ),
        ),
        watch(1, w(Keys::one(4), &|w| w.start = Rev::Rel(10))),
        Step::Progress { stream: 1 },
        Step::Put(put(4, "e")),
        Step::Put(put(4, "f")),
        grant(0),
        Step::Put(Put {
            lease: Lease::Chosen(0),
            ..put(5, "g")
        }),
        Step::Revoke(Lease::Chosen(0)),
        Step::Progress { stream: 2 },
        Step::Cancel {
            stream: 0,
            watch_id: 1,
        },
        Step::Cancel {
            stream: 0,
            watch_id: 2,
        },
        Step::Cancel {
            stream: 0,
            watch_id: 3,
        },
        Step::Cancel {
            stream: 0,
            watch_id: 4,
        },
        Step::Cancel {
            stream: 0,
            watch_id: 5,
        },
        Step::Progress { stream: 0 },
    ]
}

// ---- random sequences ----

/// `n` seeded random steps over the run's keys: every kind of step, with options drawn so
/// that successes and each error case are common.
pub fn random(seed: u64, n: usize) -> Vec<Step> {
    let mut g = Gen {
        rng: SplitMix64::new(seed),
        writes: 0,
        compacted: 0,
        granted: 0,
        autos: 0,
        creates: [0; 2],
    };
    (0..n).map(|_| g.step()).collect()
}

/// Whether `t` deletes from a key on (range_end `"\0"`), nested txns included.
fn deletes_from_a_key(t: &Txn) -> bool {
    t.success.iter().chain(&t.failure).any(|op| match op {
        TxnOp::Delete(d) => d.keys.end == End::FromKey,
        TxnOp::Txn(t) => deletes_from_a_key(t),
        _ => false,
    })
}

/// Calls `f` on every put of `t`, nested txns included.
fn for_each_put(t: &mut Txn, f: &mut impl FnMut(&mut Put)) {
    for op in t.success.iter_mut().chain(t.failure.iter_mut()) {
        match op {
            TxnOp::Put(p) => f(p),
            TxnOp::Txn(t) => for_each_put(t, f),
            _ => {}
        }
    }
}

/// What a random sequence has done so far, as far as its choices need to know.
struct Gen {
    rng: SplitMix64,
    /// Steps that may have made a revision: an upper bound of the run's relative revision.
    writes: i64,
    /// The highest revision asked to compact (history below it may be gone).
    compacted: i64,
    /// Chosen lease ids granted so far are below this.
    granted: u8,
    /// Leases granted with ids the server chose.
    autos: u8,
    /// Watch creates per stream (auto-assigned ids count up from 0).
    creates: [i64; 2],
}

impl Gen {
    fn pick(&mut self, n: u32) -> u32 {
        self.rng.range(0, n)
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.pick(100) < percent
    }

    /// A relative revision the run has reached (at least 1).
    fn past(&mut self) -> i64 {
        let hi = u32::try_from(self.writes.max(1)).unwrap_or(u32::MAX);
        i64::from(self.rng.range(1, hi + 1))
    }

    /// A relative revision the run has most likely reached (not every write makes one).
    fn reached(&mut self) -> i64 {
        let hi = u32::try_from((self.writes / 2).max(1)).unwrap_or(u32::MAX);
        i64::from(self.rng.range(1, hi + 1))
    }

    fn key(&mut self) -> Key {
        match self.chance(2) {
            true => Key::Empty,
            false => Key::K(self.pick(u32::from(KEYS)) as u8),
        }
    }

    fn keys(&mut self) -> Keys {
        let key = self.key();
        let end = match self.pick(10) {
            0..=5 => End::One,
            6 | 7 => End::To(self.pick(u32::from(KEYS) + 1) as u8),
            8 => End::Prefix,
            _ => End::FromKey,
        };
        Keys { key, end }
    }

    /// A read revision: latest, one reached, a future one or a negative one.
    fn rev(&mut self) -> Rev {
        match self.pick(20) {
            0..=7 => Rev::Zero,
            8..=17 => Rev::Rel(self.past()),
            18 => Rev::Rel(self.writes + 20),
            _ => Rev::Raw(-1),
        }
    }

    fn lease(&mut self) -> Lease {
        match self.pick(6) {
            0..=2 => Lease::No,
            3 | 4 => Lease::Chosen(self.pick(u32::from(self.granted) + 1) as u8),
            _ => Lease::Auto(self.pick(u32::from(self.autos) + 1) as u8),
        }
    }

    fn value(&mut self) -> String {
        ["", "a", "b", "c", "zz"][self.pick(5) as usize].to_string()
    }

    fn put(&mut self) -> Put {
        Put {
            key: self.key(),
            value: self.value(),
            lease: if self.chance(30) {
                self.lease()
            } else {
                Lease::No
            },
            prev_kv: self.chance(50),
            ignore_value: self.chance(10),
            ignore_lease: self.chance(10),
        }
    }

    fn filter(&mut self) -> Rev {
        match self.chance(12) {
            true => Rev::Rel(self.past()),
            false => Rev::Zero,
        }
    }

    fn range(&mut self) -> Range {
        Range {
            keys: self.keys(),
            limit: [0, 0, 0, 1, 2, 5, -1][self.pick(7) as usize],
            revision: if self.chance(30) {
                self.rev()
            } else {
                Rev::Zero
            },
            sort_order: if self.chance(30) {
                self.pick(3) as i32
            } else {
                0
            },
            sort_target: if self.chance(30) {
                self.pick(5) as i32
            } else {
                0
            },
            serializable: self.chance(30),
            keys_only: self.chance(10),
            count_only: self.chance(10),
            min_mod: self.filter(),
            max_mod: self.filter(),
            min_create: self.filter(),
            max_create: self.filter(),
        }
    }

    fn delete(&mut self) -> Delete {
        Delete {
            keys: self.keys(),
            prev_kv: self.chance(50),
        }
    }

    fn compare(&mut self) -> Compare {
        let target = match self.pick(21) {
            0..=3 => Target::Version(i64::from(self.pick(4))),
            4..=7 => Target::Create(self.filter_or_past()),
            8..=11 => Target::Mod(self.filter_or_past()),
            12..=15 => Target::Value(self.value()),
            16..=19 => Target::Lease(self.lease()),
            _ => Target::Unset(self.pick(5) as i32),
        };
        Compare {
            keys: self.keys(),
            result: self.pick(4) as i32,
            target,
        }
    }

    fn filter_or_past(&mut self) -> Rev {
        match self.chance(25) {
            true => Rev::Zero,
            false => Rev::Rel(self.past()),
        }
    }

    fn ops(&mut self, depth: u32) -> Vec<TxnOp> {
        let n = self.pick(4);
        (0..n)
            .map(|_| match self.pick(20) {
                0..=5 => TxnOp::Range(self.range()),
                6..=12 => TxnOp::Put(self.put()),
                13..=16 => TxnOp::Delete(self.delete()),
                17 | 18 if depth < 2 => TxnOp::Txn(self.txn(depth + 1)),
                19 if self.chance(20) => TxnOp::Empty,
                _ => TxnOp::Range(self.range()),
            })
            .collect()
    }

    fn txn(&mut self, depth: u32) -> Txn {
        let n = self.pick(3);
        let mut t = Txn {
            compare: (0..n).map(|_| self.compare()).collect(),
            success: self.ops(depth),
            failure: self.ops(depth),
        };
        if depth == 0 && deletes_from_a_key(&t) {
            // etcd 3.6.16 crashes ("unexpected error during txn with writes") on a put with
            // ignore_value or ignore_lease after a delete from a key on in one txn: its
            // overlap check lets the two through (engines/kv/src/txn.rs) and the put finds
            // no key. The engine refuses such a txn with "key not found".
            for_each_put(&mut t, &mut |p| {
                p.ignore_value = false;
                p.ignore_lease = false;
            });
        }
        t
    }

    fn watch(&mut self) -> Step {
        let stream = self.pick(2) as u8;
        self.creates[usize::from(stream)] += 1;
        let start = match self.pick(3) {
            0 | 1 => Rev::Zero,
            // History not compacted away (see Gen::compacted), and mostly reached already:
            // a watcher waiting for its start revision keeps etcd from answering progress
            // requests, and each step then waits a quiet period instead (watch.rs).
            _ => Rev::Rel(self.reached().max(self.compacted)),
        };
        let create = Watch {
            keys: self.keys(),
            start,
            prev_kv: self.chance(40),
            filters: match self.pick(8) {
                0 => vec![0],
                1 => vec![1],
                2 => vec![0, 1],
                _ => vec![],
            },
            progress_notify: self.chance(20),
            watch_id: if self.chance(15) {
                10 + i64::from(self.pick(3))
            } else {
                0
            },
            fragment: self.chance(10),
        };
        Step::Watch { stream, create }
    }

    fn lease_step(&mut self) -> Step {
        match self.pick(10) {
            0..=2 => {
                let ttl = if self.chance(5) {
                    9_000_000_001
                } else {
                    LONG_TTL
                };
                if self.chance(30) {
                    self.autos = self.autos.saturating_add(1);
                    return Step::Grant { id: None, ttl };
                }
                let id = self.pick(u32::from(self.granted) + 2).min(7) as u8;
                self.granted = self.granted.max(id + 1);
                Step::Grant { id: Some(id), ttl }
            }
            3 | 4 => Step::Revoke(self.lease()),
            5 | 6 => Step::TimeToLive {
                lease: self.lease(),
                keys: self.chance(60),
            },
            7 => Step::Leases,
            _ => Step::KeepAlive(self.lease()),
        }
    }

    fn watch_step(&mut self) -> Step {
        let stream = self.pick(2) as u8;
        match self.pick(10) {
            0..=5 => self.watch(),
            6..=8 => {
                let known = u32::try_from(self.creates[usize::from(stream)]).unwrap_or(0);
                let watch_id = match self.chance(10) {
                    true => 10 + i64::from(self.pick(3)),
                    false => i64::from(self.pick(known + 1)),
                };
                Step::Cancel { stream, watch_id }
            }
            _ => Step::Progress { stream },
        }
    }

    fn step(&mut self) -> Step {
        let step = match self.pick(100) {
            0..=21 => Step::Put(self.put()),
            22..=38 => Step::Range(self.range()),
            39..=45 => Step::Delete(self.delete()),
            46..=60 => Step::Txn(self.txn(0)),
            61..=72 => self.lease_step(),
            73..=74 => {
                let r = self.past();
                self.compacted = self.compacted.max(r);
                Step::Compact {
                    revision: Rev::Rel(r),
                    physical: self.chance(30),
                }
            }
            _ => self.watch_step(),
        };
        if step.writes() {
            self.writes += 1;
        }
        step
    }
}
