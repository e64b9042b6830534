//! Majority arithmetic over the fixed ensemble.

use crate::zxid::Zxid;

pub(crate) fn majority(voters: usize) -> usize {
    voters / 2 + 1
}

/// The largest zxid held durably by a majority of `voters`, given what each
/// node that answered holds (the others count as holding nothing).
pub(crate) fn quorum_zxid(mut held: Vec<Zxid>, voters: usize) -> Zxid {
    held.resize(held.len().max(voters), Zxid::ZERO);
    held.sort_unstable_by(|a, b| b.cmp(a));
    held[majority(voters) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_zxid_is_the_majority_th_largest() {
        let z = |v: &[u64]| v.iter().map(|&x| Zxid(x)).collect::<Vec<_>>();
        assert_eq!(quorum_zxid(z(&[5]), 1), Zxid(5));
        assert_eq!(quorum_zxid(z(&[5, 3, 9]), 3), Zxid(5));
        assert_eq!(quorum_zxid(z(&[5, 3]), 3), Zxid(3));
        assert_eq!(quorum_zxid(z(&[5]), 3), Zxid(0));
        assert_eq!(quorum_zxid(z(&[1, 2, 3, 4, 5]), 5), Zxid(3));
    }
}
