//! Stale reads, counted on their own (not by the search) in O(n log n) per key.
//!
//! A read is **stale** when it returned a value v although v had certainly been overwritten
//! in real time before the read began: some completed write of another value (a Write
//! acknowledged, or a CAS applied) was invoked after v's producer completed and completed
//! before the read was invoked. For a read of the absent key (v = None), any write that
//! completed before the read was invoked counts. Reads of a value whose producer is
//! indeterminate are not counted (it may have taken effect at any time), nor reads of a
//! value nobody wrote (the search reports those). Every stale read makes the history
//! non-linearizable; the converse does not hold.

use std::collections::HashMap;

use super::history::{Call, Op, Ret};

/// Stale reads among one key's ops.
pub fn count_stale_reads(key_ops: &[&Op]) -> u64 {
    stale_reads(key_ops).count() as u64
}

/// The first stale read of one key's ops (given in invoke order) and a write that had
/// overwritten its value before it began, as positions in `key_ops`.
pub fn first_stale_read(key_ops: &[&Op]) -> Option<(usize, usize)> {
    stale_reads(key_ops).next()
}

/// Every stale read, with the completed overwrite that makes it stale.
fn stale_reads<'a>(key_ops: &'a [&'a Op]) -> impl Iterator<Item = (usize, usize)> + 'a {
    // Completed writes: (invoke, complete, position), sorted by invoke.
    let mut writes: Vec<(u64, u64, usize)> = Vec::new();
    let mut producer_completed: HashMap<&str, u64> = HashMap::new();
    for (at, op) in key_ops.iter().enumerate() {
        let applied = matches!(op.ret, Some(Ret::Written | Ret::CasApplied));
        if let (true, Some(complete), Some(value)) = (applied, op.complete_us, op.written_value()) {
            writes.push((op.invoke_us, complete, at));
            producer_completed.insert(value, complete);
        }
    }
    writes.sort_unstable();
    // earliest[i]: the write completing first among writes[i..] (completion, position).
    let mut earliest = vec![(u64::MAX, usize::MAX); writes.len() + 1];
    for i in (0..writes.len()).rev() {
        earliest[i] = earliest[i + 1].min((writes[i].1, writes[i].2));
    }
    key_ops.iter().enumerate().filter_map(move |(at, op)| {
        let (Call::Read, Some(Ret::Read { value })) = (&op.call, &op.ret) else {
            return None;
        };
        let first_later_write = match value {
            None => 0,
            Some(v) => {
                let completed = *producer_completed.get(v.as_str())?;
                writes.partition_point(|&(invoke, _, _)| invoke <= completed)
            }
        };
        let (completed, overwrite) = earliest[first_later_write];
        (completed < op.invoke_us).then_some((at, overwrite))
    })
}
