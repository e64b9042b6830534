//! The machine a run happened on: CPU, cores, memory, OS, kernel, and the code that ran.
//! Stored in run.json so results from different machines are never confused.

use serde::{Deserialize, Serialize};
use sysinfo::System;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: Option<String>,
    pub cpu_model: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub os: Option<String>,
    pub kernel: Option<String>,
    pub coordbench_version: String,
    pub git_commit: String,
}

impl Environment {
    pub fn capture() -> Self {
        let mut system = System::new();
        system.refresh_cpu_all();
        system.refresh_memory();
        let cpu_model = system
            .cpus()
            .first()
            .map(|c| c.brand().trim().to_string())
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| "unknown".into());
        Environment {
            hostname: System::host_name(),
            cpu_model,
            cores: system.cpus().len(),
            memory_bytes: system.total_memory(),
            os: System::long_os_version(),
            kernel: System::kernel_version(),
            coordbench_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: env!("COORDBENCH_GIT_COMMIT").to_string(),
        }
    }
}
