//! The load generator's own options: where the run writes its results, the CPUs and
//! worker threads it runs on, and whether it shows a live status line.

use std::path::PathBuf;

use clap::Args;
use coordbench_lab::affinity::CpuList;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Generator")]
pub struct GeneratorOptions {
    /// Results directory (default: results/<UTC time>-<target>-<workload>/).
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Pin the load generator to these CPUs (like taskset -c: 0, 0-1, 0,2).
    #[arg(long, value_name = "CPUS")]
    pub pin_client: Option<CpuList>,

    /// Worker threads of the load generator's runtime (default: one per CPU it may use,
    /// after --pin-client). One worker spends less CPU per operation (no wake-ups between
    /// workers; RESULTS.md, the generator's own cost) but caps the generator at one core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub client_threads: Option<u16>,

    /// Run the generator's threads at a real-time priority (SCHED_FIFO 10), so nothing
    /// else on its CPUs delays an open-loop start; needs root or CAP_SYS_NICE (else a
    /// warning, and normal priority). Pin the servers elsewhere (--pin-client 0
    /// --pin-servers 1): a busy generator would otherwise starve them. The pacer then
    /// parks until each start instead of spinning. For rates that leave the generator idle
    /// between starts (100,000/s here): one that keeps its cores busy (1,000,000/s) is
    /// paused by the kernel's real-time throttling 50 ms of every second.
    #[arg(long)]
    pub realtime: bool,

    /// No live status line.
    #[arg(long)]
    pub quiet: bool,
}

impl GeneratorOptions {
    /// `--pin-client` must name CPUs this process may use.
    pub fn check(&self) -> Result<(), String> {
        match &self.pin_client {
            Some(list) => list
                .check_available()
                .map_err(|e| format!("--pin-client: {e}")),
            None => Ok(()),
        }
    }
}
