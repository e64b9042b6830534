//! Operations recorded by kind (kv-mixed's reads and writes) beside the combined figures:
//! per kind its successes, errors and latency histogram for one interval. Allocated only
//! once an interval holds a classified operation, so single-kind workloads pay nothing.

use coordbench_workloads::histogram::latency_histogram;
use coordbench_workloads::OpClass;
use hdrhistogram::Histogram;

/// One kind's part of an interval.
#[derive(Debug, Clone)]
pub struct ClassStats {
    /// Operations of this kind that completed successfully.
    pub ops: u64,
    /// Operations of this kind that failed (timeouts included).
    pub errors: u64,
    /// Latency as in the combined histogram (timeouts at the timeout), µs.
    pub latency: Histogram<u64>,
}

impl ClassStats {
    fn new() -> Self {
        ClassStats {
            ops: 0,
            errors: 0,
            latency: latency_histogram(),
        }
    }

    fn merge(&mut self, other: &ClassStats) {
        self.ops += other.ops;
        self.errors += other.errors;
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
    }
}

/// Reads and writes of one interval, apart.
#[derive(Debug, Clone)]
pub struct ClassSplit {
    pub read: ClassStats,
    pub write: ClassStats,
}

impl ClassSplit {
    pub fn new() -> Self {
        ClassSplit {
            read: ClassStats::new(),
            write: ClassStats::new(),
        }
    }

    pub fn of(&self, class: OpClass) -> &ClassStats {
        match class {
            OpClass::Read => &self.read,
            OpClass::Write => &self.write,
        }
    }

    pub fn of_mut(&mut self, class: OpClass) -> &mut ClassStats {
        match class {
            OpClass::Read => &mut self.read,
            OpClass::Write => &mut self.write,
        }
    }

    pub fn merge(&mut self, other: &ClassSplit) {
        self.read.merge(&other.read);
        self.write.merge(&other.write);
    }
}

impl Default for ClassSplit {
    fn default() -> Self {
        Self::new()
    }
}

/// The kinds in the order results list them.
pub const CLASSES: [OpClass; 2] = [OpClass::Read, OpClass::Write];
