//! State put in place before the first window (once per cluster, so a capacity search's
//! windows share it): `--preload-keys N` fills the store with N keys of `--value-size`
//! bytes, in batches, with a progress bar on a terminal (the kv workloads then use those
//! keys: their `--keys` defaults to N); `--preload-watchers` and `--preload-sessions` hold
//! idle watchers and sessions open beside the workload, so a sweep can measure what each
//! costs the server (workloads/state-scaling.toml).

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use coordbench_drivers::Coordinator;
use coordbench_workloads::preload::{fill_keys, Held, PRELOAD};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::config::RunConfig;

#[derive(Debug, Clone, Default, Args)]
pub struct PreloadArgs {
    /// Fill the store with this many keys of --value-size bytes before the window (in
    /// batches, with a progress bar); kv workloads then use them (--keys defaults to N).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub preload_keys: Option<u64>,

    /// Hold this many idle value watchers (100 per session) on the kv keys open while the
    /// window runs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub preload_watchers: Option<u64>,

    /// Hold this many idle sessions open while the window runs, each with a lease (etcd
    /// API) or an ephemeral node (ZooKeeper's).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub preload_sessions: Option<u64>,
}

/// What a run preloads, as run.json and summary.csv record it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Preload {
    #[serde(rename = "preload_keys")]
    pub keys: Option<usize>,
    #[serde(rename = "preload_watchers")]
    pub watchers: Option<usize>,
    #[serde(rename = "preload_sessions")]
    pub sessions: Option<usize>,
}

impl Preload {
    pub fn of(args: &PreloadArgs) -> Self {
        let n = |v: Option<u64>| v.map(|n| n as usize);
        Preload {
            keys: n(args.preload_keys),
            watchers: n(args.preload_watchers),
            sessions: n(args.preload_sessions),
        }
    }
}

/// How long closing held sessions may take.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

/// Writes the configured keys and opens the held watchers and sessions; an error if
/// either fails or `stop` is cancelled.
pub async fn fill(
    config: &RunConfig,
    coordinator: &Arc<dyn Coordinator>,
    stop: &CancellationToken,
    shown: bool,
) -> anyhow::Result<Held> {
    let p = config.preload;
    let work = async {
        if let Some(n) = p.keys {
            write_keys(n, config.value_size, coordinator, shown).await?;
        }
        let (watchers, sessions) = (p.watchers.unwrap_or(0), p.sessions.unwrap_or(0));
        Held::open(coordinator, watchers, config.keys, sessions)
            .await
            .map_err(|e| {
                anyhow::anyhow!("opening {watchers} watchers and {sessions} sessions: {e}")
            })
    };
    tokio::select! {
        r = work => r,
        _ = stop.cancelled() => anyhow::bail!("interrupted while preloading"),
    }
}

/// Closes what [`fill`] holds open (bounded).
pub async fn release(held: Held) {
    held.close(CLOSE_BOUND).await;
}

async fn write_keys(
    n: usize,
    value_size: usize,
    coordinator: &Arc<dyn Coordinator>,
    shown: bool,
) -> anyhow::Result<()> {
    let bar = progress_bar(n as u64, shown);
    let value = Arc::new(vec![b'x'; value_size]);
    let on_batch = |done: usize| bar.inc(done as u64);
    let written = fill_keys(coordinator, 0..n, value, PRELOAD, &on_batch).await;
    bar.finish_and_clear();
    written.map_err(|e| anyhow::anyhow!("preloading {n} keys: {e}"))
}

fn progress_bar(total: u64, shown: bool) -> ProgressBar {
    let target = if shown {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) =
        ProgressStyle::with_template("preloading keys {bar:30} {pos}/{len} ({per_sec}, eta {eta})")
    {
        bar.set_style(style);
    }
    bar
}
