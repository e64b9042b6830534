//! One election trial, and a line of them: a fresh cluster elects a leader and settles
//! into heartbeats; the leader crashes at a uniformly random point of a heartbeat interval;
//! the trial times the first member to win an election after that (docs/reference.md,
//! "simulate election").

use std::time::Duration;

use coordbench_sim::{LinkModel, SimRng, TimedCluster};
use coordbench_splitmix::SplitMix64;

use super::args::{ElectionArgs, SimCore};
use super::members::{Member, RaftMember, Timing, ZabMember};
use super::timeouts::TimeoutRange;

/// Everything a line needs besides its timeout range, checked.
#[derive(Clone, Debug)]
pub struct Setup {
    pub core: SimCore,
    pub members: u64,
    pub tick_us: u64,
    /// `None`: half of each range's minimum.
    pub heartbeat_us: Option<u64>,
    pub link: Links,
    pub cap_us: u64,
    pub pre_vote: bool,
    pub check_quorum: bool,
    /// Writes per second proposed to the leader while there is one (0: none).
    pub load_per_s: u64,
}

/// The network of a trial: each link's one-way base latency is drawn from `base_us`
/// (inclusive), each message adds up to `jitter_us`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Links {
    pub base_us: (u64, u64),
    pub jitter_us: u64,
    pub loss_per_mille: u64,
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

impl Setup {
    pub fn from_args(args: &ElectionArgs) -> Result<Self, String> {
        let tick_us = micros(args.tick);
        if !(1..=1000).contains(&tick_us) {
            return Err("--tick must be within 1us..=1ms".into());
        }
        if args.jitter > args.broadcast {
            return Err("--jitter must not exceed --broadcast".into());
        }
        let (broadcast, jitter) = (micros(args.broadcast), micros(args.jitter));
        // Mean one-way delay broadcast/2: the base centred there, the jitter on top.
        let centre = (broadcast / 2).saturating_sub(jitter / 2) as f64;
        let spread = args.link_spread / 100.0;
        let setup = Self {
            core: args.core,
            members: u64::from(args.members),
            tick_us,
            heartbeat_us: args.heartbeat.map(micros),
            link: Links {
                base_us: (
                    (centre * (1.0 - spread)).round() as u64,
                    (centre * (1.0 + spread)).round() as u64,
                ),
                jitter_us: jitter,
                loss_per_mille: (args.loss * 10.0).round() as u64,
            },
            cap_us: micros(args.max_election),
            pre_vote: args.pre_vote,
            check_quorum: args.check_quorum,
            load_per_s: args.load,
        };
        if setup.cap_us == 0 {
            return Err("--max-election must be above 0".into());
        }
        for range in &args.timeouts {
            setup.timing(range)?;
        }
        Ok(setup)
    }

    pub fn heartbeat_us(&self, range: &TimeoutRange) -> u64 {
        self.heartbeat_us.unwrap_or(u64::from(range.min_ms) * 500)
    }

    /// The range in the core's ticks; refuses a heartbeat not below the minimum timeout.
    pub fn timing(&self, range: &TimeoutRange) -> Result<Timing, String> {
        let heartbeat_ticks = (self.heartbeat_us(range) / self.tick_us) as u32;
        let election_ticks = range.ticks(self.tick_us);
        if heartbeat_ticks == 0 || heartbeat_ticks >= election_ticks.0 {
            return Err(format!(
                "timeout range {range}: the heartbeat ({} us) must be at least one tick and \
                 below the minimum timeout",
                self.heartbeat_us(range)
            ));
        }
        Ok(Timing {
            heartbeat_ticks,
            election_ticks,
            pre_vote: self.pre_vote,
            check_quorum: self.check_quorum,
        })
    }
}

/// One trial's figures (docs/reference.md, election.csv columns).
#[derive(Clone, Debug, PartialEq)]
pub struct Trial {
    pub trial: u32,
    pub seed: u64,
    /// Crash to the first member leading; `None` if cut off at the cap.
    pub election_us: Option<u64>,
    /// Crash to that leader being established (a majority holds its first entry).
    pub established_us: Option<u64>,
    /// Terms (zab: election rounds) from the crashed leader's to the new one's.
    pub terms: u64,
    /// Terms (rounds) started in between that elected nobody.
    pub split_votes: u64,
    /// Simulated time of the whole trial, start-up included.
    pub simulated_us: u64,
    /// Writes the leader accepted under `--load`.
    pub writes: u64,
}

/// The seed of trial `trial` of `range`: every trial replays on its own. Each input is
/// hashed in turn: XOR-ing the run's seed with the trial number directly made runs whose
/// seeds differ only in low bits (1, 2, 3) draw the same set of trials in another order.
pub fn trial_seed(seed: u64, range: &TimeoutRange, trial: u32) -> u64 {
    let run = SplitMix64::new(seed).next_u64();
    let line = SplitMix64::new(run ^ range.key()).next_u64();
    SplitMix64::new(line ^ u64::from(trial)).next_u64()
}

pub fn run_trial(
    setup: &Setup,
    range: &TimeoutRange,
    trial: u32,
    seed: u64,
) -> Result<Trial, String> {
    match setup.core {
        SimCore::Raft => trial_of::<RaftMember>(setup, range, trial, seed),
        SimCore::Zab => trial_of::<ZabMember>(setup, range, trial, seed),
    }
}

fn established_leader<M: Member>(c: &TimedCluster<M>) -> Option<usize> {
    c.live()
        .find(|(_, m)| m.leadership().established)
        .map(|(i, _)| i)
}

/// Whether the member an event touched (the only one it changed) is an established leader.
fn established_at<M: Member>(c: &TimedCluster<M>, touched: usize) -> bool {
    c.node(touched).is_some_and(|m| m.leadership().established)
}

fn max_term<M: Member>(c: &TimedCluster<M>) -> u64 {
    c.live()
        .map(|(_, m)| m.leadership().term)
        .max()
        .unwrap_or(0)
}

fn trial_of<M: Member>(
    setup: &Setup,
    range: &TimeoutRange,
    trial: u32,
    seed: u64,
) -> Result<Trial, String> {
    let timing = setup.timing(range)?;
    let members = (1..=setup.members)
        .map(|id| M::boot(id, setup.members, &timing, seed))
        .collect::<Result<Vec<M>, String>>()?;
    let mut choices = SimRng::new(seed ^ 0xC0FF_EE00_D15C_0B0B);
    let l = setup.link;
    let links = LinkModel::spread(
        members.len(),
        l.base_us,
        l.jitter_us,
        l.loss_per_mille,
        &mut choices,
    );
    // Members start within one minimum timeout of each other, so even fixed timeouts
    // elect a first leader.
    let start_spread_us = u64::from(range.min_ms) * 1000;
    let mut c = TimedCluster::new(
        members,
        setup.tick_us,
        start_spread_us,
        links,
        SimRng::new(seed),
    );
    let mut load = Load::new(setup.load_per_s);
    let mut result = Trial {
        trial,
        seed,
        election_us: None,
        established_us: None,
        terms: 0,
        split_votes: 0,
        simulated_us: 0,
        writes: 0,
    };
    // Timeouts too short for the network may never elect a first leader: a cut-off trial.
    if !load.run(&mut c, setup.cap_us, established_at) {
        result.simulated_us = c.now_us();
        return Ok(result);
    }
    // Settle: every follower has heard a few heartbeats of the new leader.
    let heartbeat_us = setup.heartbeat_us(range);
    let settled_at = c.now_us() + 3 * heartbeat_us;
    load.run(&mut c, settled_at, |_, _| false);
    let crash_at = c.now_us() + choices.below(heartbeat_us);
    load.run(&mut c, crash_at, |_, _| false);
    let Some(leader) = established_leader(&c) else {
        result.simulated_us = c.now_us();
        return Ok(result);
    };
    let old_term = max_term(&c);
    c.crash(leader);
    let deadline = crash_at + setup.cap_us;
    let elected = load.run(&mut c, deadline, |c, i| {
        c.node(i).is_some_and(|m| m.leadership().leads)
    });
    result.terms = max_term(&c) - old_term;
    result.simulated_us = c.now_us();
    if !elected {
        result.split_votes = result.terms;
        return Ok(result);
    }
    result.election_us = Some(c.now_us() - crash_at);
    let new_term = c
        .live()
        .filter(|(_, m)| m.leadership().leads)
        .map(|(_, m)| m.leadership().term)
        .max()
        .unwrap_or(old_term);
    result.terms = new_term - old_term;
    result.split_votes = result.terms.saturating_sub(1);
    if load.run(&mut c, deadline, established_at) {
        result.established_us = Some(c.now_us() - crash_at);
    }
    result.simulated_us = c.now_us();
    result.writes = load.accepted;
    Ok(result)
}

/// Writes offered to whoever leads at a fixed rate, between the cluster's own events.
struct Load {
    every_us: Option<u64>,
    next_us: u64,
    accepted: u64,
}

impl Load {
    fn new(per_s: u64) -> Self {
        let every_us = (per_s > 0).then(|| (1_000_000 / per_s).max(1));
        Self {
            every_us,
            next_us: every_us.unwrap_or(0),
            accepted: 0,
        }
    }

    /// [`TimedCluster::run_until`], with this load's writes on the way.
    fn run<M: Member>(
        &mut self,
        c: &mut TimedCluster<M>,
        until_us: u64,
        mut stop: impl FnMut(&TimedCluster<M>, usize) -> bool,
    ) -> bool {
        let Some(every_us) = self.every_us else {
            return c.run_until(until_us, stop);
        };
        loop {
            let step_to = self.next_us.min(until_us);
            if c.run_until(step_to, &mut stop) {
                return true;
            }
            if step_to == until_us && self.next_us > until_us {
                return false;
            }
            self.next_us += every_us;
            let leader = c.live().find(|(_, m)| m.leadership().leads).map(|(i, _)| i);
            if let Some(i) = leader {
                if c.node_mut(i)
                    .is_some_and(|m| m.propose(&self.accepted.to_le_bytes()))
                {
                    self.accepted += 1;
                }
                c.flush(i);
            }
            if step_to == until_us {
                return false;
            }
        }
    }
}

/// Every trial of one range, in trial order.
pub fn run_line(
    setup: &Setup,
    range: &TimeoutRange,
    trials: u32,
    seed: u64,
) -> Result<Vec<Trial>, String> {
    (0..trials)
        .map(|t| run_trial(setup, range, t, trial_seed(seed, range, t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Runs whose seeds differ only in low bits draw different trials, not the same ones
    /// reordered.
    #[test]
    fn nearby_seeds_draw_different_trials() {
        let range = TimeoutRange::parse("150-300").unwrap();
        let seeds =
            |run: u64| -> BTreeSet<u64> { (0..1000).map(|t| trial_seed(run, &range, t)).collect() };
        let (one, two) = (seeds(1), seeds(2));
        assert_eq!(one.len(), 1000);
        assert!(one.is_disjoint(&two));
    }
}
