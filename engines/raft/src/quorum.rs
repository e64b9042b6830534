//! Majority arithmetic over a fixed voter set: commit index from match
//! indexes and the outcome of a (pre)vote.

use std::collections::BTreeMap;

use crate::message::NodeId;

pub(crate) fn majority(voters: usize) -> usize {
    voters / 2 + 1
}

/// The largest index replicated on a majority, given each voter's match index.
pub(crate) fn committed_index(mut matched: Vec<u64>) -> u64 {
    if matched.is_empty() {
        return 0;
    }
    matched.sort_unstable_by(|a, b| b.cmp(a));
    matched[majority(matched.len()) - 1]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VoteResult {
    Won,
    Lost,
    Pending,
}

/// Tally of the votes received from `voters` (votes from others are ignored).
pub(crate) fn tally(voters: &[NodeId], votes: &BTreeMap<NodeId, bool>) -> VoteResult {
    let q = majority(voters.len());
    let (mut yes, mut no) = (0, 0);
    for v in voters {
        match votes.get(v) {
            Some(true) => yes += 1,
            Some(false) => no += 1,
            None => {}
        }
    }
    if yes >= q {
        VoteResult::Won
    } else if voters.len() - no < q {
        VoteResult::Lost
    } else {
        VoteResult::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_index_is_majority_match() {
        assert_eq!(committed_index(vec![5]), 5);
        assert_eq!(committed_index(vec![5, 3, 9]), 5);
        assert_eq!(committed_index(vec![5, 3, 9, 1]), 3);
        assert_eq!(committed_index(vec![1, 2, 3, 4, 5]), 3);
    }

    #[test]
    fn tally_outcomes() {
        let voters = [1, 2, 3, 4, 5];
        let mut votes = BTreeMap::new();
        votes.insert(1, true);
        votes.insert(2, false);
        assert_eq!(tally(&voters, &votes), VoteResult::Pending);
        votes.insert(3, true);
        votes.insert(4, true);
        assert_eq!(tally(&voters, &votes), VoteResult::Won);
        let mut votes = BTreeMap::new();
        votes.insert(2, false);
        votes.insert(3, false);
        votes.insert(9, true);
        assert_eq!(tally(&voters, &votes), VoteResult::Pending);
        votes.insert(4, false);
        assert_eq!(tally(&voters, &votes), VoteResult::Lost);
    }
}
