//! The Wing–Gong search with Lowe's memoization, as Porcupine and Lowe's "Testing for
//! linearizability" describe it, over one key's prepared ops.
//!
//! Invokes and completions are events in time order (at equal times invokes come first, so
//! ops touching at an instant count as concurrent: the reading that accuses less), kept in
//! a doubly linked list. Scanning from the head, the search linearizes the first op whose
//! invoke it meets and whose transition the register allows, removes its two events and
//! starts over; meeting a completion means the op completing there was not linearized in
//! time, so it undoes the last choice and tries the next one. Every (linearized set,
//! register value) reached is cached ([`super::memo`]): reaching one again cannot lead
//! anywhere new. The history is linearizable iff the list empties.
//!
//! One pruning rule specific to registers with unique values keeps the search from
//! wandering: a value, once overwritten, is never current again, so an op may overwrite
//! the current value only when every op that must still observe it (a read of it, a CAS
//! rejected with it as current, a CAS applied from it) has been linearized. Any branch
//! breaking the rule is bound to fail; without it, 16 clients on one key exhaust the cache.
//!
//! A rejected CAS of unknown current that expects the current value may be preceded by a
//! spare ([`super::pruning`], *Spares*): choice 0 takes an interchangeable one, choice j
//! referenced spare j − 1 (kept in the linearized set as op n + j − 1).

use std::time::Instant;

use super::memo::{LinSet, Memo, MemoFull};
use super::model::{Transition, Value, ABSENT};
use super::pruning::{SearchOp, Spares};

/// How a key's search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Linearizable,
    /// `blocked`: the op (index into the searched ops) whose completion stopped the deepest
    /// partial linearization, where an excerpt should look.
    NotLinearizable {
        blocked: usize,
    },
    /// The deadline passed.
    OutOfTime,
    /// The cache reached its memory bound.
    OutOfMemory,
}

/// Steps between looks at the clock.
const CLOCK_EVERY: u64 = 4096;

/// The event list: event 2i is op i's invoke, 2i + 1 its completion; `HEAD` is the sentinel.
struct Events {
    next: Vec<u32>,
    prev: Vec<u32>,
}

const END: u32 = u32::MAX;

impl Events {
    fn new(ops: &[SearchOp]) -> (Events, u32) {
        let mut order: Vec<u32> = (0..2 * ops.len() as u32).collect();
        // (time, invoke before completion, op): unstable sort on a total key.
        order.sort_unstable_by_key(|&e| {
            let op = &ops[(e / 2) as usize];
            let time = if e % 2 == 0 {
                op.invoke_us
            } else {
                op.return_us
            };
            (time, e % 2, e / 2)
        });
        let head = 2 * ops.len() as u32;
        let mut next = vec![END; ops.len() * 2 + 1];
        let mut prev = vec![END; ops.len() * 2 + 1];
        let mut last = head;
        for &e in &order {
            next[last as usize] = e;
            prev[e as usize] = last;
            last = e;
        }
        (Events { next, prev }, head)
    }

    fn unlink(&mut self, e: u32) {
        let (p, n) = (self.prev[e as usize], self.next[e as usize]);
        self.next[p as usize] = n;
        if n != END {
            self.prev[n as usize] = p;
        }
    }

    /// Undoes `unlink(e)`; unlinks must be undone in reverse order.
    fn relink(&mut self, e: u32) {
        let (p, n) = (self.prev[e as usize], self.next[e as usize]);
        self.next[p as usize] = e;
        if n != END {
            self.prev[n as usize] = e;
        }
    }

    fn lift(&mut self, op: u32) {
        self.unlink(2 * op);
        self.unlink(2 * op + 1);
    }

    fn unlift(&mut self, op: u32) {
        self.relink(2 * op + 1);
        self.relink(2 * op);
    }
}

/// A linearized op and what it replaced.
struct Frame {
    op: u32,
    before: Value,
    /// 0: as its transition says (for a rejection of unknown current expecting the current
    /// value: after an interchangeable spare); j ≥ 1: after referenced spare j − 1.
    choice: u32,
    /// An interchangeable spare Write was used just before it.
    spent: bool,
}

/// What linearizing an op with one choice does.
struct Step {
    after: Value,
    spent: bool,
    /// The referenced spare used (index into `Spares::referenced`).
    spare: Option<u32>,
}

/// The search state of one key.
struct Search<'a> {
    ops: &'a [SearchOp],
    spares: &'a Spares,
    /// Interchangeable spare Writes used so far.
    spent: u32,
    /// Referenced spares used so far.
    used: Vec<bool>,
    /// The value an unreferenced spare leaves current: no op observes or expects it.
    spare_value: Value,
    events: Events,
    head: u32,
    value: Value,
    stack: Vec<Frame>,
    /// Ops 0..n, then referenced spares as n + j.
    set: LinSet,
    memo: Memo,
    /// Per value: ops still to be linearized that must observe it.
    waiting: Vec<u32>,
}

impl Search<'_> {
    /// Whether overwriting the current value would strand ops (other than `op` itself)
    /// that still have to observe it.
    fn strands_observers(&self, observer: Option<Value>) -> bool {
        let own = u32::from(observer == Some(self.value));
        self.waiting[self.value as usize] > own
    }

    /// Counts `op` as having observed (`done`) or as waiting to observe again (undo).
    fn observed(&mut self, op: &SearchOp, done: bool) {
        if let Some(v) = op.transition.observes() {
            let waiting = &mut self.waiting[v as usize];
            *waiting = if done { *waiting - 1 } else { *waiting + 1 };
        }
    }

    /// The highest choice `op` has.
    fn last_choice(&self, op: &SearchOp) -> u32 {
        match op.transition {
            Transition::NotEqual(_) => self.spares.referenced.len() as u32,
            _ => 0,
        }
    }

    /// Linearizing `op` with `choice` now, if the register allows it.
    fn step(&self, op: &SearchOp, choice: u32) -> Option<Step> {
        let t = op.transition;
        if let Transition::NotEqual(expected) = t {
            if expected == self.value {
                return self.rescue(choice);
            }
        }
        if choice > 0 || (t.overwrites() && self.strands_observers(t.observes())) {
            return None;
        }
        let after = t.apply(self.value)?;
        Some(Step {
            after,
            spent: false,
            spare: None,
        })
    }

    /// A spare replacing the current value just before a rejection expecting it: one
    /// invoked before every completion still to be linearized (so placeable here).
    /// Choice 0 takes an unreferenced spare (a CAS from the current value, which costs
    /// nothing, else a Write); choice j a referenced one, unless a free one exists (which
    /// leaves a value nobody can use and so is never worse).
    fn rescue(&self, choice: u32) -> Option<Step> {
        if self.strands_observers(None) {
            return None;
        }
        let now = self.first_open_completion();
        let free = self
            .spares
            .cas
            .get(&self.value)
            .is_some_and(|&invoke| invoke <= now);
        if choice == 0 {
            let invoked = self.spares.writes.partition_point(|&invoke| invoke <= now);
            let spent = !free;
            if spent && invoked <= self.spent as usize {
                return None;
            }
            return Some(Step {
                after: self.spare_value,
                spent,
                spare: None,
            });
        }
        let j = choice - 1;
        let (transition, invoke) = self.spares.referenced[j as usize];
        if free || self.used[j as usize] || invoke > now {
            return None;
        }
        let after = transition.apply(self.value)?;
        Some(Step {
            after,
            spent: false,
            spare: Some(j),
        })
    }

    fn first_open_completion(&self) -> u64 {
        let mut e = self.events.next[self.head as usize];
        while e != END && e % 2 == 0 {
            e = self.events.next[e as usize];
        }
        if e == END {
            u64::MAX
        } else {
            self.ops[(e / 2) as usize].return_us
        }
    }

    /// Linearizes `op` with the first choice from `from` that the register allows and
    /// that reaches a configuration not yet cached.
    fn try_linearize(&mut self, op: u32, from: u32) -> Result<bool, MemoFull> {
        let search_op = &self.ops[op as usize];
        for choice in from..=self.last_choice(search_op) {
            let Some(step) = self.step(search_op, choice) else {
                continue;
            };
            let spare_slot = step.spare.map(|j| self.ops.len() as u32 + j);
            if let Some(slot) = spare_slot {
                self.set.insert(slot);
            }
            self.set.insert(op);
            let spent = self.spent + u32::from(step.spent);
            if self.memo.insert(&self.set, step.after, spent)? {
                self.stack.push(Frame {
                    op,
                    before: self.value,
                    choice,
                    spent: step.spent,
                });
                self.value = step.after;
                self.spent = spent;
                if let Some(j) = step.spare {
                    self.used[j as usize] = true;
                }
                self.events.lift(op);
                self.observed(search_op, true);
                return Ok(true);
            }
            self.set.remove_last(op);
            if let Some(slot) = spare_slot {
                self.set.remove_last(slot);
            }
        }
        Ok(false)
    }

    /// Undoes the last linearization and tries its op's next choice; `None` when there is
    /// nothing left to undo. Returns where to continue the scan.
    fn backtrack(&mut self) -> Result<Option<u32>, MemoFull> {
        let Some(frame) = self.stack.pop() else {
            return Ok(None);
        };
        self.value = frame.before;
        self.spent -= u32::from(frame.spent);
        self.observed(&self.ops[frame.op as usize], false);
        self.set.remove_last(frame.op);
        if frame.choice > 0 {
            let j = frame.choice - 1;
            self.used[j as usize] = false;
            self.set.remove_last(self.ops.len() as u32 + j);
        }
        self.events.unlift(frame.op);
        if self.try_linearize(frame.op, frame.choice + 1)? {
            return Ok(Some(self.events.next[self.head as usize]));
        }
        Ok(Some(self.events.next[2 * frame.op as usize]))
    }
}

/// Searches for a linearization of `ops` (in invoke order, with `spares` for rejections
/// of unknown current) from the absent register.
pub fn search(ops: &[SearchOp], spares: &Spares, deadline: Instant) -> Outcome {
    let (events, head) = Events::new(ops);
    let waiting = waiting_observers(ops, spares);
    let mut s = Search {
        ops,
        spares,
        spent: 0,
        spare_value: (waiting.len() - 1) as Value,
        events,
        head,
        value: ABSENT,
        stack: Vec::new(),
        used: vec![false; spares.referenced.len()],
        set: LinSet::new(ops.len() + spares.referenced.len()),
        memo: Memo::default(),
        waiting,
    };
    let mut entry = s.events.next[head as usize];
    let (mut deepest, mut blocked) = (0, 0);
    let mut steps: u64 = 0;
    while entry != END {
        if steps % CLOCK_EVERY == 0 && Instant::now() >= deadline {
            return Outcome::OutOfTime;
        }
        steps += 1;
        let op = entry / 2;
        let step = if entry % 2 == 0 {
            s.try_linearize(op, 0).map(|done| {
                Some(if done {
                    s.events.next[head as usize]
                } else {
                    s.events.next[entry as usize]
                })
            })
        } else {
            if s.stack.len() >= deepest {
                (deepest, blocked) = (s.stack.len(), op as usize);
            }
            s.backtrack()
        };
        match step {
            Ok(Some(next)) => entry = next,
            Ok(None) => return Outcome::NotLinearizable { blocked },
            Err(MemoFull) => return Outcome::OutOfMemory,
        }
    }
    Outcome::Linearizable
}

/// Per value, how many ops that must be linearized observe it; the last slot is the spare
/// value's.
fn waiting_observers(ops: &[SearchOp], spares: &Spares) -> Vec<u32> {
    let transitions = ops.iter().map(|op| op.transition);
    let spare_transitions = spares.referenced.iter().map(|&(t, _)| t);
    let values = transitions.chain(spare_transitions).map(|t| match t {
        Transition::Read(v) | Transition::Write(v) | Transition::NotEqual(v) => v,
        Transition::Cas { expected, new } => expected.max(new),
        Transition::Impossible => ABSENT,
    });
    // One slot more, for the spare value (observed by nobody).
    let mut waiting = vec![0; values.max().unwrap_or(ABSENT) as usize + 2];
    for op in ops {
        if let Some(v) = op.transition.observes() {
            waiting[v as usize] += 1;
        }
    }
    waiting
}
