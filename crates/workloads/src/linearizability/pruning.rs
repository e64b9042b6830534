//! Turns one key's ops into what the search explores: each op's [`Transition`], its
//! interval, and the spares (below); indeterminate ops nobody observed are dropped, and
//! those somebody observed get a deadline.
//!
//! Values are unique, so a value v has one producer (the Write or Cas that writes it), and
//! an op *observes* v when its legality depends on the register holding v: a read returning
//! v, a rejected CAS reporting current v, an applied CAS expecting v (and a possibly-applied
//! indeterminate CAS expecting v, when that CAS must itself be kept).
//!
//! **Dropping.** Omitting an indeterminate op is always allowed (it may never have taken
//! effect), so it is sound to drop one whenever any linearization that contains it can be
//! turned into one that does not:
//! - an indeterminate Read has no effect: drop it;
//! - an indeterminate Write(v) / Cas(new = v) that nothing observes: in any linearization,
//!   the ops between it and the next write see v, and none of them observes v, so
//!   removing it leaves each of them legal: a read, a CasRejected{Some(c)} or an applied CAS
//!   needs c ≠ v to be current and would have been illegal with v current; writes need
//!   nothing. The one exception is `CasRejected { current: None }` (expected e), which
//!   holds for *any* current value but e and so may need v as its explanation. On keys with
//!   such ops an unobserved indeterminate write is kept unless it was invoked after every
//!   one of them completed (placed after all of them, nothing can need it).
//!
//! **Spares.** Such a kept write X can only matter as the current value at some of those
//! rejections: in a linearization, the ops between X and the next overwrite all see X's
//! value x, so they are rejections of unknown current expecting other values than x
//! (anything else would observe x). If none of them expects the value u that X replaced,
//! drop X; otherwise move X later, to just before the first one expecting u: the
//! rejections it passes expect values other than u and still hold. So X is needed only
//! immediately before a rejection expecting the current value, to replace it. Such X are
//! not searched as ops but as *spares* ([`Spares`]): a rejection expecting the current
//! value may use one invoked before every completion still to be linearized (so placeable
//! there). A spare whose value no op references (as a CAS's expected value) leaves a
//! value no op can tell from any other such, so spare Writes of that kind are
//! interchangeable (the search counts those used), and such a spare CAS from u serves
//! only while u is current, which happens once; spares whose value is referenced are
//! tracked one by one, and leave their own value.
//!
//! **Deadlines.** An observed indeterminate op X must take effect before each of its
//! observers, so before the earliest observer's completion (for an observer that is itself
//! a kept indeterminate CAS, before that CAS's own deadline): X is searched as an op
//! completing there, which changes no verdict and keeps the search's set of open ops
//! small.

use std::collections::{HashMap, HashSet};

use super::history::{Call, Op, Ret};
use super::model::{observed_value, Interner, Transition, Value};

/// One op as the search sees it.
#[derive(Debug, Clone, Copy)]
pub struct SearchOp {
    pub transition: Transition,
    pub invoke_us: u64,
    /// The completion, or the deadline of an indeterminate op.
    pub return_us: u64,
    /// Position in the key's op list given to [`prepare`].
    pub source: usize,
}

/// One key's ops ready to search, in invoke order.
#[derive(Debug)]
pub struct Prepared {
    pub ops: Vec<SearchOp>,
    pub spares: Spares,
    /// Indeterminate ops dropped.
    pub pruned: usize,
}

/// Unobserved indeterminate writes a rejection of unknown current may use (module docs).
#[derive(Debug, Default)]
pub struct Spares {
    /// Invoke times of spare Writes of unreferenced values, ascending.
    pub writes: Vec<u64>,
    /// Spare CASes of unreferenced values: expected value → the earliest invoke.
    pub cas: HashMap<Value, u64>,
    /// Spares of referenced values: (transition, invoke).
    pub referenced: Vec<(Transition, u64)>,
}

/// How an indeterminate write is kept.
#[derive(Debug, Clone, Copy)]
enum Keep {
    /// Observed: must take effect before this deadline.
    Must(u64),
    /// A spare; whether some CAS expects its value.
    Spare { referenced: bool },
}

/// Prepares one key's ops (given in invoke order; `Failed` ops are ignored).
pub fn prepare(key_ops: &[&Op]) -> Prepared {
    let keep = indeterminate_writes_kept(key_ops);
    let mut values = Interner::default();
    let mut prepared = Prepared {
        ops: Vec::with_capacity(key_ops.len()),
        spares: Spares::default(),
        pruned: 0,
    };
    for (source, op) in key_ops.iter().enumerate() {
        let Some(transition) = Transition::of(op, &mut values) else {
            prepared.pruned += usize::from(op.is_indeterminate());
            continue;
        };
        let return_us = match (op.complete_us, keep.get(&source)) {
            (Some(complete), _) => complete,
            (None, Some(Keep::Must(deadline))) => *deadline,
            (None, Some(&Keep::Spare { referenced })) => {
                prepared.spares.add(transition, op.invoke_us, referenced);
                continue;
            }
            (None, None) => {
                prepared.pruned += 1;
                continue;
            }
        };
        prepared.ops.push(SearchOp {
            transition,
            invoke_us: op.invoke_us,
            return_us: return_us.max(op.invoke_us),
            source,
        });
    }
    prepared.spares.writes.sort_unstable();
    prepared
}

impl Spares {
    fn add(&mut self, transition: Transition, invoke_us: u64, referenced: bool) {
        match transition {
            _ if referenced => self.referenced.push((transition, invoke_us)),
            Transition::Cas { expected, .. } => {
                let earliest = self.cas.entry(expected).or_insert(invoke_us);
                *earliest = (*earliest).min(invoke_us);
            }
            _ => self.writes.push(invoke_us),
        }
    }
}

/// The indeterminate writes kept, by position (the others are dropped).
fn indeterminate_writes_kept(key_ops: &[&Op]) -> HashMap<usize, Keep> {
    // Earliest completion of a completed op observing each value.
    let mut observed: HashMap<&str, u64> = HashMap::new();
    let mut last_unknown_rejection = None;
    for op in key_ops {
        let Some(complete) = op.complete_us else {
            continue;
        };
        if let Some(v) = observed_value(op) {
            let d = observed.entry(v).or_insert(complete);
            *d = (*d).min(complete);
        }
        if matches!(op.ret, Some(Ret::CasRejected { current: None })) {
            last_unknown_rejection = last_unknown_rejection.max(Some(complete));
        }
    }
    let writers: Vec<usize> = (0..key_ops.len())
        .filter(|&i| key_ops[i].is_indeterminate() && key_ops[i].written_value().is_some())
        .collect();
    let mut kept: HashMap<usize, Keep> = HashMap::new();
    // A kept indeterminate CAS observes its expected value, whose producer may be another
    // indeterminate op: relax until stable (deadlines only decrease; each pass settles at
    // least one more link of a chain, so len + 1 passes suffice).
    for _ in 0..=writers.len() {
        let mut changed = false;
        for &i in &writers {
            let op = key_ops[i];
            let Some(&deadline) = op.written_value().and_then(|v| observed.get(v)) else {
                continue;
            };
            if matches!(kept.get(&i), Some(&Keep::Must(d)) if d <= deadline) {
                continue;
            }
            kept.insert(i, Keep::Must(deadline));
            changed = true;
            if let Some(expected) = observed_value(op) {
                let d = observed.entry(expected).or_insert(deadline);
                *d = (*d).min(deadline);
            }
        }
        if !changed {
            break;
        }
    }
    let Some(last) = last_unknown_rejection else {
        return kept;
    };
    let referenced: HashSet<&str> = key_ops
        .iter()
        .filter(|op| !op.is_failed())
        .filter_map(|op| match &op.call {
            Call::Cas { expected, .. } => expected.as_deref(),
            _ => None,
        })
        .collect();
    for &i in &writers {
        let op = key_ops[i];
        if kept.contains_key(&i) || op.invoke_us > last {
            continue;
        }
        let referenced = op.written_value().is_some_and(|v| referenced.contains(v));
        kept.insert(i, Keep::Spare { referenced });
    }
    kept
}
