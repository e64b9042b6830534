//! `--fault`, `--fault-every` and `--fault-duration`: the faults a run injects into the
//! cluster it started, their checks, and the plan the injector follows.

use std::time::Duration;

use clap::Args;
use coordbench_results::kinds::{FaultArg, TargetKind};
use coordbench_results::parse::parse_positive_duration;

use crate::fault::FaultPlan;

/// Shortest and longest `--fault-duration`.
const FAULT_DURATION: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(60));

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Faults")]
pub struct FaultOptions {
    /// Faults to inject into the started cluster while the workload runs, one after another,
    /// measuring the failover around each (failover.csv): a comma-separated list of kinds,
    /// used in rounds, each round the whole list in an order shuffled from --seed.
    #[arg(
        help_heading = "Faults",
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "KIND,..."
    )]
    pub fault: Vec<FaultArg>,

    /// Period between fault starts (with --fault): a fault starts this long after the
    /// previous one started, and not before the cluster is healthy again.
    #[arg(long, default_value = "3s", value_parser = parse_positive_duration)]
    pub fault_every: Duration,

    /// How long each fault lasts (with --fault; default 1s, 10ms to 60s): killed members
    /// stay down, paused ones stopped and partitions cut this long.
    #[arg(long, value_parser = parse_positive_duration)]
    pub fault_duration: Option<Duration>,
}

impl FaultOptions {
    /// `--fault-duration`, or its default.
    pub fn duration(&self) -> Duration {
        self.fault_duration.unwrap_or(Duration::from_secs(1))
    }

    /// Whether a kind cuts links (the members then run behind the proxy).
    pub fn has_partition(&self) -> bool {
        self.fault.iter().any(|k| k.is_partition())
    }

    /// The plan the injector follows, `None` without `--fault`.
    pub fn plan(&self, seed: u64) -> Option<FaultPlan> {
        (!self.fault.is_empty()).then(|| FaultPlan {
            kinds: self.fault.clone(),
            every: self.fault_every,
            duration: self.duration(),
            seed,
        })
    }

    /// `--fault` needs members coordbench starts (it kills, pauses and partitions them),
    /// each kind once, and enough members for the kind; `--fault-duration` goes with it,
    /// in bounds.
    pub fn check(
        &self,
        target: TargetKind,
        attached: bool,
        cluster_size: usize,
    ) -> Result<(), String> {
        if self.fault.is_empty() {
            return match self.fault_duration {
                Some(_) => Err(
                    "--fault-duration needs --fault KIND,... (it is how long each fault lasts)"
                        .into(),
                ),
                None => Ok(()),
            };
        }
        if attached {
            return Err("--fault applies only to clusters coordbench starts (it kills, pauses and partitions members); omit it with --endpoints".into());
        }
        let target = crate::targets::descriptor(target);
        let mut seen = std::collections::BTreeSet::new();
        for &kind in &self.fault {
            if !seen.insert(kind) {
                return Err(format!(
                    "--fault lists {} twice; name each kind once",
                    kind.name()
                ));
            }
            if cluster_size < target.min_members(kind) {
                return Err(format!(
                    "--fault {} needs --cluster-size {} or more (with fewer, the members left have no majority); restart-all works on any size",
                    kind.name(),
                    kind.min_members()
                ));
            }
        }
        let d = self.duration();
        let (shortest, longest) = FAULT_DURATION;
        if d < shortest || d > longest {
            return Err(format!(
                "--fault-duration must be between {} and {}s (got {})",
                humantime::format_duration(shortest),
                longest.as_secs(),
                humantime::format_duration(d)
            ));
        }
        Ok(())
    }
}
