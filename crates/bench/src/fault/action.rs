//! What a fault does to the cluster and how it is undone: the members each kind hits
//! (drawn from the run's seed where the kind is random), the partition it cuts, and the
//! `Cluster` calls that apply and heal it.

use coordbench_splitmix::SplitMix64;

use super::kinds::shuffle;
use coordbench_lab::provision::{Cluster, ProvisionError};
use coordbench_results::kinds::FaultArg;

/// One fault, ready to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL these members; undone by restarting them on their data.
    Kill(Vec<usize>),
    /// SIGSTOP these members; undone by SIGCONT.
    Pause(Vec<usize>),
    /// Cut every link between the two groups: `[minority, majority]`; undone by healing.
    Partition([Vec<usize>; 2]),
}

impl Action {
    /// The action of `kind` on a cluster of `size` members that `leader` leads.
    pub fn choose(kind: FaultArg, leader: usize, size: usize, rng: &mut SplitMix64) -> Action {
        let random_member = |rng: &mut SplitMix64| rng.range(0, size as u32) as usize;
        match kind {
            FaultArg::KillLeader => Action::Kill(vec![leader]),
            FaultArg::KillRandom => Action::Kill(vec![random_member(rng)]),
            FaultArg::PauseLeader => Action::Pause(vec![leader]),
            FaultArg::PauseRandom => Action::Pause(vec![random_member(rng)]),
            FaultArg::PartitionLeader => Action::Partition(isolate(leader, size)),
            FaultArg::PartitionRandom => Action::Partition(random_split(size, rng)),
            FaultArg::RestartAll => Action::Kill((0..size).collect()),
        }
    }

    /// The members the fault hits: killed or paused, or the minority side of a partition.
    pub fn victims(&self) -> &[usize] {
        match self {
            Action::Kill(v) | Action::Pause(v) => v,
            Action::Partition([minority, _]) => minority,
        }
    }

    /// Members that cannot answer while the fault lasts (partitioned members still answer
    /// their clients).
    pub fn silenced(&self) -> &[usize] {
        match self {
            Action::Kill(v) | Action::Pause(v) => v,
            Action::Partition(_) => &[],
        }
    }

    pub fn groups(&self) -> Option<&[Vec<usize>; 2]> {
        match self {
            Action::Partition(groups) => Some(groups),
            _ => None,
        }
    }

    pub fn apply(&self, cluster: &mut Cluster) -> Result<(), ProvisionError> {
        match self {
            Action::Kill(v) => cluster.kill_members(v),
            Action::Pause(v) => v.iter().try_for_each(|&i| cluster.pause_member(i)),
            Action::Partition(groups) => cluster.partition(groups),
        }
    }

    /// Undoes [`apply`](Self::apply). Call from a long-lived thread: a restarted member dies
    /// with the thread that starts it (see `provision::process`).
    pub fn undo(&self, cluster: &mut Cluster) -> Result<(), ProvisionError> {
        match self {
            Action::Kill(v) => v.iter().try_for_each(|&i| cluster.restart_member(i)),
            Action::Pause(v) => v.iter().try_for_each(|&i| cluster.resume_member(i)),
            Action::Partition(_) => {
                cluster.heal();
                Ok(())
            }
        }
    }

    /// How the undo reads in an error: `restarting m1`, `healing the partition m1|m2+m3`.
    pub fn undo_phrase(&self, names: &[String]) -> String {
        match self {
            Action::Kill(v) => format!("restarting {}", joined(v, names)),
            Action::Pause(v) => format!("resuming {}", joined(v, names)),
            Action::Partition(_) => format!("healing the partition {}", self.partition_text(names)),
        }
    }

    /// The partition's groups as failover.csv writes them (`m1|m2+m3`); empty otherwise.
    pub fn partition_text(&self, names: &[String]) -> String {
        match self {
            Action::Partition([a, b]) => format!("{}|{}", joined(a, names), joined(b, names)),
            _ => String::new(),
        }
    }
}

/// Members by name, joined with `+`.
pub fn joined(members: &[usize], names: &[String]) -> String {
    let names: Vec<&str> = members.iter().map(|&i| names[i].as_str()).collect();
    names.join("+")
}

/// `member` alone against the rest.
pub fn isolate(member: usize, size: usize) -> [Vec<usize>; 2] {
    [vec![member], (0..size).filter(|&i| i != member).collect()]
}

/// A random minority and majority of `size` members (at least 3): the minority's size is
/// uniform over 1..=(size-1)/2 and its members a uniform draw of that many.
pub fn random_split(size: usize, rng: &mut SplitMix64) -> [Vec<usize>; 2] {
    let largest_minority = ((size.saturating_sub(1)) / 2).max(1);
    let k = rng.range(1, largest_minority as u32 + 1) as usize;
    let mut members: Vec<usize> = (0..size).collect();
    shuffle(&mut members, rng);
    let mut minority = members[..k].to_vec();
    let mut majority = members[k..].to_vec();
    minority.sort_unstable();
    majority.sort_unstable();
    [minority, majority]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_random_split_is_a_minority_against_a_majority_of_every_member() {
        for size in [3usize, 4, 5, 7, 9] {
            let mut rng = SplitMix64::new(size as u64);
            let mut in_minority = vec![0usize; size];
            let mut sizes = BTreeMap::new();
            for _ in 0..2000 {
                let [minority, majority] = random_split(size, &mut rng);
                assert!(!minority.is_empty() && minority.len() < majority.len());
                assert!(
                    majority.len() > size / 2,
                    "{majority:?} is no majority of {size}"
                );
                let mut all: Vec<usize> = minority.iter().chain(&majority).copied().collect();
                all.sort_unstable();
                assert_eq!(all, (0..size).collect::<Vec<_>>(), "every member once");
                minority.iter().for_each(|&m| in_minority[m] += 1);
                *sizes.entry(minority.len()).or_insert(0) += 1;
            }
            assert!(
                in_minority.iter().all(|&c| c > 0),
                "{size}: {in_minority:?}"
            );
            assert_eq!(
                sizes.len(),
                (size - 1) / 2,
                "{size}: minority sizes {sizes:?}"
            );
        }
        let draws = |seed| {
            let mut rng = SplitMix64::new(seed);
            (0..20)
                .map(|_| random_split(5, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(3), draws(3), "seeded");
    }

    #[test]
    fn each_kind_hits_what_it_names() {
        let mut rng = SplitMix64::new(1);
        let names: Vec<String> = (1..=3).map(|i| format!("m{i}")).collect();
        let isolated = Action::choose(FaultArg::PartitionLeader, 1, 3, &mut rng);
        assert_eq!(isolated, Action::Partition([vec![1], vec![0, 2]]));
        assert_eq!(isolated.victims(), [1]);
        assert!(isolated.silenced().is_empty());
        assert_eq!(isolated.partition_text(&names), "m2|m1+m3");
        let all = Action::choose(FaultArg::RestartAll, 0, 3, &mut rng);
        assert_eq!(all.silenced(), [0, 1, 2]);
        assert_eq!(all.undo_phrase(&names), "restarting m1+m2+m3");
        assert_eq!(
            Action::choose(FaultArg::PauseLeader, 2, 3, &mut rng),
            Action::Pause(vec![2])
        );
        let random: Vec<usize> = (0..300)
            .map(|_| Action::choose(FaultArg::KillRandom, 0, 3, &mut rng).victims()[0])
            .collect();
        assert!(
            (0..3).all(|m| random.contains(&m)),
            "uniform over every member"
        );
    }
}
