//! Leases on the simulated cluster: etcd's lease model (coordbench-kv's `KvStore` and
//! `LeaseClock`, as engines/etcd-api drives them) on the Raft core, with clients that keep
//! leases alive through leader changes, crashes and partitions, and clients that abandon
//! theirs.
//!
//! Every node applies the committed kv commands to its own store and feeds its lease clock,
//! which a crash loses. As the runtime does, a node that starts leading asks a read round
//! and then promotes its clock; every `LEASE_TICK` a leader asks what is due (after a read
//! round) and proposes the expiries and checkpoints. A keep-alive goes to a node that
//! believes it leads (a stale one too) and is answered after its read round: renewed,
//! or the lease's checkpoint is cleared through the log first, or the lease is gone.
//!
//! Checked: a lease is revoked no earlier than its TTL after the last renewal acknowledged
//! to its client (or its grant), so a lease kept alive is never revoked, and no renewal is
//! acknowledged for a lease already revoked; after the faults stop, a leader finds every
//! lease expired no later than its TTL after the last time anything extended it (a renewal,
//! its grant, a new leader's promotion plus the election-timeout extension, the heal) plus
//! `SLACK_MS`, and the run converges only once every lease is revoked (how soon its revoke
//! commits is the log's liveness, which the cluster's convergence bound checks); all stores
//! agree at the end; acknowledged writes (grants, checkpoints, expiries) are checked with
//! every other write by the cluster checker.

use std::collections::{BTreeMap, HashMap};

use coordbench_kv::{
    Applied, Command, KvStore, LeaseAnswer, LeaseCheckpoint, LeaseClock, LeaseQuery, LeaseTiming,
    Response,
};
use coordbench_raft::{Entry, EntryKind, Role};

use super::state_machine::AppliedLog;
use super::{propose_data, proposed, read_at, Cluster, ELECTION_MIN};

/// Simulated milliseconds per tick.
pub const MS_PER_TICK: u64 = 10;
/// Ticks between a leader's rounds of expiry and checkpoints (etcd: 500 ms).
const LEASE_TICK: u64 = 5;
/// Leases longer than this are checkpointed this often.
const CHECKPOINT_MS: u64 = 1_000;
/// What may pass after a deadline before a leader finds it expired once the faults
/// stopped: the lease tick, a read round, elections of restarted nodes.
const SLACK_MS: u64 = 600;
/// Clients, each with one lease at a time.
const KEEPERS: usize = 4;
/// Ticks a grant may take before its client gives up on it (the lease may exist anyway:
/// nobody renews it, so it must expire).
const GRANT_PATIENCE: u64 = 100;

/// What a read round of a node was asked for.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// The node started leading in `term`.
    Lead,
    Due,
    Renew(i64),
}

/// One node's kv state machine and lease clock (the clock is lost in a crash).
#[derive(Default)]
struct NodeKv {
    store: KvStore,
    clock: LeaseClock,
    led_term: Option<u64>,
}

/// A client holding (or getting) one lease at a time.
#[derive(Clone, Debug)]
struct Keeper {
    lease: Option<i64>,
    ttl_s: i64,
    /// Tick of the grant's proposal while it is not acknowledged.
    granting: Option<u64>,
    next_renew: u64,
    /// The tick from which this client stops renewing its lease and gets another.
    abandon_at: u64,
}

/// What the checker knows of one lease.
#[derive(Clone, Debug, Default)]
struct Record {
    ttl_ms: u64,
    /// Its first apply anywhere (a grant counts from there) and last one.
    granted_ms: Option<u64>,
    last_grant_apply_ms: u64,
    /// The last renewal acknowledged to its client.
    last_ack_ms: Option<u64>,
    /// The term of that renewal's leader.
    last_ack_term: u64,
    revoked_ms: Option<u64>,
    /// A leader found it expired (after the faults stopped).
    expired: bool,
    /// Its client renews it.
    kept: bool,
}

/// Counts over one run, for the sweep's summary.
#[derive(Clone, Debug, Default)]
pub struct LeaseStats {
    pub granted: u64,
    pub renewed: u64,
    /// Renewals answered by a leader of another term than the lease's last renewal.
    pub renewed_across_leaders: u64,
    pub clears: u64,
    pub checkpoints: u64,
    pub revoked: u64,
    /// Leases their client still renewed that faults let run out.
    pub lost: u64,
    pub promotions: u64,
}

impl LeaseStats {
    pub fn add(&mut self, o: &LeaseStats) {
        self.granted += o.granted;
        self.renewed += o.renewed;
        self.renewed_across_leaders += o.renewed_across_leaders;
        self.clears += o.clears;
        self.checkpoints += o.checkpoints;
        self.revoked += o.revoked;
        self.lost += o.lost;
        self.promotions += o.promotions;
    }
}

/// The lease layer of one run.
pub struct Leases {
    timing: LeaseTiming,
    kv: Vec<NodeKv>,
    keepers: Vec<Keeper>,
    records: BTreeMap<i64, Record>,
    reads: HashMap<u64, Op>,
    next_lease: i64,
    last_promotion_ms: u64,
    /// When the faults stopped.
    healed_ms: Option<u64>,
    pub stats: LeaseStats,
}

fn now_ms(sim: &Cluster) -> u64 {
    sim.now * MS_PER_TICK
}

fn leases(sim: &mut Cluster) -> &mut Leases {
    sim.core
        .leases
        .as_mut()
        .expect("the lease layer is on in a lease run")
}

fn decode(e: &Entry) -> Option<Command> {
    match &e.kind {
        EntryKind::Normal(data) => Command::decode(data).ok(),
        EntryKind::Noop => None,
    }
}

impl Leases {
    pub fn new(nodes: u64) -> Self {
        let timing = LeaseTiming {
            promote_extension_ms: u64::from(ELECTION_MIN) * MS_PER_TICK,
            checkpoint_interval_ms: CHECKPOINT_MS,
        };
        Leases {
            timing,
            kv: (0..nodes)
                .map(|_| NodeKv {
                    clock: LeaseClock::new(timing),
                    ..NodeKv::default()
                })
                .collect(),
            keepers: Vec::new(),
            records: BTreeMap::new(),
            reads: HashMap::new(),
            next_lease: 1,
            last_promotion_ms: 0,
            healed_ms: None,
            stats: LeaseStats::default(),
        }
    }

    /// Node `id` lost its lease clock, or its state machine was replaced by `sm`: its
    /// store is rebuilt from what `sm` applied.
    pub fn reset_node(&mut self, id: u64, sm: &AppliedLog) {
        let mut kv = NodeKv {
            clock: LeaseClock::new(self.timing),
            ..NodeKv::default()
        };
        for (k, (_, data)) in sm.items.iter().enumerate() {
            if let Some(cmd) = data.as_deref().and_then(|d| Command::decode(d).ok()) {
                kv.store.apply(k as u64 + 1, &cmd);
            }
        }
        self.kv[id as usize - 1] = kv;
    }

    /// No more faults or client operations (at `now_ms`): every client stops renewing.
    pub fn on_heal(&mut self, now_ms: u64) {
        self.healed_ms = Some(now_ms);
        for r in self.records.values_mut() {
            r.kept = false;
        }
    }

    /// Whether every lease is revoked and every node's store agrees (after the heal).
    pub fn settled(&self) -> bool {
        let first = &self.kv[0].store;
        first.leases().next().is_none() && self.kv.iter().all(|n| n.store == *first)
    }

    /// Final checks: every lease that ever existed was revoked.
    pub fn finish(&self) -> Result<(), String> {
        match self
            .records
            .iter()
            .find(|(_, r)| r.granted_ms.is_some() && r.revoked_ms.is_none())
        {
            Some((id, r)) => Err(format!("lease {id} was never revoked: {r:?}")),
            None => Ok(()),
        }
    }
}

/// Applies a committed entry to node `id`'s store and clock, and checks revocations.
pub fn on_apply(sim: &mut Cluster, id: u64, e: &Entry) -> Result<(), String> {
    let Some(cmd) = decode(e) else {
        return Ok(());
    };
    let now = now_ms(sim);
    let l = leases(sim);
    let node = &mut l.kv[id as usize - 1];
    let applied = node.store.apply(e.index, &cmd);
    node.clock.observe(&cmd, &applied, now);
    l.on_applied(&cmd, &applied, now)
}

impl Leases {
    fn on_applied(&mut self, cmd: &Command, applied: &Applied, now: u64) -> Result<(), String> {
        match (cmd, &applied.result) {
            (Command::LeaseGrant { .. }, Ok(Response::LeaseGrant(g))) => {
                let r = self.records.entry(g.id).or_default();
                r.ttl_ms = u64::try_from(g.ttl).unwrap_or(0) * 1000;
                if r.granted_ms.is_none() {
                    r.granted_ms = Some(now);
                    self.stats.granted += 1;
                }
                r.last_grant_apply_ms = now;
            }
            (Command::LeaseExpire { .. }, Ok(Response::LeaseExpire(e))) => {
                for &lease in &e.expired {
                    self.on_revoked(lease, now)?;
                }
            }
            (Command::LeaseCheckpoint { checkpoints }, Ok(_)) => {
                self.stats.checkpoints += checkpoints.len() as u64;
            }
            _ => {}
        }
        Ok(())
    }

    /// Lease `id` was revoked at `now` on some node: the first time, never before its
    /// client's promise ran out.
    fn on_revoked(&mut self, id: i64, now: u64) -> Result<(), String> {
        let r = self.records.entry(id).or_default();
        if r.revoked_ms.is_some() {
            return Ok(());
        }
        r.revoked_ms = Some(now);
        self.stats.revoked += 1;
        if let Some(p) = r.promised_ms().filter(|&p| now < p) {
            return Err(format!(
                "lease {id} revoked early at {now} ms: its client was promised {p} ms ({r:?})"
            ));
        }
        Ok(())
    }

    /// A leader found lease `id` expired at `now`: once the faults stopped, no later than
    /// `SLACK_MS` after the last thing that extended it.
    fn on_expired(&mut self, id: i64, now: u64) -> Result<(), String> {
        let (ext, promoted) = (self.timing.promote_extension_ms, self.last_promotion_ms);
        let Some(healed) = self.healed_ms else {
            return Ok(());
        };
        let r = self.records.entry(id).or_default();
        if std::mem::replace(&mut r.expired, true) {
            return Ok(());
        }
        // A lease that ran out while faults kept the cluster from expiring it counts from
        // the heal.
        let extended = [
            r.last_ack_ms.unwrap_or(0) + r.ttl_ms,
            r.last_grant_apply_ms + r.ttl_ms,
            promoted + r.ttl_ms + ext,
            healed,
        ];
        let latest = extended.into_iter().max().unwrap_or(0) + SLACK_MS;
        if now > latest {
            return Err(format!(
                "lease {id} found expired late at {now} ms, after {latest} ms (last \
                 promotion at {promoted} ms; {r:?})"
            ));
        }
        Ok(())
    }
}

impl Record {
    /// Until when its client was told the lease lives: TTL after the last renewal
    /// acknowledged, or after its grant first applied.
    fn promised_ms(&self) -> Option<u64> {
        let from = self.last_ack_ms.into_iter().chain(self.granted_ms).max()?;
        Some(from + self.ttl_ms)
    }
}

/// The clients' operations of one fault-phase tick: grants, renewals, abandons.
pub fn client_ops(sim: &mut Cluster) -> Result<(), String> {
    if leases(sim).keepers.is_empty() {
        for k in 0..KEEPERS {
            let ttl_s = 1 + (k as i64 % 3);
            let abandon_at = sim.now + 50 + sim.rng.below(400);
            leases(sim).keepers.push(Keeper {
                lease: None,
                ttl_s,
                granting: None,
                next_renew: 0,
                abandon_at,
            });
        }
    }
    for k in 0..KEEPERS {
        keeper_tick(sim, k)?;
    }
    Ok(())
}

fn keeper_tick(sim: &mut Cluster, k: usize) -> Result<(), String> {
    let now = sim.now;
    let keeper = leases(sim).keepers[k].clone();
    if let (Some(id), true) = (keeper.lease, now >= keeper.abandon_at) {
        // Abandoned: nobody renews it any more; the client takes another lease.
        if let Some(r) = leases(sim).records.get_mut(&id) {
            r.kept = false;
        }
        let next = now + 50 + sim.rng.below(400);
        let kp = &mut leases(sim).keepers[k];
        kp.lease = None;
        kp.abandon_at = next;
        return Ok(());
    }
    match keeper.lease {
        None => grant(sim, k),
        Some(id) if keeper.granting.is_some_and(|t| now > t + GRANT_PATIENCE) => {
            let l = leases(sim);
            if let Some(r) = l.records.get_mut(&id) {
                r.kept = false;
            }
            let kp = &mut l.keepers[k];
            kp.lease = None;
            kp.granting = None;
            Ok(())
        }
        Some(id) if keeper.granting.is_none() && now >= keeper.next_renew => renew(sim, k, id),
        Some(_) => Ok(()),
    }
}

/// Proposes a grant of a fresh lease on a node that believes it leads.
fn grant(sim: &mut Cluster, k: usize) -> Result<(), String> {
    let Some(node) = sim.rng.pick(&sim.leader_ids()) else {
        return Ok(());
    };
    let l = leases(sim);
    let id = l.next_lease;
    l.next_lease += 1;
    let ttl = l.keepers[k].ttl_s;
    let cmd = Command::LeaseGrant { id, ttl, now_ms: 0 };
    if propose_data(sim, node, cmd.encode())?.is_some() {
        let now = sim.now;
        let l = leases(sim);
        l.records.entry(id).or_default().kept = true;
        let kp = &mut l.keepers[k];
        kp.lease = Some(id);
        kp.granting = Some(now);
    }
    Ok(())
}

/// Sends a keep-alive of lease `id` to a node that believes it leads.
fn renew(sim: &mut Cluster, k: usize, id: i64) -> Result<(), String> {
    let ttl_ticks = leases(sim).keepers[k].ttl_s as u64 * 1000 / MS_PER_TICK;
    let jitter = sim.rng.below(10);
    let Some(node) = sim.rng.pick(&sim.leader_ids()) else {
        return Ok(());
    };
    if let Some(ctx) = read_at(sim, node) {
        leases(sim).reads.insert(ctx, Op::Renew(id));
    }
    let now = sim.now;
    leases(sim).keepers[k].next_renew = now + ttl_ticks / 3 + jitter;
    Ok(())
}

/// A write of this node was acknowledged: a grant's client holds its lease from now on.
pub fn on_acked(sim: &mut Cluster, data: &[u8]) {
    let Ok(Command::LeaseGrant { id, .. }) = Command::decode(data) else {
        return;
    };
    let now = sim.now;
    let l = leases(sim);
    if let Some(kp) = l.keepers.iter_mut().find(|kp| kp.lease == Some(id)) {
        kp.granting = None;
        kp.next_renew = now;
    }
}

/// The nodes' own work each tick: a new leader's read round that promotes its clock, and
/// every `LEASE_TICK` a leader's round of expiries and checkpoints.
pub fn background(sim: &mut Cluster) -> Result<(), String> {
    for id in sim.leader_ids() {
        let Some(term) = sim.nodes[id as usize - 1]
            .raw
            .as_ref()
            .map(|r| r.status().term)
        else {
            continue;
        };
        let tick = sim.now % LEASE_TICK == 0;
        let node = &mut leases(sim).kv[id as usize - 1];
        let op = if node.led_term != Some(term) {
            node.led_term = Some(term);
            Op::Lead
        } else if tick {
            Op::Due
        } else {
            continue;
        };
        if let Some(ctx) = read_at(sim, id) {
            leases(sim).reads.insert(ctx, op);
        }
    }
    Ok(())
}

/// The read round `ctx` of node `id` confirmed its leadership, and the node applied the
/// read index: answer what the round was for.
pub fn on_read(sim: &mut Cluster, id: u64, ctx: u64) -> Result<(), String> {
    let Some(op) = leases(sim).reads.remove(&ctx) else {
        return Ok(());
    };
    let Some(st) = sim.nodes[id as usize - 1].raw.as_ref().map(|r| r.status()) else {
        return Ok(());
    };
    if st.role != Role::Leader {
        return Ok(());
    }
    let now = now_ms(sim);
    let l = leases(sim);
    let node = &mut l.kv[id as usize - 1];
    if node.clock.term() != Some(st.term) {
        l.stats.promotions += 1;
        l.last_promotion_ms = now;
    }
    let query = match op {
        Op::Lead => {
            node.clock.lead(st.term, now, &node.store);
            return Ok(());
        }
        Op::Due => LeaseQuery::Due { term: st.term },
        Op::Renew(lease) => LeaseQuery::Renew { id: lease },
    };
    let answer = node.clock.answer(st.term, now, &node.store, &query);
    match (op, answer) {
        (
            _,
            LeaseAnswer::Due {
                expired,
                checkpoints,
            },
        ) => propose_due(sim, id, expired, checkpoints),
        (Op::Renew(lease), answer) => renewed(sim, id, st.term, lease, answer),
        (_, other) => Err(format!("node {id}: unexpected lease answer {other:?}")),
    }
}

/// Proposes what leader `id` found due; expiries it already proposed in this term and
/// that are not applied yet are not proposed again.
fn propose_due(
    sim: &mut Cluster,
    id: u64,
    expired: Vec<i64>,
    checkpoints: Vec<LeaseCheckpoint>,
) -> Result<(), String> {
    let now = now_ms(sim);
    for &lease in &expired {
        leases(sim).on_expired(lease, now)?;
    }
    let pending = proposed_expiries(sim, id);
    let expired: Vec<i64> = expired
        .into_iter()
        .filter(|l| !pending.contains(l))
        .collect();
    if !expired.is_empty() {
        let cmd = Command::LeaseExpire {
            ids: expired,
            now_ms: 0,
        };
        propose_data(sim, id, cmd.encode())?;
    }
    if !checkpoints.is_empty() {
        propose_data(sim, id, Command::LeaseCheckpoint { checkpoints }.encode())?;
    }
    Ok(())
}

/// The leases in node `id`'s expiries of its current term that are not applied yet.
fn proposed_expiries(sim: &Cluster, id: u64) -> Vec<i64> {
    proposed(sim, id)
        .into_iter()
        .filter_map(|cmd| match cmd {
            Command::LeaseExpire { ids, .. } => Some(ids),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The answer of node `id`, leader of `term`, to a keep-alive of `lease`.
fn renewed(
    sim: &mut Cluster,
    id: u64,
    term: u64,
    lease: i64,
    answer: LeaseAnswer,
) -> Result<(), String> {
    let now = now_ms(sim);
    let l = leases(sim);
    let r = l.records.entry(lease).or_default();
    match answer {
        LeaseAnswer::Renewed { .. } => {
            if let Some(revoked) = r.revoked_ms {
                return Err(format!(
                    "node {id} renewed lease {lease} at {now} ms, revoked at {revoked} ms"
                ));
            }
            if r.last_ack_ms.is_some() && r.last_ack_term != term {
                l.stats.renewed_across_leaders += 1;
            }
            r.last_ack_ms = Some(now);
            r.last_ack_term = term;
            l.stats.renewed += 1;
            Ok(())
        }
        LeaseAnswer::ClearCheckpoint => {
            l.stats.clears += 1;
            let clear = Command::LeaseCheckpoint {
                checkpoints: vec![LeaseCheckpoint {
                    id: lease,
                    remaining_ms: 0,
                }],
            };
            propose_data(sim, id, clear.encode())?;
            let soon = sim.now + 2;
            if let Some(kp) = leases(sim)
                .keepers
                .iter_mut()
                .find(|k| k.lease == Some(lease))
            {
                kp.next_renew = soon;
            }
            Ok(())
        }
        LeaseAnswer::Expired | LeaseAnswer::NotFound => lost(sim, id, lease, answer),
        other => Err(format!("node {id}: unexpected renewal answer {other:?}")),
    }
}

/// The leader said `lease` is gone: never before its client's promise ran out.
fn lost(sim: &mut Cluster, id: u64, lease: i64, answer: LeaseAnswer) -> Result<(), String> {
    let now = now_ms(sim);
    let l = leases(sim);
    let r = l.records.entry(lease).or_default();
    if let Some(p) = r.promised_ms().filter(|&p| now < p) {
        return Err(format!(
            "node {id} answered {answer:?} for lease {lease} at {now} ms, promised {p} ms"
        ));
    }
    if answer == LeaseAnswer::NotFound && r.granted_ms.is_some() && r.revoked_ms.is_none() {
        return Err(format!(
            "node {id} does not know lease {lease}, never revoked"
        ));
    }
    if r.kept {
        l.stats.lost += 1;
        r.kept = false;
    }
    if let Some(kp) = l.keepers.iter_mut().find(|k| k.lease == Some(lease)) {
        kp.lease = None;
    }
    Ok(())
}
