//! Hand-made histories with known answers, the budget, jsonl and stale-read counting.

use std::time::Duration;

use super::generate::{linearizable_history, Shape};
use super::history::{read_jsonl, write_jsonl, Call, Op, Ret};
use super::memo::{LinSet, Memo};
use super::{check, Checked, Verdict, Violation};

const ENOUGH: Duration = Duration::from_secs(60);

fn op(id: u64, client: usize, call: Call, span: (u64, u64), ret: Ret) -> Op {
    Op {
        id,
        client,
        key: "k".into(),
        call,
        invoke_us: span.0,
        complete_us: Some(span.1),
        ret: Some(ret),
    }
}

fn write(id: u64, client: usize, value: &str, span: (u64, u64)) -> Op {
    op(
        id,
        client,
        Call::Write {
            value: value.into(),
        },
        span,
        Ret::Written,
    )
}

fn read(id: u64, client: usize, value: Option<&str>, span: (u64, u64)) -> Op {
    let value = value.map(String::from);
    op(id, client, Call::Read, span, Ret::Read { value })
}

fn cas(
    id: u64,
    client: usize,
    expected: Option<&str>,
    new: &str,
    span: (u64, u64),
    ret: Ret,
) -> Op {
    let call = Call::Cas {
        expected: expected.map(String::from),
        new: new.into(),
    };
    op(id, client, call, span, ret)
}

fn timed_out(mut op: Op) -> Op {
    op.complete_us = None;
    op.ret = None;
    op
}

fn checked(history: &[Op]) -> Checked {
    check(history, ENOUGH)
}

fn assert_linearizable(history: &[Op]) {
    let verdict = checked(history).verdict;
    assert!(matches!(verdict, Verdict::Linearizable), "{verdict:?}");
}

fn violation(history: &[Op]) -> Violation {
    match checked(history).verdict {
        Verdict::NotLinearizable(v) => v,
        other => panic!("expected a violation, got {other:?}"),
    }
}

fn ids(violation: &Violation) -> Vec<u64> {
    violation.ops.iter().map(|op| op.id).collect()
}

#[test]
fn a_sequential_history_is_linearizable() {
    assert_linearizable(&[
        read(0, 0, None, (0, 1)),
        write(1, 0, "a", (2, 3)),
        read(2, 1, Some("a"), (4, 5)),
        cas(3, 1, Some("a"), "b", (6, 7), Ret::CasApplied),
        cas(
            4,
            0,
            Some("a"),
            "c",
            (8, 9),
            Ret::CasRejected {
                current: Some(Some("b".into())),
            },
        ),
        cas(
            5,
            0,
            Some("a"),
            "d",
            (10, 11),
            Ret::CasRejected { current: None },
        ),
        read(6, 0, Some("b"), (12, 13)),
    ]);
}

#[test]
fn overlapping_writes_may_be_read_in_either_order() {
    for (first, second) in [("a", "b"), ("b", "a")] {
        assert_linearizable(&[
            write(0, 0, "a", (0, 10)),
            write(1, 1, "b", (1, 11)),
            read(2, 2, Some(first), (2, 4)),
            read(3, 3, Some(second), (5, 12)),
        ]);
    }
}

#[test]
fn a_stale_read_is_caught_and_its_excerpt_is_the_three_ops() {
    let mut history = vec![
        write(0, 0, "a", (0, 10)),
        write(1, 1, "b", (20, 30)),
        read(2, 2, Some("a"), (40, 50)),
    ];
    // Unrelated traffic before and after, on this key and another.
    for i in 0..40 {
        let mut other = write(100 + i, 3, &format!("x{i}"), (60 + 10 * i, 65 + 10 * i));
        other.key = if i % 2 == 0 {
            "k".into()
        } else {
            "other".into()
        };
        history.push(other);
    }
    let v = violation(&history);
    assert_eq!(v.key, "k");
    assert_eq!(ids(&v), vec![0, 1, 2], "{v:?}");
    assert!(
        v.why.contains("op #2") && v.why.contains("op #1"),
        "{}",
        v.why
    );
    let c = checked(&history);
    assert_eq!(c.stale_reads, 1);
    let json = serde_json::to_value(&c.verdict).expect("a verdict serializes");
    assert_eq!(json["verdict"], "not_linearizable");
    assert_eq!(json["ops"].as_array().map(Vec::len), Some(3), "{json}");
}

#[test]
fn an_excerpt_holds_the_producers_its_ops_depend_on() {
    // The stale read of "b" depends on the CAS that wrote it, which depends on "a"'s write.
    let mut history = vec![
        write(0, 0, "a", (0, 10)),
        cas(1, 1, Some("a"), "b", (20, 30), Ret::CasApplied),
    ];
    for i in 0..30 {
        history.push(read(10 + i, 2, Some("b"), (40 + 10 * i, 45 + 10 * i)));
    }
    history.push(write(100, 3, "c", (400, 410)));
    history.push(read(101, 2, Some("b"), (420, 430)));
    let v = violation(&history);
    assert_eq!(ids(&v), vec![0, 1, 100, 101], "{v:?}");
    assert!(
        v.why.contains("op #101") && v.why.contains("op #100"),
        "{}",
        v.why
    );
}

#[test]
fn a_read_of_a_value_never_written_is_caught() {
    let v = violation(&[write(0, 0, "a", (0, 10)), read(1, 1, Some("zz"), (20, 30))]);
    assert_eq!(ids(&v), vec![1]);
    assert!(v.why.contains("no op on that key wrote"), "{}", v.why);
}

#[test]
fn a_read_of_a_value_before_its_write_began_is_caught() {
    let v = violation(&[read(0, 1, Some("a"), (0, 10)), write(1, 0, "a", (20, 30))]);
    assert_eq!(ids(&v), vec![0, 1]);
    assert!(
        v.why.contains("before op #1, which wrote it, was invoked"),
        "{}",
        v.why
    );
}

#[test]
fn two_cas_applied_from_the_same_value_are_caught() {
    let v = violation(&[
        write(0, 0, "a", (0, 10)),
        cas(1, 1, Some("a"), "b", (20, 40), Ret::CasApplied),
        cas(2, 2, Some("a"), "c", (21, 41), Ret::CasApplied),
    ]);
    assert_eq!(ids(&v), vec![0, 1, 2]);
    assert!(v.why.contains("both applied"), "{}", v.why);
}

#[test]
fn a_read_going_backwards_is_caught() {
    // "a" is certainly older than "b"; once "b" was read, "a" cannot be read again, though
    // no write of another value completed before the second read began (not stale).
    let history = [
        write(0, 0, "a", (0, 10)),
        write(1, 1, "b", (20, 100)),
        read(2, 2, Some("b"), (30, 40)),
        read(3, 3, Some("a"), (50, 60)),
    ];
    let v = violation(&history);
    assert_eq!(ids(&v), vec![0, 1, 2, 3]);
    assert!(v.why.contains("after op #2 had already read"), "{}", v.why);
    assert_eq!(checked(&history).stale_reads, 0);
}

#[test]
fn cas_rejections_must_fit_the_current_value() {
    // Reported current "a" while "b" was certainly current.
    violation(&[
        write(0, 0, "a", (0, 10)),
        write(1, 0, "b", (20, 30)),
        cas(
            2,
            1,
            None,
            "c",
            (40, 50),
            Ret::CasRejected {
                current: Some(Some("a".into())),
            },
        ),
    ]);
    // Rejected although the reported current is the expected value.
    violation(&[
        write(0, 0, "a", (0, 10)),
        cas(
            1,
            1,
            Some("a"),
            "c",
            (20, 30),
            Ret::CasRejected {
                current: Some(Some("a".into())),
            },
        ),
    ]);
    // Rejected with unknown current while the expected value was certainly current.
    violation(&[
        write(0, 0, "a", (0, 10)),
        cas(
            1,
            1,
            Some("a"),
            "c",
            (20, 30),
            Ret::CasRejected { current: None },
        ),
    ]);
}

#[test]
fn a_timed_out_write_read_later_makes_the_history_linearizable() {
    let read_late = |first: Op| {
        vec![
            first,
            write(1, 1, "b", (20, 30)),
            read(2, 2, Some("a"), (40, 50)),
        ]
    };
    // Acknowledged before "b" was written, "a" cannot be read after it ...
    violation(&read_late(write(0, 0, "a", (0, 10))));
    // ... but timed out, it may have landed after "b".
    let c = checked(&read_late(timed_out(write(0, 0, "a", (0, 10)))));
    assert!(
        matches!(c.verdict, Verdict::Linearizable),
        "{:?}",
        c.verdict
    );
    assert_eq!((c.indeterminate, c.pruned, c.stale_reads), (1, 0, 0));
}

#[test]
fn a_timed_out_cas_may_have_applied_or_not() {
    let base = || {
        vec![
            write(0, 0, "a", (0, 10)),
            timed_out(cas(1, 1, Some("a"), "b", (20, 30), Ret::CasApplied)),
        ]
    };
    for later in [Some("a"), Some("b")] {
        let mut history = base();
        history.push(read(2, 2, later, (40, 50)));
        assert_linearizable(&history);
    }
    // Applied only once: "b" then "a" again is impossible.
    let mut history = base();
    history.extend([
        read(2, 2, Some("b"), (40, 50)),
        read(3, 2, Some("a"), (60, 70)),
    ]);
    violation(&history);
}

#[test]
fn unobserved_indeterminate_ops_are_pruned() {
    let c = checked(&[
        write(0, 0, "a", (0, 10)),
        timed_out(write(1, 1, "lost", (5, 6))),
        timed_out(read(2, 2, None, (7, 8))),
        read(3, 0, Some("a"), (20, 30)),
    ]);
    assert!(
        matches!(c.verdict, Verdict::Linearizable),
        "{:?}",
        c.verdict
    );
    assert_eq!((c.indeterminate, c.pruned), (2, 2));
}

#[test]
fn an_unobserved_write_is_kept_when_a_rejection_of_unknown_current_needs_it() {
    // The key is absent; the CAS from absent was rejected, which only a landed "a" explains.
    let needed = timed_out(write(0, 0, "a", (0, 5)));
    let rejected = cas(
        1,
        1,
        None,
        "b",
        (10, 20),
        Ret::CasRejected { current: None },
    );
    let c = checked(&[needed.clone(), rejected.clone()]);
    assert!(
        matches!(c.verdict, Verdict::Linearizable),
        "{:?}",
        c.verdict
    );
    assert_eq!(c.pruned, 0);
    // Invoked after the rejection completed, it cannot explain it and is pruned; no excerpt
    // may leave the rejection out, so the whole key is the proof.
    let mut late = needed;
    late.invoke_us = 30;
    let history = [rejected, late];
    let v = violation(&history);
    assert_eq!(checked(&history).pruned, 1);
    assert_eq!(ids(&v), vec![1, 0]);
    assert!(v.why.contains("whole key"), "{}", v.why);
}

#[test]
fn spares_explain_rejections_of_unknown_current_exactly() {
    let rejected = |id, expected: &str, span| {
        let new = format!("never{id}");
        cas(
            id,
            1,
            Some(expected),
            &new,
            span,
            Ret::CasRejected { current: None },
        )
    };
    // A timed-out CAS from "a" is the only thing that can have replaced "a".
    let history = [
        write(0, 0, "a", (0, 10)),
        timed_out(cas(1, 2, Some("a"), "b", (20, 30), Ret::CasApplied)),
        rejected(2, "a", (40, 50)),
    ];
    assert_linearizable(&history);
    // "x" may replace "a" for the first rejection, but then the second, expecting "x",
    // has nothing left to replace "x" ...
    let mut history = vec![
        write(0, 0, "a", (0, 10)),
        timed_out(write(1, 2, "x", (5, 6))),
        rejected(2, "a", (20, 30)),
        rejected(3, "x", (40, 50)),
    ];
    assert!(!super::tests_random::brute_force_linearizable(&history));
    violation(&history);
    // ... until another timed-out write can.
    history.push(timed_out(write(4, 3, "y", (5, 7))));
    assert!(super::tests_random::brute_force_linearizable(&history));
    assert_linearizable(&history);
}

#[test]
fn the_budget_bounds_the_search() {
    let shape = Shape {
        keys: 1,
        clients: 16,
        ops: 20_000,
        indeterminate_per_mille: 5,
        unknown_rejections: false,
    };
    let history = linearizable_history(7, shape);
    for budget in [Duration::ZERO, Duration::from_micros(50)] {
        let c = check(&history, budget);
        match c.verdict {
            Verdict::Unknown { reason } => assert!(
                reason.contains("\"k0\"") && reason.contains("budget"),
                "{reason}"
            ),
            other => panic!("{budget:?}: {other:?}"),
        }
    }
    assert!(matches!(
        check(&history, ENOUGH).verdict,
        Verdict::Linearizable
    ));
}

#[test]
fn malformed_histories_are_unknown_not_judged() {
    let c = checked(&[write(0, 0, "a", (0, 10)), write(1, 1, "a", (20, 30))]);
    match c.verdict {
        Verdict::Unknown { reason } => assert!(reason.contains("written twice"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn jsonl_round_trips_every_kind_of_op() {
    let history = vec![
        read(0, 0, None, (0, 1)),
        write(1, 0, "a", (2, 3)),
        cas(2, 1, None, "b", (4, 5), Ret::CasRejected { current: None }),
        cas(
            3,
            1,
            None,
            "c",
            (6, 7),
            Ret::CasRejected {
                current: Some(None),
            },
        ),
        cas(
            4,
            1,
            Some("a"),
            "d",
            (8, 9),
            Ret::CasRejected {
                current: Some(Some("a2".into())),
            },
        ),
        cas(5, 2, Some("a"), "e", (10, 11), Ret::CasApplied),
        op(6, 2, Call::Read, (12, 13), Ret::Failed),
        timed_out(write(7, 3, "f", (14, 15))),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.jsonl");
    write_jsonl(&path, &history).expect("write");
    assert_eq!(read_jsonl(&path).expect("read"), history);
    let text = std::fs::read_to_string(&path).expect("text");
    assert_eq!(text.lines().count(), history.len());
    assert!(
        text.lines().nth(3).unwrap().contains(r#""current":null"#),
        "{text}"
    );
}

#[test]
fn jsonl_errors_name_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.jsonl");
    let good = serde_json::to_string(&write(0, 0, "a", (0, 10))).unwrap();
    std::fs::write(&path, format!("{good}\n\n{{\"id\": 1}}\n")).unwrap();
    let error = read_jsonl(&path).unwrap_err().to_string();
    assert!(error.contains("history.jsonl:3:"), "{error}");
    let backwards = serde_json::to_string(&write(1, 0, "b", (20, 10))).unwrap();
    std::fs::write(&path, format!("{good}\n{backwards}\n")).unwrap();
    let error = read_jsonl(&path).unwrap_err().to_string();
    assert!(
        error.contains("history.jsonl:2:") && error.contains("before invoke_us"),
        "{error}"
    );
    let missing = read_jsonl(&dir.path().join("none.jsonl"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("none.jsonl"), "{missing}");
}

#[test]
fn stale_reads_are_counted_only_when_certainly_overwritten() {
    let history = [
        write(0, 0, "a", (0, 10)),
        read(1, 1, None, (5, 8)),   // concurrent with the first write: fine
        read(2, 1, None, (11, 12)), // after "a" completed: stale
        write(3, 0, "b", (20, 30)),
        read(4, 1, Some("a"), (25, 35)), // concurrent with "b": fine
        read(5, 1, Some("a"), (31, 40)), // "b" invoked after "a" completed, done before: stale
        write(6, 2, "c", (5, 50)), // invoked before "a" completed: overwrites nothing certainly
        timed_out(write(7, 3, "t", (0, 1))),
        read(8, 1, Some("t"), (60, 70)), // produced by an indeterminate op: not counted
    ];
    assert_eq!(checked(&history).stale_reads, 2);
}

#[test]
fn linearized_sets_stay_compact_and_compare_by_content() {
    let mut set = LinSet::new(10);
    let mut memo = Memo::default();
    for op in [1, 0, 3, 2] {
        set.insert(op);
    }
    assert_eq!(set.beyond_len(), 0, "ops 0..4 are a plain prefix");
    set.insert(6);
    assert_eq!(set.beyond_len(), 1);
    assert!(memo.insert(&set, 5, 0).unwrap());
    assert!(!memo.insert(&set, 5, 0).unwrap());
    assert!(memo.insert(&set, 6, 0).unwrap(), "another register value");
    // The same set built in another order is the same entry.
    let mut other = LinSet::new(10);
    for op in [6, 3, 2, 1, 0] {
        other.insert(op);
    }
    assert!(!memo.insert(&other, 5, 0).unwrap());
    // Undoing restores the earlier set exactly.
    other.remove_last(0);
    assert_eq!(other.beyond_len(), 4);
    assert!(memo.insert(&other, 5, 0).unwrap());
    other.insert(0);
    assert!(!memo.insert(&other, 5, 0).unwrap());
    assert_eq!(memo.len(), 3);
}
