//! The lock workload's options (`--recipe` also election's): lock names, hold time, the
//! recipe, holder pauses and the protected resource's fencing; their checks, what run.json
//! records of them, and how a pause stretches the operation timeout.

use std::time::Duration;

use clap::Args;
use coordbench_drivers::{ApiFamily, LockRecipe};
use coordbench_results::kinds::{ProtectArg, ZkClientArg};
use coordbench_results::parse::{parse_positive_duration, parse_ratio};
use coordbench_workloads::pause::HolderPause;
use coordbench_workloads::resource::Protection;
use serde::Serialize;

use crate::args::load::Shape;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "lock workload (--recipe also election)")]
pub struct LockOptions {
    /// lock: number of lock names the clients contend for (client c takes lock c % locks).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub locks: u32,

    /// lock: how long a holder keeps the lock. The default, 10ms, is a short critical
    /// section that lets waiters settle between releases (see docs/reference.md, herd effect);
    /// 0s measures the lock service's own acquisition rate.
    #[arg(long, default_value = "10ms", value_parser = coordbench_results::parse::parse_duration)]
    pub hold: Duration,

    /// lock, election: the recipe, per target (the first is the default): etcd, raft:
    /// etcd-mutex | naive; zookeeper, zab: zk-recipe | naive; redis: set-nx | set-nx-notify
    /// | redlock; postgres: advisory | lease-row; null: mutex | naive.
    #[arg(long)]
    pub recipe: Option<String>,

    /// lock: freeze a drawn fraction of holders (--holder-pause-ratio) for this long inside
    /// their critical section, as in a GC pause of the client: their session's own traffic
    /// (lease keep-alives, ZooKeeper pings) stops, so a pause past --ttl loses the lock while
    /// the holder still believes it holds it. Needs --holder-pause-ratio.
    #[arg(long, value_parser = parse_positive_duration)]
    pub holder_pause: Option<Duration>,

    /// lock: the fraction of acquisitions whose holder pauses, in (0, 1], drawn from --seed.
    /// Needs --holder-pause.
    #[arg(long, value_parser = parse_ratio)]
    pub holder_pause_ratio: Option<f64>,

    /// lock: how the resource each lock protects treats its holders' writes: none (accepts
    /// every write), token (rejects a fencing token lower than the highest it has seen), txn
    /// (a write the coordination service applies only while the lock is still the writer's).
    /// Default: none.
    #[arg(long, value_enum)]
    pub protect: Option<ProtectArg>,
}

/// What run.json keeps of the lock options beside `locks`, `hold_ms` and `recipe`, and the
/// pauses and fencing the workload applies.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LockRecord {
    /// lock: how long a paused holder freezes, ms (`--holder-pause`).
    pub holder_pause_ms: Option<f64>,
    /// lock: the fraction of acquisitions that pause (`--holder-pause-ratio`).
    pub holder_pause_ratio: Option<f64>,
    /// lock: `none`, `token` or `txn` (`--protect`).
    pub protect: Option<&'static str>,
    #[serde(skip)]
    pub holder_pause: Option<HolderPause>,
    #[serde(skip)]
    pub protection: Protection,
}

impl LockOptions {
    /// `--recipe` in the family's names, or the family's default recipe.
    pub fn recipe(&self, family: ApiFamily) -> Result<LockRecipe, String> {
        family.parse_recipe(self.recipe.as_deref())
    }

    /// Whether the holders' writes go to a resource (pauses or protection asked for).
    pub fn writes_resource(&self) -> bool {
        self.holder_pause.is_some() || self.protect.is_some()
    }

    /// Holder pauses and the protected resource's fencing. A paused holder's own stall is
    /// not the server's slowness: its operation may take the pause on top of
    /// `--op-timeout` before it counts as a timeout.
    pub(super) fn resolve(&self, shape: &mut Shape) -> Result<LockRecord, String> {
        let holder_pause = self.holder_pause()?;
        let protection = match self.protect {
            None | Some(ProtectArg::None) => Protection::None,
            Some(ProtectArg::Token) => Protection::Token,
            Some(ProtectArg::Txn) => Protection::Txn,
        };
        shape.op_timeout += holder_pause.map_or(Duration::ZERO, |p| p.duration);
        Ok(LockRecord {
            holder_pause_ms: holder_pause.map(|p| p.duration.as_secs_f64() * 1000.0),
            holder_pause_ratio: holder_pause.map(|p| p.ratio),
            // Recorded when pauses or protection were asked for; plain lock runs keep the
            // configuration they always had, so they compare with earlier results.
            protect: (holder_pause.is_some() || self.protect.is_some()).then(|| protection.name()),
            holder_pause,
            protection,
        })
    }

    /// Holder pauses need a driver that can freeze a session, and `--protect txn` a recipe
    /// whose lock the service can check.
    pub fn check_fencing(
        &self,
        family: ApiFamily,
        recipe: LockRecipe,
        zk_client: ZkClientArg,
    ) -> Result<(), String> {
        if self.holder_pause.is_some() && zk_client == ZkClientArg::Async {
            return Err(
                "--holder-pause needs --zk-client client (zookeeper-async's sessions cannot be frozen: it replaces an expired session silently); omit --zk-client".into(),
            );
        }
        if self.protect == Some(ProtectArg::Txn) && zk_client == ZkClientArg::Async {
            return Err(
                "--protect txn needs --zk-client client (the zookeeper-async driver has no fenced write); omit --zk-client".into(),
            );
        }
        if self.protect == Some(ProtectArg::Txn)
            && family == ApiFamily::ZooKeeper
            && recipe == LockRecipe::Naive
        {
            return Err(
                "--protect txn cannot fence --recipe naive on zookeeper: every holder re-creates the same holder node at version 0, so a version check cannot tell holders apart; use --recipe zk-recipe or --protect token".into(),
            );
        }
        Ok(())
    }

    /// `--holder-pause` and `--holder-pause-ratio`, which need each other.
    fn holder_pause(&self) -> Result<Option<HolderPause>, String> {
        match (self.holder_pause, self.holder_pause_ratio) {
            (Some(duration), Some(ratio)) => Ok(Some(HolderPause { duration, ratio })),
            (None, None) => Ok(None),
            (Some(_), None) => Err(
                "--holder-pause needs --holder-pause-ratio R: the fraction of acquisitions that pause, in (0, 1]".into(),
            ),
            (None, Some(_)) => Err(
                "--holder-pause-ratio needs --holder-pause D: how long a paused holder freezes".into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command};
    use coordbench_drivers::ApiFamily;

    /// `--recipe`'s help names every recipe of every target, so it cannot fall behind.
    #[test]
    fn the_recipe_help_lists_every_targets_recipes() {
        let command = super::LockOptions::augment_args(Command::new("run"));
        let recipe = command
            .get_arguments()
            .find(|a| a.get_id() == "recipe")
            .expect("--recipe");
        let help = recipe.get_help().expect("help").to_string();
        for family in [
            ApiFamily::Etcd,
            ApiFamily::ZooKeeper,
            ApiFamily::Redis,
            ApiFamily::Postgres,
            ApiFamily::Null,
        ] {
            for (name, _) in family.recipes() {
                assert!(help.contains(name), "--recipe's help lacks {name}: {help}");
            }
        }
    }
}
