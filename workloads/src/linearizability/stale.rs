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
    // Completed writes: (invoke, complete), sorted by invoke.
    let mut writes: Vec<(u64, u64)> = Vec::new();
    let mut producer_completed: HashMap<&str, u64> = HashMap::new();
    for op in key_ops {
        let applied = matches!(op.ret, Some(Ret::Written | Ret::CasApplied));
        if let (true, Some(complete), Some(value)) = (applied, op.complete_us, op.written_value()) {
            writes.push((op.invoke_us, complete));
            producer_completed.insert(value, complete);
        }
    }
    writes.sort_unstable();
    // earliest_completion[i]: the earliest completion among writes[i..].
    let mut earliest_completion = vec![u64::MAX; writes.len() + 1];
    for i in (0..writes.len()).rev() {
        earliest_completion[i] = earliest_completion[i + 1].min(writes[i].1);
    }
    let mut stale = 0;
    for op in key_ops {
        let (Call::Read, Some(Ret::Read { value })) = (&op.call, &op.ret) else {
            continue;
        };
        let first_later_write = match value {
            None => 0,
            Some(v) => match producer_completed.get(v.as_str()) {
                Some(&completed) => writes.partition_point(|&(invoke, _)| invoke <= completed),
                None => continue,
            },
        };
        if earliest_completion[first_later_write] < op.invoke_us {
            stale += 1;
        }
    }
    stale
}
