//! The sequential register each key is checked against: values interned to small
//! integers, and each op's effect as a [`Transition`] on the register's current value.
//!
//! Read returns the current value; Write sets it; Cas applies iff current == expected (then
//! sets new); `CasRejected { current: Some(c) }` requires current == c (and c != expected);
//! `CasRejected { current: None }` requires current != expected.

use std::collections::HashMap;

use super::history::{Call, Op, Ret};

/// An interned register value; [`ABSENT`] is the key not existing (every key starts so).
pub type Value = u32;
pub const ABSENT: Value = 0;

/// Maps the values of one key's history to [`Value`]s.
#[derive(Debug, Default)]
pub struct Interner<'a> {
    ids: HashMap<&'a str, Value>,
}

impl<'a> Interner<'a> {
    pub fn intern(&mut self, value: Option<&'a str>) -> Value {
        let Some(value) = value else { return ABSENT };
        let next = self.ids.len() as Value + 1;
        *self.ids.entry(value).or_insert(next)
    }
}

/// What an op does to the register, if it is linearized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Requires current == v; leaves it.
    Read(Value),
    /// Sets v.
    Write(Value),
    /// Requires current == expected; sets new.
    Cas { expected: Value, new: Value },
    /// Requires current != v; leaves it (a rejected CAS whose current value is unknown).
    NotEqual(Value),
    /// Fits no register state (a CAS rejected although the reported current is expected).
    Impossible,
}

impl Transition {
    /// The value after this transition from `current`, or `None` if it cannot happen.
    pub fn apply(self, current: Value) -> Option<Value> {
        match self {
            Transition::Read(v) => (current == v).then_some(current),
            Transition::Write(v) => Some(v),
            Transition::Cas { expected, new } => (current == expected).then_some(new),
            Transition::NotEqual(v) => (current != v).then_some(current),
            Transition::Impossible => None,
        }
    }

    /// The value this transition requires to be current, if it requires one.
    pub fn observes(self) -> Option<Value> {
        match self {
            Transition::Read(v) | Transition::Cas { expected: v, .. } => Some(v),
            _ => None,
        }
    }

    /// Whether it replaces the current value (by another: values are unique).
    pub fn overwrites(self) -> bool {
        matches!(self, Transition::Write(_) | Transition::Cas { .. })
    }

    /// The transition of `op`: from its result if it completed, else the effect it would
    /// have had (an indeterminate read has none: `None`). `Failed` ops have none either.
    pub fn of<'a>(op: &'a Op, values: &mut Interner<'a>) -> Option<Transition> {
        let transition = match (&op.call, &op.ret) {
            (_, Some(Ret::Failed)) | (Call::Read, None) => return None,
            (Call::Read, Some(Ret::Read { value })) => {
                Transition::Read(values.intern(value.as_deref()))
            }
            (Call::Write { value }, None | Some(Ret::Written)) => {
                Transition::Write(values.intern(Some(value)))
            }
            (Call::Cas { expected, new }, None | Some(Ret::CasApplied)) => Transition::Cas {
                expected: values.intern(expected.as_deref()),
                new: values.intern(Some(new)),
            },
            (Call::Cas { expected, .. }, Some(Ret::CasRejected { current: None })) => {
                Transition::NotEqual(values.intern(expected.as_deref()))
            }
            (
                Call::Cas { expected, .. },
                Some(Ret::CasRejected {
                    current: Some(current),
                }),
            ) => {
                if current == expected {
                    Transition::Impossible
                } else {
                    Transition::Read(values.intern(current.as_deref()))
                }
            }
            // Mismatched call and result (refused by validation).
            _ => Transition::Impossible,
        };
        Some(transition)
    }
}

/// The value an op observes (depends on) if it is linearized, `None` for none or for the
/// absent key: a read's result, a rejected CAS's reported current, an applied (or
/// possibly applied) CAS's expected value. Its producer is the one op that wrote it.
pub fn observed_value(op: &Op) -> Option<&str> {
    match (&op.call, &op.ret) {
        (_, Some(Ret::Failed)) => None,
        (Call::Read, Some(Ret::Read { value })) => value.as_deref(),
        (Call::Cas { .. }, Some(Ret::CasRejected { current })) => current.as_ref()?.as_deref(),
        (Call::Cas { expected, .. }, None | Some(Ret::CasApplied)) => expected.as_deref(),
        _ => None,
    }
}
