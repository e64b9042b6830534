//! Random register histories for the tests: a random sequential execution, stretched into
//! a concurrent history consistent with it (each op takes effect at a moment strictly inside
//! its interval, or, when indeterminate, at such a moment or never), so linearizable by
//! construction; and the corruption of one read, which usually makes it not.

use coordbench_splitmix::SplitMix64;

use super::history::{Call, Op, Ret};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub keys: usize,
    pub clients: usize,
    pub ops: usize,
    /// Per mille of ops that time out (half of them take effect).
    pub indeterminate_per_mille: u32,
    /// Some rejected CASes do not report the current value (ZooKeeper's BadVersion).
    pub unknown_rejections: bool,
}

enum Phase {
    Idle,
    Invoked(usize),
    /// Took effect (or was decided); completes with this result.
    Applied(usize, Ret),
}

struct Generator {
    rng: SplitMix64,
    shape: Shape,
    registers: Vec<Option<String>>,
    written: Vec<Vec<String>>,
    ops: Vec<Op>,
    now: u64,
}

/// A linearizable history of `shape`, from `seed`.
pub fn linearizable_history(seed: u64, shape: Shape) -> Vec<Op> {
    let mut g = Generator {
        rng: SplitMix64::new(seed),
        shape,
        registers: vec![None; shape.keys],
        written: vec![Vec::new(); shape.keys],
        ops: Vec::with_capacity(shape.ops),
        now: 0,
    };
    let mut phases: Vec<Phase> = (0..shape.clients).map(|_| Phase::Idle).collect();
    let bound = (shape.ops + 1) * shape.clients * 40;
    for _ in 0..bound {
        let idle = phases.iter().all(|p| matches!(p, Phase::Idle));
        if g.ops.len() >= shape.ops && idle {
            break;
        }
        g.now += u64::from(g.rng.range(1, 4));
        let client = g.rng.range(0, shape.clients as u32) as usize;
        phases[client] = match std::mem::replace(&mut phases[client], Phase::Idle) {
            Phase::Idle if g.ops.len() < shape.ops => Phase::Invoked(g.invoke(client)),
            Phase::Idle => Phase::Idle,
            Phase::Invoked(i) => g.take_effect(i),
            Phase::Applied(i, ret) => {
                g.ops[i].complete_us = Some(g.now);
                g.ops[i].ret = Some(ret);
                Phase::Idle
            }
        };
    }
    g.ops
}

impl Generator {
    fn invoke(&mut self, client: usize) -> usize {
        let key = self.rng.range(0, self.shape.keys as u32) as usize;
        let value = format!("c{client}-{}", self.ops.len());
        let call = match self.rng.range(0, 10) {
            0..=3 => Call::Read,
            4..=6 => Call::Write { value },
            _ => {
                let expected = if self.rng.range(0, 2) == 0 {
                    self.registers[key].clone()
                } else {
                    self.some_written(key)
                };
                Call::Cas {
                    expected,
                    new: value,
                }
            }
        };
        self.ops.push(Op {
            id: self.ops.len() as u64,
            client,
            key: format!("k{key}"),
            call,
            invoke_us: self.now,
            complete_us: None,
            ret: None,
        });
        self.ops.len() - 1
    }

    fn some_written(&mut self, key: usize) -> Option<String> {
        let written = &self.written[key];
        let pick = self.rng.range(0, written.len() as u32 + 1) as usize;
        written.get(pick).cloned()
    }

    /// The op's linearization point: apply it now (or, if it times out, maybe never).
    fn take_effect(&mut self, i: usize) -> Phase {
        let key = self.ops[i].key[1..]
            .parse::<usize>()
            .expect("generated key");
        let times_out = self.rng.range(0, 1000) < self.shape.indeterminate_per_mille;
        if times_out && self.rng.range(0, 2) == 0 {
            return Phase::Idle; // never takes effect
        }
        let register = &mut self.registers[key];
        let ret = match &self.ops[i].call {
            Call::Read => Ret::Read {
                value: register.clone(),
            },
            Call::Write { value } => {
                *register = Some(value.clone());
                self.written[key].push(value.clone());
                Ret::Written
            }
            Call::Cas { expected, new } if expected == register => {
                *register = Some(new.clone());
                self.written[key].push(new.clone());
                Ret::CasApplied
            }
            Call::Cas { .. } if self.shape.unknown_rejections && self.rng.range(0, 2) == 0 => {
                Ret::CasRejected { current: None }
            }
            Call::Cas { .. } => Ret::CasRejected {
                current: Some(register.clone()),
            },
        };
        if times_out {
            Phase::Idle
        } else {
            Phase::Applied(i, ret)
        }
    }
}

/// Changes one completed read's result to another value of its key; false if the history
/// has no read to corrupt.
pub fn corrupt_one_read(history: &mut [Op], seed: u64) -> bool {
    let mut rng = SplitMix64::new(seed ^ 0xC0FF_EE00);
    let reads: Vec<usize> = (0..history.len())
        .filter(|&i| matches!(history[i].ret, Some(Ret::Read { .. })))
        .collect();
    if reads.is_empty() {
        return false;
    }
    let victim = reads[rng.range(0, reads.len() as u32) as usize];
    let Some(Ret::Read { value: actual }) = history[victim].ret.clone() else {
        return false;
    };
    let key = history[victim].key.clone();
    let mut others: Vec<Option<String>> = history
        .iter()
        .filter(|op| op.key == key && !op.is_failed())
        .filter_map(|op| op.written_value().map(|v| Some(v.to_string())))
        .chain([None])
        .filter(|v| *v != actual)
        .collect();
    others.sort();
    if others.is_empty() {
        return false;
    }
    let value = others[rng.range(0, others.len() as u32) as usize].clone();
    history[victim].ret = Some(Ret::Read { value });
    true
}
