//! What a run writes about its faults: one [`FaultRecord`] per fault (a failover.csv row)
//! and their distribution, over all faults and per kind ([`FaultSummary`], run.json and
//! summary.csv). docs/reference.md ("failover.csv columns") defines every figure.

use std::collections::BTreeMap;

use serde::Serialize;

use coordbench_results::kinds::FaultArg;

/// One fault and what followed it; durations from t_f (when it was applied), in µs.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    pub fault: FaultArg,
    /// Seconds since the injector started (when the measured window began), to the ms.
    pub at_s: f64,
    /// The members hit: killed, paused, or the minority side of a partition (`m1+m3`).
    pub victims: String,
    /// A partition's groups, minority first (`m1|m2+m3`); empty for other kinds.
    pub partition: String,
    /// The leader before the fault, and its term (epoch).
    pub old_leader: String,
    pub old_term: u64,
    pub new_leader: Option<String>,
    pub new_term: Option<u64>,
    /// The first poll at which the fault showed in the members' answers.
    pub effect_us: Option<u64>,
    /// The first poll at which a member that followed before the fault, and could still
    /// answer, no longer followed the old leader (electing, leading, or at a higher term).
    pub detect_us: Option<u64>,
    /// The first poll at which a leader at a higher term had a majority at its term.
    pub new_leader_us: Option<u64>,
    /// When the fault was undone: victims restarted or continued, or the partition healed.
    pub healed_us: Option<u64>,
    /// The first acknowledgement of a probe put issued after t_f.
    pub first_write_us: Option<u64>,
    /// The longest gap between acknowledged probe puts around t_f.
    pub unavailable_us: Option<u64>,
    /// After the undo: every member answered again, none electing, one leader.
    pub rejoined_us: Option<u64>,
    /// The workload's own clients (existing sessions, unlike the probes): the longest
    /// stretch around t_f in which none of them completed an operation, to 10 ms.
    pub workload_gap_us: Option<u64>,
    /// When that stretch ended: the workload's first success after it, from t_f.
    pub workload_resumed_us: Option<u64>,
    /// Partitions: puts through a client of one minority member alone, issued and
    /// acknowledged while the partition lasted (a minority must acknowledge none).
    pub minority_acked_writes: Option<u64>,
    /// Partitions: local (serializable) reads that client was served meanwhile.
    pub minority_local_reads: Option<u64>,
    /// The run ended before the cluster recovered: the missing figures are not failures.
    pub cut_short: bool,
    /// Probe sessions found lost (expired, or silent for two TTLs) from t_f until the
    /// figures were read; each probe opens a new one.
    pub probe_sessions_lost: u64,
}

/// The distribution over a run's faults (or one kind's), for run.json and summary.csv.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FaultSummary {
    /// Faults injected, including one the run's end cut short.
    pub faults: usize,
    /// Faults not cut short after which the cluster did not recover within the bound.
    pub unrecovered: usize,
    /// Faults after which a new leader was found.
    pub new_leaders: usize,
    pub detect_p50_us: Option<u64>,
    pub new_leader_p50_us: Option<u64>,
    pub new_leader_p99_us: Option<u64>,
    pub new_leader_max_us: Option<u64>,
    pub first_write_p50_us: Option<u64>,
    pub first_write_max_us: Option<u64>,
    pub unavailable_max_us: Option<u64>,
    pub rejoined_p50_us: Option<u64>,
    pub rejoined_max_us: Option<u64>,
    /// Partitions: the sums of `minority_acked_writes` and `minority_local_reads`.
    pub minority_acked_writes: Option<u64>,
    pub minority_local_reads: Option<u64>,
    /// The read-back of every acknowledged probe write (only at the top level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_writes: Option<super::LostWrites>,
    /// What happened to the probe writes' sessions (only at the top level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_sessions: Option<super::ProbeSessions>,
    /// The same figures for each kind that ran (only at the top level).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_kind: BTreeMap<String, FaultSummary>,
}

impl FaultSummary {
    /// Over all `records`, with a summary per kind beside.
    pub fn of(records: &[FaultRecord]) -> Self {
        let mut summary = Self::over(records.iter());
        let mut kinds: Vec<FaultArg> = records.iter().map(|r| r.fault).collect();
        kinds.sort_unstable();
        kinds.dedup();
        for kind in kinds {
            let of_kind = records.iter().filter(|r| r.fault == kind);
            summary.by_kind.insert(kind.name(), Self::over(of_kind));
        }
        summary
    }

    fn over<'a>(records: impl Iterator<Item = &'a FaultRecord> + Clone) -> Self {
        let pick = |f: fn(&FaultRecord) -> Option<u64>| {
            let mut v: Vec<u64> = records.clone().filter_map(f).collect();
            v.sort_unstable();
            v
        };
        let sum = |f: fn(&FaultRecord) -> Option<u64>| {
            let v = pick(f);
            (!v.is_empty()).then(|| v.iter().sum())
        };
        let detect = pick(|r| r.detect_us);
        let leader = pick(|r| r.new_leader_us);
        let first = pick(|r| r.first_write_us);
        let gap = pick(|r| r.unavailable_us);
        let rejoined = pick(|r| r.rejoined_us);
        FaultSummary {
            faults: records.clone().count(),
            unrecovered: records
                .clone()
                .filter(|r| r.rejoined_us.is_none() && !r.cut_short)
                .count(),
            new_leaders: leader.len(),
            detect_p50_us: nearest_rank(&detect, 0.5),
            new_leader_p50_us: nearest_rank(&leader, 0.5),
            new_leader_p99_us: nearest_rank(&leader, 0.99),
            new_leader_max_us: leader.last().copied(),
            first_write_p50_us: nearest_rank(&first, 0.5),
            first_write_max_us: first.last().copied(),
            unavailable_max_us: gap.last().copied(),
            rejoined_p50_us: nearest_rank(&rejoined, 0.5),
            rejoined_max_us: rejoined.last().copied(),
            minority_acked_writes: sum(|r| r.minority_acked_writes),
            minority_local_reads: sum(|r| r.minority_local_reads),
            lost_writes: None,
            probe_sessions: None,
            by_kind: BTreeMap::new(),
        }
    }
}

/// The nearest-rank percentile of sorted values (few samples: no interpolation).
fn nearest_rank(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_of_few_samples() {
        assert_eq!(nearest_rank(&[], 0.5), None);
        assert_eq!(nearest_rank(&[7], 0.99), Some(7));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.5), Some(2));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.99), Some(4));
    }

    fn record(
        fault: FaultArg,
        new_leader_us: Option<u64>,
        rejoined_us: Option<u64>,
    ) -> FaultRecord {
        FaultRecord {
            fault,
            at_s: 0.0,
            victims: "m1".into(),
            partition: String::new(),
            old_leader: "m1".into(),
            old_term: 2,
            new_leader: None,
            new_term: None,
            effect_us: Some(1),
            detect_us: None,
            new_leader_us,
            healed_us: Some(1_000_000),
            first_write_us: None,
            unavailable_us: None,
            rejoined_us,
            workload_gap_us: None,
            workload_resumed_us: None,
            minority_acked_writes: fault.is_partition().then_some(0),
            minority_local_reads: fault.is_partition().then_some(40),
            cut_short: false,
            probe_sessions_lost: 0,
        }
    }

    #[test]
    fn summaries_cover_all_faults_and_each_kind() {
        let records = [
            record(FaultArg::KillLeader, Some(900), Some(2000)),
            record(FaultArg::KillLeader, Some(1100), Some(2500)),
            record(FaultArg::PartitionLeader, None, Some(1500)),
            record(FaultArg::PartitionLeader, Some(1200), None),
        ];
        let s = FaultSummary::of(&records);
        assert_eq!((s.faults, s.unrecovered, s.new_leaders), (4, 1, 3));
        assert_eq!(s.new_leader_max_us, Some(1200));
        assert_eq!(
            (s.minority_acked_writes, s.minority_local_reads),
            (Some(0), Some(80))
        );
        let kill = &s.by_kind["kill-leader"];
        assert_eq!(
            (kill.faults, kill.new_leader_p50_us, kill.rejoined_max_us),
            (2, Some(900), Some(2500))
        );
        assert_eq!(kill.minority_acked_writes, None);
        assert!(kill.by_kind.is_empty());
        assert_eq!(s.by_kind["partition-leader"].unrecovered, 1);
        assert_eq!(s.by_kind.len(), 2);
    }
}
