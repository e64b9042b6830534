//! Turns one key's ops into what the search explores: each op's [`Transition`], its
//! interval, and whether it may be linearized as a no-op; indeterminate ops nobody observed
//! are dropped, and those somebody observed get a deadline.
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
//!   such ops an unobserved indeterminate write is kept, as *optional* (it may be
//!   linearized as a no-op), unless it was invoked after every one of them completed:
//!   placed after all of them, nothing can need it.
//!
//! **Deadlines.** An observed indeterminate op X must take effect before each of its
//! observers, so before the earliest observer's completion (for an observer that is itself
//! a kept indeterminate CAS, before that CAS's own deadline): X is searched as an op
//! completing there, which changes no verdict and keeps the search's set of open ops
//! small. An optional op's deadline is the last completion of a `CasRejected { current:
//! None }` on its key: if a linearization places it after all of them it can be dropped.

use std::collections::HashMap;

use super::history::{Op, Ret};
use super::model::{observed_value, Interner, Transition};

/// One op as the search sees it.
#[derive(Debug, Clone, Copy)]
pub struct SearchOp {
    pub transition: Transition,
    /// May also be linearized as a no-op (an unobserved indeterminate write kept for a
    /// `CasRejected { current: None }`).
    pub optional: bool,
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
    /// Indeterminate ops dropped.
    pub pruned: usize,
}

/// Prepares one key's ops (given in invoke order; `Failed` ops are ignored).
pub fn prepare(key_ops: &[&Op]) -> Prepared {
    let deadlines = indeterminate_deadlines(key_ops);
    let mut values = Interner::default();
    let mut ops = Vec::with_capacity(key_ops.len());
    let mut pruned = 0;
    for (source, op) in key_ops.iter().enumerate() {
        let transition = Transition::of(op, &mut values);
        let (return_us, optional) = match (op.complete_us, deadlines.get(&source)) {
            (Some(complete), _) => (complete, false),
            (None, Some(&(deadline, optional))) => (deadline.max(op.invoke_us), optional),
            (None, None) => (0, true),
        };
        match transition {
            Some(transition) if op.complete_us.is_some() || deadlines.contains_key(&source) => ops
                .push(SearchOp {
                    transition,
                    optional,
                    invoke_us: op.invoke_us,
                    return_us,
                    source,
                }),
            _ if op.is_indeterminate() => pruned += 1,
            _ => {} // Failed
        }
    }
    Prepared { ops, pruned }
}

/// The indeterminate writes that must be searched: position → (deadline, optional).
fn indeterminate_deadlines(key_ops: &[&Op]) -> HashMap<usize, (u64, bool)> {
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
    let mut kept: HashMap<usize, (u64, bool)> = HashMap::new();
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
            if kept.get(&i).is_some_and(|&(d, _)| d <= deadline) {
                continue;
            }
            kept.insert(i, (deadline, false));
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
    if let Some(last) = last_unknown_rejection {
        for &i in &writers {
            if !kept.contains_key(&i) && key_ops[i].invoke_us <= last {
                kept.insert(i, (last, true));
            }
        }
    }
    kept
}
