//! What a server is configured with. `Default` gives ZooKeeper's defaults where it has one.

use std::sync::Arc;
use std::time::Duration;

use coordbench_tls::rustls::ServerConfig;

#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// This member's id (ZooKeeper's `myid`), reported by `conf`.
    pub server_id: u64,
    /// Members in the ensemble; 1 reports `Mode: standalone`.
    pub cluster_size: usize,
    /// Version reported by `srvr`, `stat` and `mntr`.
    pub version: String,
    /// ZooKeeper's `tickTime`: session timeouts are negotiated within 2..=20 ticks, and
    /// session touches and expiry checks run every tick.
    pub tick_time: Duration,
    /// Overrides the 2-tick minimum session timeout.
    pub min_session_timeout: Option<Duration>,
    /// Overrides the 20-tick maximum session timeout.
    pub max_session_timeout: Option<Duration>,
    /// How often the leader looks for empty containers and expired TTL nodes (ZooKeeper's
    /// `znode.container.checkIntervalMs`, 60 s).
    pub container_check_interval: Duration,
    /// Largest frame a client may send (ZooKeeper's `jute.maxbuffer`, 1 MiB); a larger
    /// one closes its connection.
    pub max_frame_bytes: usize,
    /// Frames (replies and notifications) queued per connection. A connection whose queue
    /// is full when a notification arrives is closed: its client reconnects and re-sets
    /// its watches, learning what it missed (apply never waits for a slow client).
    pub outbound_queue: usize,
    /// How long a client may take to send its ConnectRequest, and a reply write may take.
    pub io_timeout: Duration,
    /// Connections one client address may hold at once (ZooKeeper's `maxClientCnxns`, 60);
    /// further ones are closed as they are accepted. 0: unlimited.
    pub max_client_cnxns: usize,
    /// Refuse every request but addauth from a connection that has not authenticated
    /// (ZooKeeper's `enforce.auth.enabled` with `enforce.auth.schemes=digest`): it is
    /// answered SESSION_CLOSED_REQUIRE_AUTH (-124) and closed.
    pub enforce_auth: bool,
    /// Serve the client port over TLS only (ZooKeeper's `secureClientPort`): every
    /// connection handshakes first, within `io_timeout`; four-letter words are answered
    /// over TLS too.
    pub tls: Option<Arc<ServerConfig>>,
    /// Test-only: answer one kind of request wrongly (see [`WrongAnswer`]); `None` always
    /// outside tests.
    pub wrong_answer: Option<WrongAnswer>,
}

/// Test-only: a request the server answers wrongly on purpose, so that the differential
/// test against real ZooKeeper (tests/zk_differential.rs) can show it catches a wrong
/// answer (`serve zab --wrong-answer KIND`, a hidden flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrongAnswer {
    /// `get-data-children`: getData's stat counts one child too many.
    GetDataChildren,
}

impl std::str::FromStr for WrongAnswer {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "get-data-children" => Ok(WrongAnswer::GetDataChildren),
            _ => Err(format!(
                "zab answers no {s:?} wrongly (it knows get-data-children)"
            )),
        }
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            server_id: 1,
            cluster_size: 1,
            version: "3.8.0-coordbench".to_string(),
            tick_time: Duration::from_millis(2000),
            min_session_timeout: None,
            max_session_timeout: None,
            container_check_interval: Duration::from_secs(60),
            max_frame_bytes: 1 << 20,
            outbound_queue: 1024,
            io_timeout: Duration::from_secs(30),
            max_client_cnxns: 60,
            enforce_auth: false,
            tls: None,
            wrong_answer: None,
        }
    }
}

impl ServeOptions {
    pub fn min_session_timeout(&self) -> Duration {
        self.min_session_timeout.unwrap_or(self.tick_time * 2)
    }

    pub fn max_session_timeout(&self) -> Duration {
        self.max_session_timeout.unwrap_or(self.tick_time * 20)
    }

    /// The timeout granted for a requested one (ms), as ZooKeeper negotiates it.
    pub fn negotiate(&self, requested_ms: i32) -> i32 {
        let ms = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
        let (lo, hi) = (
            ms(self.min_session_timeout()),
            ms(self.max_session_timeout()),
        );
        requested_ms.clamp(lo, hi.max(lo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_clamped_to_ticks() {
        let o = ServeOptions::default();
        assert_eq!(o.negotiate(1), 4000);
        assert_eq!(o.negotiate(30_000), 30_000);
        assert_eq!(o.negotiate(i32::MAX), 40_000);
        assert_eq!(o.negotiate(-5), 4000);
    }
}
