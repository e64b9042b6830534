//! Seeded randomized tests: generated histories are linearizable by construction; with one
//! read corrupted they usually are not; small ones are cross-checked against a brute-force
//! search over every order, and every excerpt must be closed and a proof on its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::generate::{corrupt_one_read, linearizable_history, Shape};
use super::history::{Call, Op, Ret};
use super::pruning::prepare;
use super::search::{search, Outcome};
use super::{check, Verdict, Violation};

const ENOUGH: Duration = Duration::from_secs(60);

/// Whether some order of `ops` (one key; indeterminate ops optional) respects real time
/// and the register, by trying every order: for a handful of ops only.
pub(super) fn brute_force_linearizable(history: &[Op]) -> bool {
    let mut by_key: HashMap<&str, Vec<&Op>> = HashMap::new();
    for op in history.iter().filter(|op| !op.is_failed()) {
        by_key.entry(&op.key).or_default().push(op);
    }
    by_key.values().all(|ops| {
        assert!(ops.len() <= 12, "brute force on {} ops", ops.len());
        some_order(ops, &mut vec![false; ops.len()], None)
    })
}

fn some_order(ops: &[&Op], used: &mut [bool], value: Option<&str>) -> bool {
    let pending = |used: &[bool], i: usize| !used[i] && !ops[i].is_indeterminate();
    if !(0..ops.len()).any(|i| pending(used, i)) {
        return true;
    }
    for next in 0..ops.len() {
        // Nothing still to be placed may have completed before `next` was invoked.
        let blocked = (0..ops.len()).any(|o| {
            pending(used, o) && ops[o].complete_us.is_some_and(|c| c < ops[next].invoke_us)
        });
        if used[next] || blocked {
            continue;
        }
        let Some(after) = register_step(ops[next], value) else {
            continue;
        };
        used[next] = true;
        let found = some_order(ops, used, after);
        used[next] = false;
        if found {
            return true;
        }
    }
    false
}

/// The register after `op` from `value`, `None` if `op`'s result cannot happen there. An
/// indeterminate op here takes effect (leaving it out is the other branch).
fn register_step<'a>(op: &'a Op, value: Option<&'a str>) -> Option<Option<&'a str>> {
    match (&op.call, &op.ret) {
        (Call::Read, Some(Ret::Read { value: seen })) => {
            (seen.as_deref() == value).then_some(value)
        }
        (Call::Read, None) => Some(value),
        (Call::Write { value: new }, _) => Some(Some(new)),
        (Call::Cas { expected, new }, None | Some(Ret::CasApplied)) => {
            (expected.as_deref() == value).then_some(Some(new))
        }
        (Call::Cas { expected, .. }, Some(Ret::CasRejected { current })) => {
            let fits = expected.as_deref() != value
                && current.as_ref().is_none_or(|c| c.as_deref() == value);
            fits.then_some(value)
        }
        _ => None,
    }
}

/// Asserts that `v` is closed (holds the producer, in `history`, of every value its ops
/// observe, and no rejection of unknown current) and not linearizable on its own.
fn assert_proof(v: &Violation, history: &[Op], context: &str) {
    for op in &v.ops {
        assert!(
            !matches!(op.ret, Some(Ret::CasRejected { current: None })),
            "{context}: {v:?}"
        );
        let Some(seen) = super::model::observed_value(op) else {
            continue;
        };
        let producer = history
            .iter()
            .find(|p| p.key == v.key && p.produced_value() == Some(seen));
        if let Some(producer) = producer {
            assert!(
                v.ops.contains(producer),
                "{context}: producer of {seen} missing: {v:?}"
            );
        }
    }
    let alone = check(&v.ops, ENOUGH).verdict;
    assert!(
        matches!(alone, Verdict::NotLinearizable(_)),
        "{context}: excerpt alone: {alone:?}"
    );
    if v.ops.len() <= 9 {
        assert!(
            !brute_force_linearizable(&v.ops),
            "{context}: brute force linearizes {v:?}"
        );
    }
}

fn small(unknown_rejections: bool) -> Shape {
    Shape {
        keys: 1,
        clients: 3,
        ops: 8,
        indeterminate_per_mille: 150,
        unknown_rejections,
    }
}

#[test]
fn small_histories_agree_with_brute_force() {
    let (mut caught, mut corrupted, mut searched) = (0, 0, 0);
    for seed in 0..400u64 {
        let mut history = linearizable_history(seed, small(seed % 2 == 0));
        assert!(
            brute_force_linearizable(&history),
            "seed {seed}: generator broke"
        );
        let verdict = check(&history, ENOUGH).verdict;
        assert!(
            matches!(verdict, Verdict::Linearizable),
            "seed {seed}: {verdict:?}"
        );
        if !corrupt_one_read(&mut history, seed) {
            continue;
        }
        corrupted += 1;
        let expected = brute_force_linearizable(&history);
        // The search alone, without the shortcuts for certain violations, must agree too.
        assert_eq!(
            search_alone(&history),
            expected,
            "seed {seed}: search alone: {history:?}"
        );
        searched += usize::from(!expected && !certain_violation(&history));
        match check(&history, ENOUGH).verdict {
            Verdict::Linearizable => {
                assert!(expected, "seed {seed}: missed a violation: {history:?}")
            }
            Verdict::NotLinearizable(v) => {
                assert!(!expected, "seed {seed}: false violation {v:?}");
                caught += 1;
                if !v.why.contains("whole key") {
                    assert_proof(&v, &history, &format!("seed {seed}"));
                }
            }
            Verdict::Unknown { reason } => panic!("seed {seed}: {reason}"),
        }
    }
    // The corruption must usually bite, or this test proves little; and some violations
    // must be left for the search to find.
    assert!(
        caught * 2 > corrupted,
        "{caught} of {corrupted} corruptions caught"
    );
    assert!(
        searched >= 20,
        "only {searched} violations needed the search"
    );
}

/// Each key through pruning and the search only.
fn search_alone(history: &[Op]) -> bool {
    let mut keys: Vec<&str> = history.iter().map(|op| op.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter().all(|key| {
        let ops: Vec<&Op> = history.iter().filter(|op| op.key == key).collect();
        let prepared = prepare(&ops);
        let far = Instant::now() + ENOUGH;
        search(&prepared.ops, &prepared.spares, far) == Outcome::Linearizable
    })
}

fn certain_violation(history: &[Op]) -> bool {
    let mut keys: Vec<&str> = history.iter().map(|op| op.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter().any(|key| {
        let ops: Vec<&Op> = history.iter().filter(|op| op.key == key).collect();
        super::first_certain_violation(&ops).is_some()
    })
}

#[test]
fn larger_histories_are_linearizable_and_corruptions_are_proven() {
    let shape = Shape {
        keys: 4,
        clients: 8,
        ops: 3_000,
        indeterminate_per_mille: 20,
        unknown_rejections: false,
    };
    let (mut caught, mut corrupted) = (0, 0);
    for seed in 0..12u64 {
        let mut history = linearizable_history(1000 + seed, shape);
        let c = check(&history, ENOUGH);
        assert!(
            matches!(c.verdict, Verdict::Linearizable),
            "seed {seed}: {:?}",
            c.verdict
        );
        assert_eq!(c.stale_reads, 0, "seed {seed}");
        assert!(
            c.pruned > 0 && c.pruned < c.indeterminate,
            "seed {seed}: {c:?}"
        );
        corrupted += usize::from(corrupt_one_read(&mut history, seed));
        if let Verdict::NotLinearizable(v) = check(&history, ENOUGH).verdict {
            caught += 1;
            assert!(
                v.ops.len() <= 12,
                "seed {seed}: excerpt of {} ops",
                v.ops.len()
            );
            assert_proof(&v, &history, &format!("seed {seed}"));
        }
    }
    assert!(
        caught * 2 > corrupted,
        "{caught} of {corrupted} corruptions caught"
    );
}

/// `cargo test -p coordbench-workloads --release --lib time_generated -- --ignored --nocapture`
#[test]
#[ignore = "timing: prints how long 200k-500k op histories take"]
fn time_generated_histories() {
    let shape = |keys, ops, unknown_rejections| Shape {
        keys,
        clients: 16,
        ops,
        indeterminate_per_mille: 2,
        unknown_rejections,
    };
    for shape in [
        shape(8, 200_000, false),
        shape(1, 200_000, false),
        shape(4, 500_000, true),
    ] {
        let mut history = linearizable_history(42, shape);
        let c = check(&history, Duration::from_secs(120));
        println!(
            "{} ops, {} keys, {} clients, {} indeterminate ({} pruned), unknown-current \
             rejections {}: {} in {:?}",
            c.ops,
            c.keys,
            shape.clients,
            c.indeterminate,
            c.pruned,
            shape.unknown_rejections,
            verdict_name(&c.verdict),
            c.elapsed
        );
        assert!(
            matches!(c.verdict, Verdict::Linearizable),
            "{:?}",
            c.verdict
        );
        let mut stale = history.clone();
        corrupt_one_read(&mut history, 42);
        let c = check(&history, Duration::from_secs(120));
        println!(
            "  one read corrupted: {} in {:?}",
            verdict_name(&c.verdict),
            c.elapsed
        );
        make_one_read_stale(&mut stale);
        let c = check(&stale, Duration::from_secs(120));
        println!(
            "  one read made stale: {} in {:?}",
            verdict_name(&c.verdict),
            c.elapsed
        );
        // The search alone (no shortcut for the stale read) must exhaust every order of the
        // ops before it: the worst case, for violations no shortcut recognizes.
        let started = Instant::now();
        let found = !search_alone(&stale);
        println!(
            "  the same, search alone: violation found {found} in {:?}",
            started.elapsed()
        );
    }
}

/// Makes a read in the middle return the value of a write that completed long before (on
/// the generator's clock, 1,000 µs) instead.
fn make_one_read_stale(history: &mut [Op]) {
    let middle = history.len() / 2;
    let read = (middle..history.len())
        .find(|&i| matches!(history[i].ret, Some(Ret::Read { .. })))
        .expect("a read");
    let (key, invoked) = (history[read].key.clone(), history[read].invoke_us);
    let long_before = |op: &&Op| op.complete_us.is_some_and(|c| c + 1_000 < invoked);
    let old = history[..read]
        .iter()
        .rev()
        .filter(|op| op.key == key && op.ret == Some(Ret::Written))
        .find(long_before)
        .and_then(|op| op.written_value().map(String::from));
    history[read].ret = Some(Ret::Read { value: old });
}

fn verdict_name(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Linearizable => "linearizable".into(),
        Verdict::NotLinearizable(v) => {
            format!("violation, excerpt of {} ops: {}", v.ops.len(), v.why)
        }
        Verdict::Unknown { reason } => format!("unknown: {reason}"),
    }
}
