//! Bounded, seeded fuzzing of decoders (the ones facing the network or the disk), shared by
//! the engines' fuzz tests and run by `cargo test`: a fixed number of cases per target from
//! a fixed seed, so a run is reproducible and takes a few seconds at most. Inputs are
//! arbitrary bytes, and well-formed encodings from a corpus with random edits (flipped,
//! inserted and removed bytes, truncation, lengths set to extremes), which reach far deeper
//! into a decoder than noise does. A panic is reported with the shrunk input, in hex, to be
//! kept as a regression case.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestError, TestRunner};

/// One edit of an input; positions are taken modulo its length.
#[derive(Debug, Clone)]
enum Edit {
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
    /// Overwrites 4 bytes with a value decoders treat as a length or a count.
    Extreme(usize, [u8; 4]),
}

fn edit() -> impl Strategy<Value = Edit> {
    let extremes = prop_oneof![
        Just([0xff; 4]),
        Just([0x7f, 0xff, 0xff, 0xff]),
        Just([0x80, 0, 0, 0]),
        Just([0, 0, 0, 0]),
        Just([0, 0x10, 0, 1]),
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Set(p, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Insert(p, b)),
        any::<usize>().prop_map(Edit::Remove),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), extremes).prop_map(|(p, v)| Edit::Extreme(p, v)),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let at = |p: usize, len: usize| if len == 0 { 0 } else { p % len };
        let len = bytes.len();
        match *e {
            Edit::Set(p, b) if len > 0 => bytes[at(p, len)] = b,
            Edit::Insert(p, b) => bytes.insert(at(p, len + 1), b),
            Edit::Remove(p) if len > 0 => {
                bytes.remove(at(p, len));
            }
            Edit::Truncate(p) => bytes.truncate(at(p, len + 1)),
            Edit::Extreme(p, v) if len >= 4 => {
                let start = at(p, len - 3);
                bytes[start..start + 4].copy_from_slice(&v);
            }
            _ => {}
        }
    }
    bytes
}

/// Arbitrary bytes (a third of the cases) or a corpus entry with up to 8 random edits.
pub fn inputs(corpus: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let noise = proptest::collection::vec(any::<u8>(), 0..256);
    if corpus.is_empty() {
        return noise.boxed();
    }
    let mutated = (
        proptest::sample::select(corpus),
        proptest::collection::vec(edit(), 0..8),
    )
        .prop_map(|(seed, edits)| apply(seed, &edits));
    prop_oneof![1 => noise, 2 => mutated].boxed()
}

/// Runs `check` on `cases` inputs drawn from `strategy` with `seed` (`FUZZ_CASES` in the
/// environment overrides `cases`, for a deeper run by hand); panics with the shrunk input
/// if `check` panics (or fails an assertion) on one.
pub fn run<S, F>(target: &str, cases: u32, seed: u64, strategy: S, check: F)
where
    S: Strategy,
    S::Value: std::fmt::Debug,
    F: Fn(S::Value),
{
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let config = Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    match runner.run(&strategy, |input| {
        check(input);
        Ok(())
    }) {
        Ok(()) => {}
        Err(TestError::Fail(why, input)) => {
            panic!("fuzz target {target} (seed {seed}) failed: {why}\ninput: {input:02x?}")
        }
        Err(e) => panic!("fuzz target {target} (seed {seed}): {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_stay_in_bounds() {
        let edits = [
            Edit::Remove(5),
            Edit::Set(100, 1),
            Edit::Extreme(7, [0xff; 4]),
            Edit::Truncate(3),
            Edit::Insert(99, 2),
        ];
        assert_eq!(apply(vec![], &edits), vec![2]);
        let out = apply(vec![0; 6], &edits);
        assert!(out.len() <= 6);
    }

    #[test]
    #[should_panic(expected = "fuzz target demo")]
    fn a_panicking_check_fails_the_run() {
        run("demo", 200, 1, inputs(vec![vec![1, 2, 3]]), |b| {
            assert!(b.len() < 3, "long input")
        });
    }
}
