//! Deterministic simulation tests: many seeds of a 3- and a 5-node cluster
//! under message loss, duplication, reordering, partitions, crashes and
//! restarts, with invariant checks after every event (see `sim/`).
//!
//! A failing seed prints how to replay it alone, e.g.
//! `RAFT_SIM_SEED=1234 RAFT_SIM_NODES=5 cargo test -p coordbench-raft --test simulation replay -- --nocapture`
//! (add `RAFT_SIM_TRACE=1` for an event log). `RAFT_SIM_SEEDS=N` widens the
//! sweeps for a longer soak.

mod sim;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use sim::{SimOptions, Stats};

const ROUNDS: u64 = 2000;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn repro(seed: u64, nodes: u64, rounds: u64) -> String {
    format!(
        "reproduce: RAFT_SIM_SEED={seed} RAFT_SIM_NODES={nodes} RAFT_SIM_ROUNDS={rounds} \
         cargo test -p coordbench-raft --test simulation replay -- --nocapture"
    )
}

fn run_one(seed: u64, nodes: u64, rounds: u64, trace: bool) -> Result<Stats, String> {
    let opts = SimOptions {
        seed,
        nodes,
        rounds,
        trace,
    };
    match catch_unwind(AssertUnwindSafe(|| sim::run(opts))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {msg}"))
        }
    }
}

fn sweep(nodes: u64, seeds: std::ops::Range<u64>) {
    let seeds = match env_u64("RAFT_SIM_SEEDS") {
        Some(n) => seeds.start..seeds.start + n,
        None => seeds,
    };
    let started = Instant::now();
    let mut total = Stats::default();
    let mut failures = Vec::new();
    let count = seeds.end - seeds.start;
    for seed in seeds {
        match run_one(seed, nodes, ROUNDS, false) {
            Ok(s) => {
                total.elections += s.elections;
                total.committed += s.committed;
                total.acked += s.acked;
                total.reads_served += s.reads_served;
                total.snapshots_installed += s.snapshots_installed;
                total.crashes += s.crashes;
                total.transfers += s.transfers;
                total.delivered += s.delivered;
                total.converge_ticks = total.converge_ticks.max(s.converge_ticks);
            }
            Err(e) => {
                eprintln!(
                    "seed {seed} ({nodes} nodes) FAILED: {e}\n  {}",
                    repro(seed, nodes, ROUNDS)
                );
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{nodes} nodes, {count} seeds x {ROUNDS} ticks in {:.1?}: {} leader terms, {} entries committed, \
         {} writes acked, {} reads, {} snapshots installed, {} crashes, {} transfers, \
         {} messages delivered, slowest convergence {} ticks",
        started.elapsed(),
        total.elections,
        total.committed,
        total.acked,
        total.reads_served,
        total.snapshots_installed,
        total.crashes,
        total.transfers,
        total.delivered,
        total.converge_ticks
    );
    assert!(
        failures.is_empty(),
        "failing seeds: {failures:?} (see stderr for how to reproduce)"
    );
}

#[test]
fn sim_three_nodes() {
    sweep(3, 0..200);
}

#[test]
fn sim_five_nodes() {
    sweep(5, 1000..1200);
}

/// Pinned seeds. With the harness as it is, each one catches a deliberately
/// broken core: (2, 3) and (1105, 5) a leader committing an older-term entry
/// by counting replicas (Raft's "Figure 8"), (416, 3) a candidate sending
/// RequestVote before its term and self-vote are durable. If the harness
/// changes how it draws random numbers, re-pick them the same way.
#[test]
fn sim_pinned_seeds() {
    for (seed, nodes) in [(2, 3), (416, 3), (1105, 5)] {
        if let Err(e) = run_one(seed, nodes, ROUNDS, false) {
            panic!("seed {seed}: {e}\n  {}", repro(seed, nodes, ROUNDS));
        }
    }
}

/// Replays one seed given by `RAFT_SIM_SEED` (does nothing without it).
#[test]
fn replay() {
    let Some(seed) = env_u64("RAFT_SIM_SEED") else {
        return;
    };
    let nodes = env_u64("RAFT_SIM_NODES").unwrap_or(3);
    let rounds = env_u64("RAFT_SIM_ROUNDS").unwrap_or(ROUNDS);
    let trace = std::env::var("RAFT_SIM_TRACE").is_ok_and(|v| v != "0");
    match run_one(seed, nodes, rounds, trace) {
        Ok(s) => eprintln!("seed {seed} passed: {s:?}"),
        Err(e) => panic!("seed {seed} FAILED: {e}\n  {}", repro(seed, nodes, rounds)),
    }
}
