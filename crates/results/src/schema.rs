//! The schema identifier of every JSON record coordbench writes, in one place so readers
//! and writers agree. Bump one when a field of its record changes meaning.

/// Identifies the layout of run.json; bump when a field changes meaning.
pub const RUN_SCHEMA: &str = "coordbench.run/1";

/// Identifies the layout of a sweep's run.json.
pub const SWEEP_SCHEMA: &str = "coordbench.sweep/1";

/// Identifies the layout of capacity.json.
pub const CAPACITY_SCHEMA: &str = "coordbench.capacity/1";

/// Identifies the layout of gate.json.
pub const GATE_SCHEMA: &str = "coordbench.gate/1";

/// Names the layout of provenance.json; bump when a field changes meaning.
pub const PROVENANCE_SCHEMA: &str = "coordbench.server-install/1";
