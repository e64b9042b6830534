//! `--preload-keys N`: fills the store with N keys of `--value-size` bytes before the
//! first window (once per cluster, so a capacity search's probes share it), in batches,
//! with a progress bar on a terminal. The kv workloads then read and write those keys
//! (their `--keys` defaults to N) instead of writing their own first.

use std::sync::Arc;

use clap::Args;
use coordbench_drivers::Coordinator;
use coordbench_workloads::preload::{fill_keys, PRELOAD};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio_util::sync::CancellationToken;

use crate::config::RunConfig;

#[derive(Debug, Clone, Default, Args)]
pub struct PreloadArgs {
    /// Fill the store with this many keys of --value-size bytes before the window (in
    /// batches, with a progress bar); kv workloads then use them (--keys defaults to N).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub preload_keys: Option<u64>,
}

/// Writes the configured preload, if any; an error if it fails or `stop` is cancelled.
pub async fn fill(
    config: &RunConfig,
    coordinator: &Arc<dyn Coordinator>,
    stop: &CancellationToken,
    shown: bool,
) -> anyhow::Result<()> {
    let Some(n) = config.preload_keys else {
        return Ok(());
    };
    let bar = progress_bar(n as u64, shown);
    let value = Arc::new(vec![b'x'; config.value_size]);
    let on_batch = |done: usize| bar.inc(done as u64);
    let written = tokio::select! {
        r = fill_keys(coordinator, 0..n, value, PRELOAD, &on_batch) => r,
        _ = stop.cancelled() => {
            bar.abandon();
            anyhow::bail!("interrupted while preloading keys");
        }
    };
    bar.finish_and_clear();
    written.map_err(|e| anyhow::anyhow!("preloading {n} keys: {e}"))
}

fn progress_bar(total: u64, shown: bool) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if !shown {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) =
        ProgressStyle::with_template("preloading keys {bar:30} {pos}/{len} ({per_sec}, eta {eta})")
    {
        bar.set_style(style);
    }
    bar
}
