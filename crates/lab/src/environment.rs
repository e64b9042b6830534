//! The machine a run happened on: CPU, cores, memory, OS, kernel, and the code that ran.
//! Stored in run.json so results from different machines are never confused.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sysinfo::System;

/// The code that runs: its version and git commit, which only the binary knows (it is
/// built with the commit); every [`Environment`] records them.
#[derive(Debug, Clone, Copy)]
pub struct Build {
    pub version: &'static str,
    pub git_commit: &'static str,
}

static BUILD: OnceLock<Build> = OnceLock::new();

/// Sets the build every later [`Environment::capture`] records; the binary calls it first
/// thing. Without it (a library test), the build is recorded as `unknown`.
pub fn record_build(build: Build) {
    let _ = BUILD.set(build);
}

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
            coordbench_version: BUILD.get().map_or("unknown", |b| b.version).to_string(),
            git_commit: BUILD.get().map_or("unknown", |b| b.git_commit).to_string(),
        }
    }
}
