//! ZooKeeper's four-letter words on the client port: the connection's first 4 bytes name
//! the command; the server writes the answer and closes.
//!
//! - `ruok`: `imok`.
//! - `srvr`: version, latency, packets, connections, outstanding requests, zxid, mode,
//!   node count (ZooKeeper's layout, which tools parse line by line).
//! - `stat`: `srvr` with a client count section.
//! - `mntr`: `zk_*` key / tab / value lines.
//! - `conf`: the configuration as `key=value` lines.
//! - `isro`: `rw`. `wchs`: watch summary. `srst`: resets the counters.
//! - `envi`: `Environment:` then `key=value` lines in ZooKeeper's order; clients read the
//!   version from `zookeeper.version`, which is `srvr`'s version string. A Java server's
//!   `java.*` keys are left out (this server has no JVM); the `os.*`, `user.*` and
//!   `host.name` keys are this process's, as Java reports them.

use coordbench_node::Replicator;

use crate::core::Core;
use crate::state_machine::TreeStateMachine;

/// The words this server answers.
pub const WORDS: [&str; 9] = [
    "ruok", "srvr", "stat", "mntr", "conf", "isro", "wchs", "srst", "envi",
];

/// What ZooKeeper says instead of `srvr` / `stat` / `mntr` values when it has no quorum.
const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests\n";

struct Snapshot {
    zxid: i64,
    nodes: usize,
    ephemerals: usize,
    data_size: u64,
    sessions: usize,
}

fn snapshot<R: Replicator<TreeStateMachine>>(core: &Core<R>) -> Snapshot {
    core.replicator.read(|sm| {
        let t = sm.tree();
        Snapshot {
            zxid: t.last_zxid(),
            nodes: t.node_count(),
            ephemerals: t.ephemeral_count(),
            data_size: t.approximate_data_size(),
            sessions: t.sessions().count(),
        }
    })
}

/// The answer to `word` (one of [`WORDS`]).
pub(crate) fn answer<R: Replicator<TreeStateMachine>>(core: &Core<R>, word: &str) -> String {
    let serving = core.serving();
    match word {
        "ruok" => "imok".to_string(),
        "isro" => "rw".to_string(),
        "srst" => {
            core.stats.reset();
            "Server stats reset.\n".to_string()
        }
        "srvr" | "stat" if !serving => NOT_SERVING.to_string(),
        "srvr" => srvr(core, false),
        "stat" => srvr(core, true),
        "mntr" => mntr(core),
        "conf" => conf(core),
        "envi" => envi(&version(core)),
        "wchs" => format!(
            "{} connections watching {} paths\nTotal watches:{}\n",
            core.router.connection_count(),
            core.router.watched_paths(),
            core.router.watch_count()
        ),
        _ => String::new(),
    }
}

/// The version as `srvr`, `mntr` and `envi` show it (ZooKeeper's `Version.getFullVersion`:
/// the version, then where it was built).
fn version<R: Replicator<TreeStateMachine>>(core: &Core<R>) -> String {
    format!("{}, built on (coordbench)", core.options.version)
}

/// `envi`'s answer for a server of `version`.
fn envi(version: &str) -> String {
    let first_line = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.lines().next().map(str::to_string))
            .unwrap_or_else(|| "<NA>".to_string())
    };
    let env = |key: &str| std::env::var(key).unwrap_or_else(|_| "<NA>".to_string());
    // Java's names: amd64 for x86_64, Linux for linux.
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        other => other,
    };
    let os = match std::env::consts::OS {
        "linux" => "Linux",
        other => other,
    };
    let dir =
        std::env::current_dir().map_or_else(|_| "<NA>".to_string(), |d| d.display().to_string());
    let lines = [
        ("zookeeper.version", version.to_string()),
        ("host.name", first_line("/proc/sys/kernel/hostname")),
        ("os.name", os.to_string()),
        ("os.arch", arch.to_string()),
        ("os.version", first_line("/proc/sys/kernel/osrelease")),
        ("user.name", env("USER")),
        ("user.home", env("HOME")),
        ("user.dir", dir),
    ];
    let mut out = String::from("Environment:\n");
    for (k, v) in lines {
        out.push_str(&format!("{k}={v}\n"));
    }
    out
}

fn srvr<R: Replicator<TreeStateMachine>>(core: &Core<R>, with_clients: bool) -> String {
    let c = core.stats.counters();
    let s = snapshot(core);
    let connections = core.router.connection_count();
    let mut out = format!("Zookeeper version: {}\n", version(core));
    if with_clients {
        out.push_str(&format!("Clients:\n {connections} connected\n\n"));
    }
    out.push_str(&format!(
        "Latency min/avg/max: {}/{:.4}/{}\nReceived: {}\nSent: {}\nConnections: {}\nOutstanding: {}\nZxid: {:#x}\nMode: {}\nNode count: {}\n",
        c.min_latency_ms,
        c.avg_latency_ms,
        c.max_latency_ms,
        c.received,
        c.sent,
        connections,
        c.outstanding,
        s.zxid,
        core.mode(),
        s.nodes
    ));
    out
}

fn mntr<R: Replicator<TreeStateMachine>>(core: &Core<R>) -> String {
    let c = core.stats.counters();
    let s = snapshot(core);
    let state = if core.serving() {
        core.mode()
    } else {
        "not serving"
    };
    let lines: Vec<(&str, String)> = vec![
        ("zk_version", version(core)),
        ("zk_server_state", state.to_string()),
        ("zk_avg_latency", format!("{:.4}", c.avg_latency_ms)),
        ("zk_max_latency", c.max_latency_ms.to_string()),
        ("zk_min_latency", c.min_latency_ms.to_string()),
        ("zk_packets_received", c.received.to_string()),
        ("zk_packets_sent", c.sent.to_string()),
        (
            "zk_num_alive_connections",
            core.router.connection_count().to_string(),
        ),
        ("zk_outstanding_requests", c.outstanding.to_string()),
        ("zk_znode_count", s.nodes.to_string()),
        ("zk_watch_count", core.router.watch_count().to_string()),
        ("zk_ephemerals_count", s.ephemerals.to_string()),
        ("zk_approximate_data_size", s.data_size.to_string()),
        ("zk_global_sessions", s.sessions.to_string()),
        ("zk_last_zxid", s.zxid.to_string()),
        ("zk_uptime", c.uptime.as_millis().to_string()),
    ];
    lines
        .into_iter()
        .map(|(k, v)| format!("{k}\t{v}\n"))
        .collect()
}

fn conf<R: Replicator<TreeStateMachine>>(core: &Core<R>) -> String {
    let o = &core.options;
    format!(
        "serverId={}\ntickTime={}\nminSessionTimeout={}\nmaxSessionTimeout={}\njute.maxbuffer={}\nznode.container.checkIntervalMs={}\nclusterSize={}\n",
        o.server_id,
        o.tick_time.as_millis(),
        o.min_session_timeout().as_millis(),
        o.max_session_timeout().as_millis(),
        o.max_frame_bytes,
        o.container_check_interval.as_millis(),
        o.cluster_size,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn envi_names_the_version_first_in_zookeepers_shape() {
        let out = super::envi("3.8.0-coordbench, built on (coordbench)");
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("Environment:"));
        assert_eq!(
            lines.next(),
            Some("zookeeper.version=3.8.0-coordbench, built on (coordbench)")
        );
        assert!(lines.all(|l| l.split_once('=').is_some_and(|(k, _)| !k.is_empty())));
    }
}
