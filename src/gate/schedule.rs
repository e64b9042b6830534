//! The order a gate runs its sides in: repeat by repeat, every point of the baseline next to
//! the same point of the candidate, so drift on a shared machine (other jobs, thermal
//! throttling, a filling page cache) lands on both sides alike. Within each pair the side
//! that goes first alternates (A B, B A, A B, ...), so neither side always runs on the
//! machine the other just warmed.

use serde::Serialize;

/// One side of a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Baseline,
    Candidate,
}

impl Side {
    /// The side's directory under the gate directory.
    pub fn dir_name(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Candidate => "candidate",
        }
    }
}

/// Run order for sides of `configs` configurations × `repeats` repeats each, laid out as a
/// sweep plans them (configuration-major: point index = configuration × repeats + repeat).
/// Returns (side, point index) pairs.
pub fn interleaved(configs: usize, repeats: usize) -> Vec<(Side, usize)> {
    let mut order = Vec::with_capacity(2 * configs * repeats);
    let mut pair = 0;
    for repeat in 0..repeats {
        for config in 0..configs {
            let index = config * repeats + repeat;
            let (first, second) = if pair % 2 == 0 {
                (Side::Baseline, Side::Candidate)
            } else {
                (Side::Candidate, Side::Baseline)
            };
            order.push((first, index));
            order.push((second, index));
            pair += 1;
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use Side::{Baseline as A, Candidate as B};

    #[test]
    fn sides_alternate_pair_by_pair_and_repeats_are_the_outer_loop() {
        // Two configurations (points 0-2 and 3-5 in plan order), three repeats.
        let order = interleaved(2, 3);
        assert_eq!(
            order,
            vec![
                (A, 0),
                (B, 0),
                (B, 3),
                (A, 3),
                (A, 1),
                (B, 1),
                (B, 4),
                (A, 4),
                (A, 2),
                (B, 2),
                (B, 5),
                (A, 5)
            ]
        );
    }

    #[test]
    fn every_point_of_both_sides_runs_once_and_each_side_goes_first_equally_often() {
        let order = interleaved(3, 4);
        assert_eq!(order.len(), 24);
        for side in [A, B] {
            let mut seen: Vec<usize> = order
                .iter()
                .filter(|(s, _)| *s == side)
                .map(|(_, i)| *i)
                .collect();
            seen.sort();
            assert_eq!(seen, (0..12).collect::<Vec<_>>());
        }
        let firsts = order.chunks(2).filter(|pair| pair[0].0 == A).count();
        assert_eq!(firsts, 6);
        // A pair is always the same point on both sides, back to back.
        assert!(order
            .chunks(2)
            .all(|pair| pair[0].1 == pair[1].1 && pair[0].0 != pair[1].0));
    }
}
