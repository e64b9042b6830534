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

use std::time::Instant;

use super::memo::{LinSet, Memo, MemoFull};
use super::model::{Value, ABSENT};
use super::pruning::SearchOp;

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
    /// 0: applied its transition; 1: linearized as a no-op (optional ops only).
    choice: u8,
}

/// The search state of one key.
struct Search<'a> {
    ops: &'a [SearchOp],
    events: Events,
    head: u32,
    value: Value,
    stack: Vec<Frame>,
    set: LinSet,
    memo: Memo,
}

impl Search<'_> {
    /// Linearizes `op` with the first choice from `from` that the register allows and
    /// that reaches a configuration not yet cached.
    fn try_linearize(&mut self, op: u32, from: u8) -> Result<bool, MemoFull> {
        let search_op = &self.ops[op as usize];
        let last_choice = u8::from(search_op.optional);
        for choice in from..=last_choice {
            let after = if choice == 0 {
                search_op.transition.apply(self.value)
            } else {
                Some(self.value)
            };
            let Some(after) = after else { continue };
            self.set.insert(op);
            if self.memo.insert(&self.set, after)? {
                self.stack.push(Frame {
                    op,
                    before: self.value,
                    choice,
                });
                self.value = after;
                self.events.lift(op);
                return Ok(true);
            }
            self.set.remove_last(op);
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
        self.set.remove_last(frame.op);
        self.events.unlift(frame.op);
        if self.try_linearize(frame.op, frame.choice + 1)? {
            return Ok(Some(self.events.next[self.head as usize]));
        }
        Ok(Some(self.events.next[2 * frame.op as usize]))
    }
}

/// Searches for a linearization of `ops` (in invoke order) from the absent register.
pub fn search(ops: &[SearchOp], deadline: Instant) -> Outcome {
    let (events, head) = Events::new(ops);
    let mut s = Search {
        ops,
        events,
        head,
        value: ABSENT,
        stack: Vec::new(),
        set: LinSet::new(ops.len()),
        memo: Memo::default(),
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
