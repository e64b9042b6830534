//! What a server is configured with: its cluster's members and tunables.

use std::time::Duration;

use coordbench_kv::AutoCompaction;

/// One member of the cluster, as etcd's `Cluster.MemberList` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    /// The member id; must equal the id the member's [`coordbench_node::NodeStatus`] reports.
    pub id: u64,
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
}

/// Tunables of the etcd API layer. `Default` gives etcd's defaults where etcd has one.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Cluster id sent in response headers; `None` derives one from the member ids.
    pub cluster_id: Option<u64>,
    /// Version reported by `Maintenance.Status` (etcdctl and clients parse it as semver).
    pub version: String,
    /// Requested lease TTLs are raised to at least this many seconds. etcd's minimum is
    /// 1.5 election timeouts rounded up: 2 s with its default 1 s election timeout.
    pub min_lease_ttl_secs: i64,
    /// How often the leader looks for expired leases and checkpoints due (etcd: every
    /// 500 ms).
    pub lease_tick: Duration,
    /// Deliveries (one watcher's events of one apply) queued per watch stream (per internal
    /// waiter) before the stream's watchers that receive more are set aside, to catch up
    /// from history once the stream has sent what it queued. Apply never waits.
    pub watch_buffer: usize,
    /// How often watchers that asked for progress notifications and got no events are
    /// sent one (etcd's `--experimental-watch-progress-notify-interval`, 10 min).
    pub watch_progress_interval: Duration,
    /// Largest command accepted into the log (etcd's `--max-request-bytes`, 1.5 MiB).
    pub max_request_bytes: usize,
    /// A simple token is dropped this long after its last use (etcd's `--auth-token-ttl`,
    /// 300 s).
    pub auth_token_ttl: Duration,
    /// bcrypt's cost for password hashes (etcd's `--bcrypt-cost`, 10).
    pub bcrypt_cost: u32,
    /// The leader compacts the history on this setting (etcd's `--auto-compaction-mode`
    /// and `--auto-compaction-retention`); `None`: never, etcd's default.
    pub auto_compaction: Option<AutoCompaction>,
    /// Serve TLS with this configuration (certificate, and the CA client certificates must
    /// be signed by); `None`: plain HTTP/2.
    pub tls: Option<std::sync::Arc<coordbench_tls::rustls::ServerConfig>>,
    /// Test-only: answer one kind of request wrongly (see [`WrongAnswer`]); `None` always
    /// outside tests.
    pub wrong_answer: Option<WrongAnswer>,
}

/// Test-only: a request the server answers wrongly on purpose, so that the differential
/// test against real etcd (tests/etcd_differential.rs) can show it catches a wrong answer
/// (`serve raft --wrong-answer KIND`, a hidden flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrongAnswer {
    /// `put-prev-kv`: Put answers without the prev_kv it was asked for.
    PutPrevKv,
}

impl std::str::FromStr for WrongAnswer {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "put-prev-kv" => Ok(WrongAnswer::PutPrevKv),
            _ => Err(format!(
                "raft answers no {s:?} wrongly (it knows put-prev-kv)"
            )),
        }
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            cluster_id: None,
            version: "3.5.0-coordbench".to_string(),
            min_lease_ttl_secs: 2,
            lease_tick: Duration::from_millis(500),
            watch_buffer: 1024,
            watch_progress_interval: Duration::from_secs(600),
            max_request_bytes: 1536 * 1024,
            auth_token_ttl: Duration::from_secs(300),
            bcrypt_cost: 10,
            auto_compaction: None,
            tls: None,
            wrong_answer: None,
        }
    }
}

/// A cluster id derived from the member ids (FNV-1a over the sorted ids), so that every
/// member of one configuration reports the same id without being told it.
pub fn derive_cluster_id(members: &[MemberInfo]) -> u64 {
    let mut ids: Vec<u64> = members.iter().map(|m| m.id).collect();
    ids.sort_unstable();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in ids.iter().flat_map(|id| id.to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
