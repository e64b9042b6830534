//! `coordbench simulate cost`: what the built-in engines spend per committed write, as a
//! count that repeats exactly from run to run, whatever else the machine is doing.
//!
//! The workload: three members of one core (raft or zab) on the timed simulated network
//! (no sockets, disks or wall clock), each applying what it commits to the engine's own
//! store (machine.rs); after a first leader is established, that leader is kept fed with
//! `ops` writes (64 in flight) until every member has applied all of them. The writes touch
//! [`KEYS`] keys: the first `KEYS` create them, the rest overwrite them (raft: etcd puts of
//! 64-byte values; zab: creates, then setData of 64 bytes).
//!
//! The count: user-space instructions, as valgrind's cachegrind counts them (`Ir`, no cache
//! simulation), of this binary running the workload twice, with `ops` and with `2·ops`
//! writes; the difference divided by `ops` is the marginal instructions per committed write
//! of three members' cores, stores and the simulated network, with start-up, the election
//! and the key creation cancelled out. docs/reference.md ("Deterministic cost") gives its
//! variation and what it includes.

use std::path::Path;
use std::process::Command;

use coordbench_kv::{KvStore, PutRequest};
use coordbench_sim::{LinkModel, SimRng, TimedCluster};
use coordbench_tree::{Acl, CreateMode, DataTree, Op};
use serde::Serialize;

use super::args::SimCore;
use super::machine::Machine;
use super::members::{Member, RaftMember, Timing, ZabMember};

/// Members of the simulated cluster.
pub const MEMBERS: u64 = 3;
/// Distinct keys the writes touch.
pub const KEYS: u64 = 100;
/// Writes the leader has proposed but not yet applied, at most.
const IN_FLIGHT: u64 = 64;
const TICK_US: u64 = 1000;
const VALUE: [u8; 64] = [b'v'; 64];

/// What one run of the workload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Workload {
    /// Writes every member applied.
    pub committed: u64,
    /// Simulated time it took, from the first tick.
    pub simulated_us: u64,
}

/// Runs the workload of `ops` writes on `core`; an error names what did not happen in the
/// simulated time allowed (a bound, not a figure).
pub fn run_workload(core: SimCore, ops: u64, seed: u64) -> Result<Workload, String> {
    match core {
        SimCore::Raft => drive::<RaftMember>(ops, seed, kv_machine, kv_put),
        SimCore::Zab => drive::<ZabMember>(ops, seed, tree_machine, tree_write),
    }
}

fn kv_machine() -> Machine {
    Machine::Kv(Box::new(KvStore::new()))
}

fn tree_machine() -> Machine {
    Machine::Tree(Box::new(DataTree::new()))
}

fn kv_put(i: u64) -> Vec<u8> {
    coordbench_kv::Command::Put(PutRequest {
        key: format!("/cost/{:03}", i % KEYS).into_bytes(),
        value: VALUE.to_vec(),
        ..Default::default()
    })
    .encode()
}

fn tree_write(i: u64) -> Vec<u8> {
    let path = format!("/cost-{:03}", i % KEYS);
    let op = if i < KEYS {
        Op::Create {
            path,
            data: Some(VALUE.to_vec()),
            mode: CreateMode::Persistent,
            ttl_ms: 0,
            acl: vec![Acl::open()],
        }
    } else {
        Op::SetData {
            path,
            data: Some(VALUE.to_vec()),
            version: -1,
        }
    };
    coordbench_tree::Command::Write {
        session: 0,
        now_ms: 0,
        op,
        auth: Vec::new(),
    }
    .encode()
}

/// The engines' default timing in ticks of 1 ms: heartbeats every 10, elections after 100
/// to 200 without one.
fn timing() -> Timing {
    Timing {
        heartbeat_ticks: 10,
        election_ticks: (100, 200),
        pre_vote: true,
        check_quorum: true,
    }
}

fn drive<M: Member>(
    ops: u64,
    seed: u64,
    machine: fn() -> Machine,
    command: fn(u64) -> Vec<u8>,
) -> Result<Workload, String> {
    let members = (1..=MEMBERS)
        .map(|id| {
            let mut m = M::boot(id, MEMBERS, &timing(), seed)?;
            m.apply_to(machine());
            Ok(m)
        })
        .collect::<Result<Vec<M>, String>>()?;
    let links = LinkModel::uniform(members.len(), 100, 0, 0);
    let mut c = TimedCluster::new(members, TICK_US, 100 * TICK_US, links, SimRng::new(seed));
    let established = |c: &TimedCluster<M>, _: usize| leader(c).is_some();
    if !c.run_until(10_000_000, established) {
        return Err("no leader was established within 10 s of simulated time".into());
    }
    // Generous: a write takes about a round trip of 200 µs of simulated time.
    let deadline = c.now_us() + 10_000_000 + ops * 10_000;
    let mut proposed = 0;
    while !c.live().all(|(_, m)| m.applied() >= ops) {
        if c.now_us() > deadline {
            return Err(format!(
                "{proposed} of {ops} writes proposed and not all applied within the simulated time allowed"
            ));
        }
        let lead = leader(&c).ok_or("the leader was lost without a fault")?;
        let node = c.node_mut(lead).ok_or("the leader vanished")?;
        let applied = node.applied();
        while proposed < ops && proposed - applied.min(proposed) < IN_FLIGHT {
            if !node.propose(&command(proposed)) {
                break;
            }
            proposed += 1;
        }
        c.flush(lead);
        let next = c.now_us() + TICK_US / 4;
        c.run_until(next, |_, _| false);
    }
    Ok(Workload {
        committed: ops,
        simulated_us: c.now_us(),
    })
}

/// The established leader's index, if there is one.
fn leader<M: Member>(c: &TimedCluster<M>) -> Option<usize> {
    c.live()
        .find(|(_, m)| {
            let l = m.leadership();
            l.leads && l.established
        })
        .map(|(i, _)| i)
}

/// The count of one core at one size, as `simulate cost` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Cost {
    pub engine: &'static str,
    pub ops: u64,
    pub seed: u64,
    /// Instructions of the run of `ops` writes and of `2·ops`.
    pub instructions: [u64; 2],
    pub instructions_per_op: f64,
    pub counter: &'static str,
    /// The test slowdown's iterations per committed command in the counted runs (0 unless
    /// a `test-slowdown` build runs with `COORDBENCH_TEST_COMMIT_SPIN` set).
    pub commit_spin: u64,
}

/// Errors of counting instructions: the tool is missing or its output unreadable.
#[derive(Debug, thiserror::Error)]
pub enum CountError {
    #[error("valgrind is not installed (Debian: apt-get install valgrind); the deterministic cost counts instructions with its cachegrind tool")]
    NoValgrind,
    #[error("{0}")]
    Failed(String),
}

/// Counts the instructions of `binary` running the workload of `ops` and `2·ops` writes
/// (`simulate cost --workload-only`) under cachegrind; `scratch` holds its output files.
pub fn count(
    binary: &Path,
    core: SimCore,
    ops: u64,
    seed: u64,
    scratch: &Path,
) -> Result<Cost, CountError> {
    let mut instructions = [0u64; 2];
    for (slot, n) in [ops, 2 * ops].into_iter().enumerate() {
        instructions[slot] = count_one(binary, core, n, seed, scratch)?;
    }
    let added = instructions[1].saturating_sub(instructions[0]);
    Ok(Cost {
        engine: core.name(),
        ops,
        seed,
        instructions,
        instructions_per_op: added as f64 / ops as f64,
        counter: "valgrind cachegrind Ir (user-space instructions)",
        // The counted runs are this binary with this environment: they spin alike.
        commit_spin: coordbench_node::slowdown::configured_spin(),
    })
}

fn count_one(
    binary: &Path,
    core: SimCore,
    ops: u64,
    seed: u64,
    scratch: &Path,
) -> Result<u64, CountError> {
    let out_file = scratch.join(format!("cachegrind.{}.{ops}.out", core.name()));
    let run = Command::new("valgrind")
        .args(["--tool=cachegrind", "--cache-sim=no", "--branch-sim=no"])
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg(binary)
        .args([
            "simulate",
            "cost",
            "--workload-only",
            "--engine",
            core.name(),
        ])
        .args(["--ops", &ops.to_string(), "--seed", &seed.to_string()])
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CountError::NoValgrind,
            _ => CountError::Failed(format!("starting valgrind: {e}")),
        })?;
    if !run.status.success() {
        let stderr = String::from_utf8_lossy(&run.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(CountError::Failed(format!(
            "{} simulate cost under valgrind failed ({}): {}",
            binary.display(),
            run.status,
            last.unwrap_or("no output")
        )));
    }
    let text = std::fs::read_to_string(&out_file)
        .map_err(|e| CountError::Failed(format!("reading {}: {e}", out_file.display())))?;
    let _ = std::fs::remove_file(&out_file);
    summary_instructions(&text)
        .ok_or_else(|| CountError::Failed(format!("{}: no `summary:` line", out_file.display())))
}

/// The total of cachegrind's first event (Ir) from its output's `summary:` line.
fn summary_instructions(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("summary:"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_applies_every_write_and_the_run_repeats_exactly() {
        for core in [SimCore::Raft, SimCore::Zab] {
            let first = run_workload(core, 300, 7).unwrap();
            assert_eq!(first.committed, 300);
            assert!(first.simulated_us > 0);
            // One seed, one history: the same simulated time to the microsecond.
            assert_eq!(run_workload(core, 300, 7).unwrap(), first, "{core:?}");
        }
    }

    #[test]
    fn cachegrind_summary_line_is_read() {
        let text = "desc: I1 cache\ncmd: x\nevents: Ir\nfl=a\n1 2\nsummary: 123456789\n";
        assert_eq!(summary_instructions(text), Some(123_456_789));
        assert_eq!(summary_instructions("events: Ir\n"), None);
    }
}
