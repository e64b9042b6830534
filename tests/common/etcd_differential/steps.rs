//! The steps of an etcd differential sequence: requests with their keys, revisions and
//! lease ids named relative to the run that sends them (key `k3` of the run's prefix,
//! revision `r2` = two after the run's first, lease `L1` = the run's chosen id 1, `auto0` =
//! the first id the server chose), so that one sequence means the same on every server and
//! on every rerun. [`std::fmt::Display`] gives the short form transcripts and shrunk
//! sequences are printed in.

use std::fmt;

/// Keys of one run: `k0` to `k5` under its prefix.
pub const KEYS: u8 = 6;

/// A key of the run, or the empty key (which etcd refuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Key {
    K(u8),
    #[default]
    Empty,
}

/// Where a range of keys ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum End {
    /// No range_end: the key alone.
    #[default]
    One,
    /// Up to key `k<n>`, excluded.
    To(u8),
    /// The end of the run's prefix: every key of the run from the key on.
    Prefix,
    /// `"\0"`: every key from the key on (later runs' prefixes sort after this one's, and
    /// do not exist yet while it runs).
    FromKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Keys {
    pub key: Key,
    pub end: End,
}

impl Keys {
    pub fn one(k: u8) -> Keys {
        Keys {
            key: Key::K(k),
            end: End::One,
        }
    }

    pub fn span(k: u8, end: End) -> Keys {
        Keys {
            key: Key::K(k),
            end,
        }
    }
}

/// A revision as a request carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rev {
    /// 0: the field unset (latest, no filter, from now).
    #[default]
    Zero,
    /// The run's first revision plus n.
    Rel(i64),
    /// Sent as is (negative revisions).
    Raw(i64),
}

/// A lease id as a request carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lease {
    /// 0: no lease.
    #[default]
    No,
    /// The run's chosen id n (granted or not).
    Chosen(u8),
    /// The n-th id the server chose in this run (an id no lease has if there is none).
    Auto(u8),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Put {
    pub key: Key,
    pub value: String,
    pub lease: Lease,
    pub prev_kv: bool,
    pub ignore_value: bool,
    pub ignore_lease: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Range {
    pub keys: Keys,
    pub limit: i64,
    pub revision: Rev,
    /// etcd's SortOrder: 0 none, 1 ascend, 2 descend.
    pub sort_order: i32,
    /// etcd's SortTarget: 0 key, 1 version, 2 create, 3 mod, 4 value.
    pub sort_target: i32,
    pub serializable: bool,
    pub keys_only: bool,
    pub count_only: bool,
    pub min_mod: Rev,
    pub max_mod: Rev,
    pub min_create: Rev,
    pub max_create: Rev,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Delete {
    pub keys: Keys,
    pub prev_kv: bool,
}

/// What a compare tests, with its operand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Version(i64),
    Create(Rev),
    Mod(Rev),
    Value(String),
    Lease(Lease),
    /// The target (etcd's CompareTarget value) without an operand.
    Unset(i32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    pub keys: Keys,
    /// etcd's CompareResult: 0 equal, 1 greater, 2 less, 3 not equal.
    pub result: i32,
    pub target: Target,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    Range(Range),
    Put(Put),
    Delete(Delete),
    Txn(Txn),
    /// A RequestOp with no request inside.
    Empty,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Txn {
    pub compare: Vec<Compare>,
    pub success: Vec<TxnOp>,
    pub failure: Vec<TxnOp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Watch {
    pub keys: Keys,
    pub start: Rev,
    pub prev_kv: bool,
    /// FilterType values: 0 NOPUT, 1 NODELETE.
    pub filters: Vec<i32>,
    pub progress_notify: bool,
    pub watch_id: i64,
    pub fragment: bool,
}

/// One request of a sequence. Watch steps name one of the run's watch streams, opened by
/// its first create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Put(Put),
    Range(Range),
    Delete(Delete),
    Txn(Txn),
    Compact {
        revision: Rev,
        physical: bool,
    },
    /// `id: None` asks the server to choose (LeaseGrant with ID 0).
    Grant {
        id: Option<u8>,
        ttl: i64,
    },
    Revoke(Lease),
    TimeToLive {
        lease: Lease,
        keys: bool,
    },
    Leases,
    /// One request on a new LeaseKeepAlive stream, and its answer.
    KeepAlive(Lease),
    Watch {
        stream: u8,
        create: Watch,
    },
    Cancel {
        stream: u8,
        watch_id: i64,
    },
    Progress {
        stream: u8,
    },
}

impl Step {
    /// The kind of request, which a shrunk sequence must still differ on.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Put(_) => "put",
            Step::Range(_) => "range",
            Step::Delete(_) => "delete",
            Step::Txn(_) => "txn",
            Step::Compact { .. } => "compact",
            Step::Grant { .. } => "grant",
            Step::Revoke(_) => "revoke",
            Step::TimeToLive { .. } => "timetolive",
            Step::Leases => "leases",
            Step::KeepAlive(_) => "keepalive",
            Step::Watch { .. } => "watch",
            Step::Cancel { .. } => "cancel",
            Step::Progress { .. } => "progress",
        }
    }

    /// True for the steps that may change the store (and so fire watches).
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Step::Put(_) | Step::Delete(_) | Step::Txn(_) | Step::Revoke(_) | Step::Compact { .. }
        )
    }
}

// ---- the short form ----

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::K(k) => write!(f, "k{k}"),
            Key::Empty => write!(f, "''"),
        }
    }
}

impl fmt::Display for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.end {
            End::One => write!(f, "{}", self.key),
            End::To(k) => write!(f, "{}..k{k}", self.key),
            End::Prefix => write!(f, "{}..prefix-end", self.key),
            End::FromKey => write!(f, "{}..\\0", self.key),
        }
    }
}

impl fmt::Display for Rev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rev::Zero => write!(f, "0"),
            Rev::Rel(n) => write!(f, "r{n}"),
            Rev::Raw(n) => write!(f, "raw{n}"),
        }
    }
}

impl fmt::Display for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lease::No => write!(f, "0"),
            Lease::Chosen(n) => write!(f, "L{n}"),
            Lease::Auto(n) => write!(f, "auto{n}"),
        }
    }
}

/// ` name` for each set flag.
fn flags(f: &mut fmt::Formatter<'_>, set: &[(&str, bool)]) -> fmt::Result {
    for (name, on) in set {
        if *on {
            write!(f, " {name}")?;
        }
    }
    Ok(())
}

/// ` name=value` for each value that is not the default.
fn fields<T: fmt::Display + PartialEq + Default>(
    f: &mut fmt::Formatter<'_>,
    set: &[(&str, T)],
) -> fmt::Result {
    for (name, v) in set {
        if *v != T::default() {
            write!(f, " {name}={v}")?;
        }
    }
    Ok(())
}

impl fmt::Display for Put {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "put {}={:?}", self.key, self.value)?;
        fields(f, &[("lease", self.lease)])?;
        flags(
            f,
            &[
                ("prev_kv", self.prev_kv),
                ("ignore_value", self.ignore_value),
                ("ignore_lease", self.ignore_lease),
            ],
        )
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "range {}", self.keys)?;
        fields(f, &[("limit", self.limit)])?;
        fields(
            f,
            &[
                ("sort_order", self.sort_order),
                ("target", self.sort_target),
            ],
        )?;
        fields(
            f,
            &[
                ("rev", self.revision),
                ("min_mod", self.min_mod),
                ("max_mod", self.max_mod),
                ("min_create", self.min_create),
                ("max_create", self.max_create),
            ],
        )?;
        flags(
            f,
            &[
                ("serializable", self.serializable),
                ("keys_only", self.keys_only),
                ("count_only", self.count_only),
            ],
        )
    }
}

impl fmt::Display for Delete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "delete {}", self.keys)?;
        flags(f, &[("prev_kv", self.prev_kv)])
    }
}

impl fmt::Display for Compare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = ["=", ">", "<", "!="]
            .get(self.result as usize)
            .map_or_else(|| format!("?{}", self.result), |s| s.to_string());
        match &self.target {
            Target::Version(v) => write!(f, "version({}){op}{v}", self.keys),
            Target::Create(r) => write!(f, "create({}){op}{r}", self.keys),
            Target::Mod(r) => write!(f, "mod({}){op}{r}", self.keys),
            Target::Value(v) => write!(f, "value({}){op}{v:?}", self.keys),
            Target::Lease(l) => write!(f, "lease({}){op}{l}", self.keys),
            Target::Unset(t) => write!(f, "target{t}({}){op}unset", self.keys),
        }
    }
}

impl fmt::Display for TxnOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnOp::Range(r) => write!(f, "{r}"),
            TxnOp::Put(p) => write!(f, "{p}"),
            TxnOp::Delete(d) => write!(f, "{d}"),
            TxnOp::Txn(t) => write!(f, "{t}"),
            TxnOp::Empty => write!(f, "empty op"),
        }
    }
}

/// `a; b; c`
fn joined<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl fmt::Display for Txn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "txn(if [{}] then [{}] else [{}])",
            joined(&self.compare),
            joined(&self.success),
            joined(&self.failure)
        )
    }
}

impl fmt::Display for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "watch {}", self.keys)?;
        fields(f, &[("start", self.start)])?;
        fields(f, &[("id", self.watch_id)])?;
        if !self.filters.is_empty() {
            write!(f, " filters={:?}", self.filters)?;
        }
        flags(
            f,
            &[
                ("prev_kv", self.prev_kv),
                ("progress_notify", self.progress_notify),
                ("fragment", self.fragment),
            ],
        )
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Put(p) => write!(f, "{p}"),
            Step::Range(r) => write!(f, "{r}"),
            Step::Delete(d) => write!(f, "{d}"),
            Step::Txn(t) => write!(f, "{t}"),
            Step::Compact { revision, physical } => {
                write!(f, "compact {revision}")?;
                flags(f, &[("physical", *physical)])
            }
            Step::Grant { id: Some(n), ttl } => write!(f, "grant L{n} ttl={ttl}"),
            Step::Grant { id: None, ttl } => write!(f, "grant auto ttl={ttl}"),
            Step::Revoke(l) => write!(f, "revoke {l}"),
            Step::TimeToLive { lease, keys } => {
                write!(f, "timetolive {lease}")?;
                flags(f, &[("keys", *keys)])
            }
            Step::Leases => write!(f, "leases"),
            Step::KeepAlive(l) => write!(f, "keepalive {l}"),
            Step::Watch { stream, create } => write!(f, "s{stream}: {create}"),
            Step::Cancel { stream, watch_id } => write!(f, "s{stream}: cancel {watch_id}"),
            Step::Progress { stream } => write!(f, "s{stream}: progress"),
        }
    }
}

// ---- simpler forms, for the shrinker ----

/// `v` changed by each of `edits`, where that changes it.
fn edited<T: Clone + PartialEq>(v: &T, edits: &[&dyn Fn(&mut T)]) -> Vec<T> {
    edits
        .iter()
        .filter_map(|edit| {
            let mut c = v.clone();
            edit(&mut c);
            (c != *v).then_some(c)
        })
        .collect()
}

/// `items` without one of them, for each; then with one replaced by a simpler form.
fn fewer<T: Clone>(items: &[T], simpler: impl Fn(&T) -> Vec<T>) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = (0..items.len())
        .map(|i| [&items[..i], &items[i + 1..]].concat())
        .collect();
    for (i, item) in items.iter().enumerate() {
        for s in simpler(item) {
            let mut v = items.to_vec();
            v[i] = s;
            out.push(v);
        }
    }
    out
}

impl Put {
    fn simpler(&self) -> Vec<Put> {
        edited(
            self,
            &[
                &|p| p.lease = Lease::No,
                &|p| p.prev_kv = false,
                &|p| p.ignore_value = false,
                &|p| p.ignore_lease = false,
                &|p| p.value.clear(),
            ],
        )
    }
}

impl Range {
    fn simpler(&self) -> Vec<Range> {
        edited(
            self,
            &[
                &|r| r.keys.end = End::One,
                &|r| r.limit = 0,
                &|r| r.revision = Rev::Zero,
                &|r| r.sort_order = 0,
                &|r| r.sort_target = 0,
                &|r| r.serializable = false,
                &|r| r.keys_only = false,
                &|r| r.count_only = false,
                &|r| r.min_mod = Rev::Zero,
                &|r| r.max_mod = Rev::Zero,
                &|r| r.min_create = Rev::Zero,
                &|r| r.max_create = Rev::Zero,
            ],
        )
    }
}

impl Delete {
    fn simpler(&self) -> Vec<Delete> {
        edited(self, &[&|d| d.keys.end = End::One, &|d| d.prev_kv = false])
    }
}

impl TxnOp {
    fn simpler(&self) -> Vec<TxnOp> {
        match self {
            TxnOp::Range(r) => r.simpler().into_iter().map(TxnOp::Range).collect(),
            TxnOp::Put(p) => p.simpler().into_iter().map(TxnOp::Put).collect(),
            TxnOp::Delete(d) => d.simpler().into_iter().map(TxnOp::Delete).collect(),
            TxnOp::Txn(t) => t.simpler().into_iter().map(TxnOp::Txn).collect(),
            TxnOp::Empty => Vec::new(),
        }
    }
}

impl Txn {
    /// Without a compare or an op, or with one of them simpler.
    fn simpler(&self) -> Vec<Txn> {
        let mut out: Vec<Txn> = fewer(&self.compare, |_| Vec::new())
            .into_iter()
            .map(|compare| Txn {
                compare,
                ..self.clone()
            })
            .collect();
        out.extend(
            fewer(&self.success, TxnOp::simpler)
                .into_iter()
                .map(|success| Txn {
                    success,
                    ..self.clone()
                }),
        );
        out.extend(
            fewer(&self.failure, TxnOp::simpler)
                .into_iter()
                .map(|failure| Txn {
                    failure,
                    ..self.clone()
                }),
        );
        out
    }
}

impl Watch {
    fn simpler(&self) -> Vec<Watch> {
        edited(
            self,
            &[
                &|w| w.keys.end = End::One,
                &|w| w.start = Rev::Zero,
                &|w| w.prev_kv = false,
                &|w| w.filters.clear(),
                &|w| w.progress_notify = false,
                &|w| w.watch_id = 0,
                &|w| w.fragment = false,
            ],
        )
    }
}

impl Step {
    /// Simpler forms of the step, for the shrinker: an option left out, an op or a compare
    /// of a txn dropped.
    pub fn simpler(&self) -> Vec<Step> {
        match self {
            Step::Put(p) => p.simpler().into_iter().map(Step::Put).collect(),
            Step::Range(r) => r.simpler().into_iter().map(Step::Range).collect(),
            Step::Delete(d) => d.simpler().into_iter().map(Step::Delete).collect(),
            Step::Txn(t) => t.simpler().into_iter().map(Step::Txn).collect(),
            Step::Watch { stream, create } => create
                .simpler()
                .into_iter()
                .map(|create| Step::Watch {
                    stream: *stream,
                    create,
                })
                .collect(),
            Step::TimeToLive { lease, keys: true } => vec![Step::TimeToLive {
                lease: *lease,
                keys: false,
            }],
            _ => Vec::new(),
        }
    }
}
