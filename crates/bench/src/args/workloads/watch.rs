//! The config-watch workload's option, `--watchers`, which also counts discovery's
//! watchers and election's observers: each workload's default, the sessions the watchers
//! are spread over, config-watch's single writer and its pace, and what run.json records.

use clap::Args;
use serde::Serialize;

use crate::args::load::{LoadOptions, Shape};

/// config-watch: the writer's default updates per second.
pub const DEFAULT_UPDATE_RATE: f64 = 10.0;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "config-watch workload (--watchers also discovery, election)")]
pub struct WatchOptions {
    /// discovery, config-watch: watchers (defaults 4, 100); election: observers (default 2).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub watchers: Option<u32>,
}

/// What run.json keeps of the watchers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WatchRecord {
    /// election: observers; discovery, config-watch: watchers.
    pub watchers: Option<usize>,
    /// discovery, config-watch: sessions the watchers are spread over.
    pub watch_sessions: Option<usize>,
}

impl WatchOptions {
    /// `--watchers`, or the workload's default.
    fn watchers_or(&self, default: usize) -> usize {
        self.watchers.map_or(default, |v| v as usize)
    }

    /// election: the observers (default 2).
    pub(super) fn observers(&self) -> WatchRecord {
        WatchRecord {
            watchers: Some(self.watchers_or(2)),
            watch_sessions: None,
        }
    }

    /// discovery: the watchers (default 4), over `--conns` sessions (default one each).
    pub(super) fn discovery(&self, load: &LoadOptions) -> WatchRecord {
        let watchers = self.watchers_or(4);
        WatchRecord {
            watchers: Some(watchers),
            watch_sessions: Some(load.given_conns().unwrap_or(watchers).min(watchers)),
        }
    }

    /// config-watch: the watchers (default 100) over `--conns` sessions (default at most
    /// 16), and one writer updating at `--rate` (default [`DEFAULT_UPDATE_RATE`]).
    pub(super) fn config_watch(&self, load: &LoadOptions, shape: &mut Shape) -> WatchRecord {
        let watchers = self.watchers_or(100);
        let sessions = load.given_conns().unwrap_or(watchers.min(16)).min(watchers);
        shape.clients = 1;
        shape.conns = sessions;
        shape.rate = Some(load.rate.unwrap_or(DEFAULT_UPDATE_RATE));
        WatchRecord {
            watchers: Some(watchers),
            watch_sessions: Some(sessions),
        }
    }
}
