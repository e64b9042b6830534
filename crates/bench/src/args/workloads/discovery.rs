//! The discovery workload's options: the service instances (its clients), their churn
//! (its pace) and the instances that crash; their checks and what run.json records of them
//! (the watchers are `--watchers`, [`super::watch`]).

use clap::Args;
use coordbench_results::kinds::WorkloadKind;
use coordbench_results::parse::parse_rate;
use serde::Serialize;

use crate::args::load::{LoadOptions, Shape};

/// discovery: default registrations + deregistrations per second.
pub const DEFAULT_CHURN: f64 = 20.0;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "discovery workload")]
pub struct DiscoveryOptions {
    /// discovery: service instances (default: --clients).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub instances: Option<u32>,

    /// discovery: registrations + deregistrations per second, all instances together
    /// (default 20).
    #[arg(long, value_parser = parse_rate)]
    pub churn: Option<f64>,

    /// discovery: the first N instances crash (abandon their session) instead of
    /// deregistering.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub crash_instances: u32,
}

/// What run.json keeps of the discovery options.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DiscoveryRecord {
    /// discovery: changes per second.
    pub churn: Option<f64>,
    /// discovery: instances that crash instead of deregistering.
    pub crash_instances: usize,
}

impl DiscoveryOptions {
    /// Discovery is paced by its churn: `--rate` does not apply.
    pub(super) fn check_pace(&self, load: &LoadOptions) -> Result<(), String> {
        if load.workload == WorkloadKind::Discovery && load.rate.is_some() {
            return Err("discovery is paced by --churn (changes per second); omit --rate".into());
        }
        Ok(())
    }

    /// The instances are the clients (one session each unless `--conns`), changing at the
    /// churn's pace; no more of them may crash than there are.
    pub(super) fn resolve(
        &self,
        load: &LoadOptions,
        shape: &mut Shape,
    ) -> Result<DiscoveryRecord, String> {
        let instances = self.instances.unwrap_or(load.clients) as usize;
        if self.crash_instances as usize > instances {
            return Err(format!(
                "--crash-instances {} exceeds the {instances} instances",
                self.crash_instances
            ));
        }
        let churn = self.churn.unwrap_or(DEFAULT_CHURN);
        shape.clients = instances;
        shape.conns = load.given_conns().unwrap_or(instances);
        shape.rate = Some(churn);
        Ok(DiscoveryRecord {
            churn: Some(churn),
            crash_instances: self.crash_instances as usize,
        })
    }
}
