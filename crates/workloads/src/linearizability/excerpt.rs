//! The shortest excerpt of a non-linearizable key's history that still proves it is not
//! linearizable, and one sentence saying why.
//!
//! **Soundness.** Values are unique, so each value has one producer. Let E be a subset of
//! a key's ops that contains the producer of every value its ops observe (see
//! [`super::pruning`]: read results, reported current values, expected values of applied
//! or indeterminate CASes) and no `CasRejected { current: None }`. Take any linearization L
//! of the full history and keep only E's ops, in L's order. Real-time order is kept (it is
//! a sub-order); writes are always legal; an op observing v had v's producer as the last
//! write before it in L, and that producer is in E while E adds no write between them, so v
//! is still current; an op observing the absent key had no write before it in L, so none in
//! E. Indeterminate ops of E may be kept or left out as in L. So L restricted to E is a
//! linearization of E: if E has none, neither has the history. (A rejected CAS with
//! unknown current only needs *some* other value to be current, which a dropped write may
//! have supplied; such ops are therefore never in E.)
//!
//! **Shrinking.** Start from a window of ops around the completion where the search got
//! stuck, grow it (doubling) until, closed under producers, it is not
//! linearizable; then drop ops one at a time, keeping each drop after which E is still
//! closed and still not linearizable (each check under a small budget), until no drop is
//! kept. A stale read shrinks to its 3 ops: the write read, the write over it, the read.
//! Where no window without unknown-current rejections is a proof, the whole key is.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::history::{Call, Op, Ret};
use super::model::observed_value;
use super::pruning::prepare;
use super::search::{search, Outcome};

/// A budget for each check while shrinking: excerpts are small, and a check that runs out
/// only means a drop is not kept.
const SHRINK_CHECK: Duration = Duration::from_millis(100);

/// The first window reaches this many ops either side of the stuck completion.
const FIRST_WINDOW: usize = 8;

/// One key's ops, in invoke order, with who produced each value.
struct KeyOps<'a> {
    ops: &'a [&'a Op],
    producer: HashMap<&'a str, usize>,
}

impl<'a> KeyOps<'a> {
    fn new(ops: &'a [&'a Op]) -> KeyOps<'a> {
        let producer = (0..ops.len())
            .filter_map(|i| Some((ops[i].produced_value()?, i)))
            .collect();
        KeyOps { ops, producer }
    }

    fn producer_of(&self, op: usize) -> Option<usize> {
        observed_value(self.ops[op]).and_then(|v| self.producer.get(v).copied())
    }

    /// `members` (sorted) plus the producers they depend on, transitively.
    fn close(&self, members: &[usize]) -> Vec<usize> {
        let mut inside = vec![false; self.ops.len()];
        let mut todo = members.to_vec();
        while let Some(i) = todo.pop() {
            if !std::mem::replace(&mut inside[i], true) {
                todo.extend(self.producer_of(i));
            }
        }
        (0..self.ops.len()).filter(|&i| inside[i]).collect()
    }

    fn is_closed(&self, members: &[usize]) -> bool {
        members.iter().all(|&i| {
            self.producer_of(i)
                .is_none_or(|p| members.binary_search(&p).is_ok())
        })
    }

    fn is_proof(&self, members: &[usize], deadline: Instant) -> bool {
        let sub: Vec<&Op> = members.iter().map(|&i| self.ops[i]).collect();
        let prepared = prepare(&sub);
        matches!(
            search(&prepared.ops, &prepared.spares, deadline),
            Outcome::NotLinearizable { .. }
        )
    }
}

/// A completed op (index into `key_ops`, in invoke order) that observes a value no op
/// wrote, or one whose only writer was invoked after the op completed: no search needed
/// (and none could find it sooner than after exhausting every order before it).
pub fn impossible_observation(key_ops: &[&Op]) -> Option<usize> {
    let producers: HashMap<&str, &Op> = key_ops
        .iter()
        .filter_map(|&op| Some((op.produced_value()?, op)))
        .collect();
    (0..key_ops.len()).find(|&i| {
        let op = key_ops[i];
        let (Some(seen), Some(completed)) = (observed_value(op), op.complete_us) else {
            return false;
        };
        producers.get(seen).is_none_or(|p| p.invoke_us > completed)
    })
}

/// Ops that may be in an excerpt: not failed, not a rejection with unknown current.
fn may_be_in_excerpt(op: &Op) -> bool {
    !op.is_failed() && !matches!(op.ret, Some(Ret::CasRejected { current: None }))
}

/// A small proof that `key`'s ops (in invoke order) are not linearizable, given the op
/// (index into `key_ops`) whose completion stopped the search; `None` when the time ran out
/// before any window was a proof. The excerpt is in invoke order.
pub fn excerpt(
    key: &str,
    key_ops: &[&Op],
    blocked: usize,
    deadline: Instant,
) -> Option<(Vec<Op>, String)> {
    let index = KeyOps::new(key_ops);
    let Some(window) = first_proof(&index, blocked, deadline)? else {
        let why = format!(
            "the {} ops on key {key:?} admit no linearization; no excerpt without its CAS \
             rejections of unknown current value is a proof, so this is the whole key",
            key_ops.len()
        );
        return Some((key_ops.iter().map(|&op| op.clone()).collect(), why));
    };
    Some(finish(key, &index, window, deadline))
}

/// The proof of a stale read (positions in `key_ops` of the read and of the write that had
/// overwritten its value): the two, the read value's producer, and the producers they
/// depend on; `None` if the time ran out.
pub fn excerpt_of_stale_read(
    key: &str,
    key_ops: &[&Op],
    (read, overwrite): (usize, usize),
    deadline: Instant,
) -> Option<(Vec<Op>, String)> {
    let index = KeyOps::new(key_ops);
    let members = index.close(&[read.min(overwrite), read.max(overwrite)]);
    index
        .is_proof(&members, deadline)
        .then(|| finish(key, &index, members, deadline))
}

/// Shrinks a closed proof and says why it is one.
fn finish(key: &str, index: &KeyOps, members: Vec<usize>, deadline: Instant) -> (Vec<Op>, String) {
    let members = shrink(index, members, deadline);
    let excerpt: Vec<Op> = members.iter().map(|&i| index.ops[i].clone()).collect();
    let why = explain(key, &excerpt, index);
    (excerpt, why)
}

/// The first growing window before the stuck completion that is a proof once closed:
/// `Some(None)` when no window is (the whole key, proven by the search, is the proof),
/// `None` when the time ran out first.
fn first_proof(key: &KeyOps, blocked: usize, deadline: Instant) -> Option<Option<Vec<usize>>> {
    let stuck_at = key.ops[blocked].complete_us.unwrap_or(u64::MAX);
    // Ops invoked up to the stuck completion, and as many after it: the search may get
    // stuck on an op that only later ones contradict.
    let stuck = key
        .ops
        .partition_point(|op| op.invoke_us <= stuck_at)
        .max(blocked + 1);
    let mut width = FIRST_WINDOW;
    loop {
        let (start, end) = (
            stuck.saturating_sub(width),
            (stuck + width).min(key.ops.len()),
        );
        let window: Vec<usize> = (start..end)
            .filter(|&i| may_be_in_excerpt(key.ops[i]))
            .collect();
        let members = key.close(&window);
        if key.is_proof(&members, deadline) {
            return Some(Some(members));
        }
        if Instant::now() >= deadline {
            return None;
        }
        if start == 0 && end == key.ops.len() {
            return Some(None);
        }
        width *= 2;
    }
}

/// Drops ops while the rest stays a closed proof (see the module docs).
fn shrink(key: &KeyOps, mut members: Vec<usize>, deadline: Instant) -> Vec<usize> {
    // Bounded: every pass but the last drops an op.
    for _ in 0..=members.len() {
        let mut dropped_any = false;
        let mut at = 0;
        while at < members.len() {
            if Instant::now() >= deadline {
                return members;
            }
            let mut trial = members.clone();
            trial.remove(at);
            let check_deadline = deadline.min(Instant::now() + SHRINK_CHECK);
            if key.is_closed(&trial) && key.is_proof(&trial, check_deadline) {
                members = trial;
                dropped_any = true;
            } else {
                at += 1;
            }
        }
        if !dropped_any {
            break;
        }
    }
    members
}

/// One sentence on why `excerpt` (in invoke order) has no linearization.
fn explain(key: &str, excerpt: &[Op], key_ops: &KeyOps) -> String {
    never_written(key, excerpt, key_ops)
        .or_else(|| seen_before_written(key, excerpt))
        .or_else(|| stale_read(key, excerpt))
        .or_else(|| double_cas(key, excerpt))
        .or_else(|| read_backwards(key, excerpt))
        .unwrap_or_else(|| {
            format!(
                "no order of these {} ops on key {key:?} respects both their real-time order \
                 and a register's semantics",
                excerpt.len()
            )
        })
}

fn never_written(key: &str, excerpt: &[Op], key_ops: &KeyOps) -> Option<String> {
    let op = excerpt
        .iter()
        .find(|op| observed_value(op).is_some_and(|v| !key_ops.producer.contains_key(v)))?;
    Some(format!(
        "op #{} (client {}) saw {:?} on key {key:?}, a value no op on that key wrote",
        op.id,
        op.client,
        observed_value(op)?
    ))
}

fn seen_before_written(key: &str, excerpt: &[Op]) -> Option<String> {
    excerpt.iter().find_map(|op| {
        let seen = observed_value(op)?;
        let producer = excerpt.iter().find(|p| p.produced_value() == Some(seen))?;
        let completed = op.complete_us?;
        (completed < producer.invoke_us).then(|| {
            format!(
                "op #{} (client {}) saw {seen:?} on key {key:?}, completing at {completed} µs, \
                 before op #{}, which wrote it, was invoked at {} µs",
                op.id, op.client, producer.id, producer.invoke_us
            )
        })
    })
}

/// The value of a write that certainly landed (acknowledged, or a CAS applied).
fn landed(op: &Op) -> Option<&str> {
    op.complete_us?;
    op.produced_value()
}

fn stale_read(key: &str, excerpt: &[Op]) -> Option<String> {
    for read in excerpt {
        let (Call::Read, Some(Ret::Read { value })) = (&read.call, &read.ret) else {
            continue;
        };
        let producer = excerpt
            .iter()
            .find(|op| landed(op).is_some() && landed(op) == value.as_deref());
        if value.is_some() && producer.is_none() {
            continue;
        }
        let since = producer.and_then(|p| p.complete_us);
        let over = excerpt.iter().find(|w| {
            landed(w).is_some()
                && since.is_none_or(|s| w.invoke_us > s)
                && w.complete_us.is_some_and(|c| c < read.invoke_us)
        });
        let Some(over) = over else { continue };
        let overwrote = match producer {
            Some(p) => format!("after op #{} wrote it", p.id),
            None => "on the absent key".to_string(),
        };
        return Some(format!(
            "op #{} (client {}) read {} on key {key:?} at {} µs although op #{} had written \
             {:?} {overwrote}, completing at {} µs, before the read began",
            read.id,
            read.client,
            shown(value),
            read.invoke_us,
            over.id,
            over.written_value()?,
            over.complete_us?
        ));
    }
    None
}

/// A register value as a sentence shows it: quoted, or "nothing" for the absent key.
fn shown(value: &Option<String>) -> String {
    match value {
        Some(v) => format!("{v:?}"),
        None => "nothing (the key absent)".into(),
    }
}

fn double_cas(key: &str, excerpt: &[Op]) -> Option<String> {
    let applied: Vec<(&Op, &Option<String>)> = excerpt
        .iter()
        .filter_map(|op| match (&op.call, &op.ret) {
            (Call::Cas { expected, .. }, Some(Ret::CasApplied)) => Some((op, expected)),
            _ => None,
        })
        .collect();
    for (i, (a, expected)) in applied.iter().enumerate() {
        if let Some((b, _)) = applied[i + 1..].iter().find(|(_, e)| e == expected) {
            return Some(format!(
                "ops #{} and #{} both applied a CAS from {} on key {key:?}, which \
                 held that value only once",
                a.id,
                b.id,
                shown(expected)
            ));
        }
    }
    None
}

fn read_backwards(key: &str, excerpt: &[Op]) -> Option<String> {
    let reads: Vec<(&Op, &Option<String>)> = excerpt
        .iter()
        .filter_map(|op| match &op.ret {
            Some(Ret::Read { value }) => Some((op, value)),
            _ => None,
        })
        .collect();
    let [(first, newer), (second, older)] = reads.as_slice() else {
        return None;
    };
    let before = first.complete_us.is_some_and(|c| c < second.invoke_us);
    (before && newer != older).then(|| {
        format!(
            "op #{} (client {}) read {} on key {key:?} after op #{} had already read {}, and \
             no order of their writes explains both",
            second.id,
            second.client,
            shown(older),
            first.id,
            shown(newer)
        )
    })
}
