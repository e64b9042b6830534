//! A linearizability checker for register histories: clients read, write and
//! compare-and-set a few keys while faults are injected, and [`check`] says whether some
//! total order of the ops, respecting real time, fits a register on every key.
//!
//! ```text
//! history.jsonl ─read_jsonl─> [Op] ─check─> per key (linearizability is local):
//!     pruning::prepare (drop unobserved indeterminate ops, deadlines for observed ones,
//!        spares for CAS rejections of unknown current)
//!     ─> certain violations first (a value seen that nobody wrote, or before its write
//!        began; a stale read: no search needed, and a search finds them only after
//!        exhausting every order of the ops before them)
//!     ─> search::search (Wing–Gong/Lowe, memoized on compact sets: memo)
//!     ─> on a violation, excerpt::excerpt (a small closed sub-history that is a proof)
//!   and stale::count_stale_reads, on its own.
//! ```
//!
//! Certain violations are looked for on every key first; then keys are searched smallest
//! first, and the first violation ends the search (the rest are still counted).
//!
//! Measured (release build, generated histories of 16 clients with 0.2% indeterminate
//! ops, `tests_random::time_generated_histories`, on a 2-core machine under others'
//! builds): linearizable 200k ops on 8 keys 0.5 s, 200k ops on one key 0.5–0.6 s, 500k ops
//! on 4 keys with unknown-current rejections 1.3–2 s; one read corrupted or made stale, the
//! violation is found and shrunk (to 1–3 ops) in 0.35–1.4 s, most of it reading and
//! grouping the history; the search alone (no shortcut) exhausts every order before a
//! stale read in the middle in 0.1 s, 1.6–2.2 s and 7.4–9.6 s.
//!
//! API: [`Op`] ([`Call`], [`Ret`]; `complete_us`/`ret` `None` = indeterminate: it may have
//! taken effect at any time after its invoke, or never), [`write_jsonl`], [`read_jsonl`],
//! [`check`] → [`Checked`] with a [`Verdict`]: `Linearizable`, `NotLinearizable`
//! ([`Violation`]: the key, a small excerpt that proves it, one sentence why), or `Unknown`
//! (the budget ran out, or the history is malformed: never a guess).
//!
//! Every write and CAS must write a value unique on its key (refused otherwise): pruning
//! (`pruning.rs`) and excerpts (`excerpt.rs`) rely on it, and their soundness arguments are
//! written there. Ties between a completion and an invoke count as concurrent.
//!
//! Crates evaluated first (in a scratch crate; a known-bad stale read, then histories of
//! 1,000–16,000 ops, 2 clients, debug build): `stateright` 0.31's `LinearizabilityTester`
//! finds the stale read, but searches recursively without memoization (4,000 ops 7.6 s,
//! 16,000 ops overflowed the stack), allows at most one in-flight op per thread, and has no
//! time budget or excerpt. `todc-utils` 0.1.1's `WGLChecker` also finds it, but clones a
//! `Vec<bool>` of the whole history per step and cache entry (quadratic: 4,000 ops 2.3 s,
//! 16,000 ops 43 s), needs every op to complete (no "or never"), returns only a bool and
//! panics on malformed input. Neither fits 100k–500k ops with indeterminate ops, a budget
//! and an excerpt, so the search is written here.

mod excerpt;
mod history;
mod memo;
mod model;
mod pruning;
mod search;
mod stale;

#[cfg(test)]
mod generate;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_random;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use history::{read_jsonl, validate, write_jsonl, Call, HistoryError, Op, Ret};

/// What [`check`] found.
#[derive(Debug, Clone)]
pub struct Checked {
    pub verdict: Verdict,
    /// Distinct keys.
    pub keys: usize,
    /// Ops in the history (Failed ones included).
    pub ops: usize,
    /// Ops without a result.
    pub indeterminate: usize,
    /// Indeterminate ops the pruning dropped before the search.
    pub pruned: usize,
    /// Reads that returned a value v although a write of another value, invoked after v's
    /// writer completed, had completed before the read began (`stale.rs`; docs/reference.md).
    pub stale_reads: u64,
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Linearizable,
    NotLinearizable(Violation),
    /// Not decided: why (the budget ran out on a key, or the history is malformed).
    Unknown {
        reason: String,
    },
}

/// A proof that one key's history is not linearizable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub key: String,
    /// A sub-history of the key that has no linearization and contains the producer of
    /// every value its ops observe (so the full history has none either), in invoke order.
    pub ops: Vec<Op>,
    pub why: String,
}

/// Checks `history` for linearizability within `budget` (wall clock, for everything:
/// search and excerpt). Violations visible without a search are looked for on every key
/// first; then keys are searched smallest first, and the first violation found ends the
/// search.
pub fn check(history: &[Op], budget: Duration) -> Checked {
    let started = Instant::now();
    let deadline = started
        .checked_add(budget)
        .unwrap_or(started + Duration::from_secs(1 << 32));
    let by_key = ops_by_key(history);
    let mut checked = Checked {
        verdict: Verdict::Linearizable,
        keys: by_key.len(),
        ops: history.len(),
        indeterminate: history.iter().filter(|op| op.is_indeterminate()).count(),
        pruned: 0,
        stale_reads: by_key
            .values()
            .map(|ops| stale::count_stale_reads(ops))
            .sum(),
        elapsed: Duration::ZERO,
    };
    if let Err((_, reason)) = validate(history) {
        checked.verdict = Verdict::Unknown { reason };
        checked.elapsed = started.elapsed();
        return checked;
    }
    let mut keys: Vec<(&str, Vec<&Op>)> = by_key.into_iter().collect();
    keys.sort_by_key(|(_, ops)| ops.len());
    // Certain violations on any key first: they cost no search.
    let mut violation = keys.iter().find_map(|(key, ops)| {
        let seed = first_certain_violation(ops)?;
        Some(prove(key, ops, seed, deadline))
    });
    let mut unknown = None;
    for (done, (key, ops)) in keys.iter().enumerate() {
        let prepared = pruning::prepare(ops);
        checked.pruned += prepared.pruned;
        if violation.is_some() {
            continue; // only counting what the pruning drops
        }
        match search_key(key, ops, &prepared, deadline) {
            Ok(None) => {}
            Ok(Some(found)) => violation = Some(found),
            Err(what) => {
                let what = what.unwrap_or_else(|| format!("the budget of {budget:?} ran out"));
                unknown.get_or_insert_with(|| {
                    format!(
                        "{what} while checking key {key:?} ({} ops), after {done} of {} keys",
                        ops.len(),
                        keys.len()
                    )
                });
            }
        }
    }
    checked.verdict = match (violation, unknown) {
        (Some(violation), _) => Verdict::NotLinearizable(violation),
        (None, Some(reason)) => Verdict::Unknown { reason },
        (None, None) => Verdict::Linearizable,
    };
    checked.elapsed = started.elapsed();
    checked
}

/// Searches one key: `Ok(None)` linearizable, `Ok(Some(_))` a violation, `Err` not
/// decided (`None`: out of time; `Some`: another reason).
fn search_key(
    key: &str,
    ops: &[&Op],
    prepared: &pruning::Prepared,
    deadline: Instant,
) -> Result<Option<Violation>, Option<String>> {
    match search::search(&prepared.ops, &prepared.spares, deadline) {
        search::Outcome::Linearizable => Ok(None),
        search::Outcome::NotLinearizable { blocked } => {
            let seed = Seed::Stuck(prepared.ops[blocked].source);
            Ok(Some(prove(key, ops, seed, deadline)))
        }
        search::Outcome::OutOfTime => Err(None),
        search::Outcome::OutOfMemory => {
            Err(Some("the search cache reached its 1 GiB bound".into()))
        }
    }
}

/// The violation on `key`, shrunk from where it was found; when the time runs out while
/// shrinking, the whole key (already known not to be linearizable) is the proof.
fn prove(key: &str, ops: &[&Op], seed: Seed, deadline: Instant) -> Violation {
    let proof = match seed {
        Seed::Stuck(op) => excerpt::excerpt(key, ops, op, deadline),
        Seed::Stale(read, overwrite) => {
            excerpt::excerpt_of_stale_read(key, ops, (read, overwrite), deadline)
        }
    };
    let (ops, why) = proof.unwrap_or_else(|| {
        let why = format!(
            "the {} ops on key {key:?} admit no linearization (the budget ran out before \
             they could be shrunk to a smaller proof)",
            ops.len()
        );
        (ops.iter().map(|&op| op.clone()).collect(), why)
    });
    let key = key.to_string();
    Violation { key, ops, why }
}

/// Where a key's violation was found: the op whose completion stopped the search, or a
/// stale read (read, overwrite).
enum Seed {
    Stuck(usize),
    Stale(usize, usize),
}

/// A violation visible without a search (which would find it only after exhausting every
/// order of the ops before it): an op observing a value nobody wrote, or written only
/// after it completed; a stale read.
fn first_certain_violation(key_ops: &[&Op]) -> Option<Seed> {
    if let Some(op) = excerpt::impossible_observation(key_ops) {
        return Some(Seed::Stuck(op));
    }
    let (read, overwrite) = stale::first_stale_read(key_ops)?;
    Some(Seed::Stale(read, overwrite))
}

/// Each key's ops (Failed ones included), in invoke order.
fn ops_by_key(history: &[Op]) -> BTreeMap<&str, Vec<&Op>> {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    for ops in by_key.values_mut() {
        ops.sort_by_key(|op| (op.invoke_us, op.id));
    }
    by_key
}
