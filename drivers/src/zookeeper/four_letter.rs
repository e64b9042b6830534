//! ZooKeeper's four-letter-word admin commands (`ruok`, `srvr`, `mntr`, ...) over plain TCP:
//! readiness checks when a cluster starts, server metrics later.
//!
//! The server answers a four-letter word on the client port and closes the connection, so
//! the reply is everything read until end of stream. Servers only answer the words in their
//! `4lw.commands.whitelist`.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bound on connecting and on the whole exchange: a local server answers in milliseconds,
/// and a stalled one (paused, or still starting) must not stall its caller.
const TIMEOUT: Duration = Duration::from_secs(1);
/// Replies are a few KiB (`mntr`, `conf`); anything larger is not a four-letter reply.
const MAX_REPLY: u64 = 1 << 20;

/// Sends `cmd` (e.g. "ruok") to the server at `addr` ("127.0.0.1:2181") and returns its
/// reply. An empty reply means the word is not whitelisted (or the server is not serving).
pub async fn four_letter_word(addr: &str, cmd: &str) -> io::Result<String> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(cmd.as_bytes()).await?;
        let mut reply = Vec::new();
        stream.take(MAX_REPLY).read_to_end(&mut reply).await?;
        Ok(String::from_utf8_lossy(&reply).into_owned())
    };
    tokio::time::timeout(TIMEOUT, exchange).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "no reply to '{cmd}' from {addr} within {}ms",
                TIMEOUT.as_millis()
            ),
        )
    })?
}

/// The value of `key` in a `srvr`/`stat` style reply ("Mode: leader" → "leader").
pub fn field<'a>(reply: &'a str, key: &str) -> Option<&'a str> {
    reply.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The server version in a `srvr` reply: "Zookeeper version: 3.8.0-${mvngit.commit.id}, built
/// on ..." → "3.8.0" (Debian's build leaves the git placeholder unexpanded; a real
/// "3.9.2-e454e8c7" stays).
pub fn version(srvr_reply: &str) -> Option<String> {
    let reported = field(srvr_reply, "Zookeeper version")?;
    let version = reported.split(',').next().unwrap_or(reported).trim();
    Some(version.split("-${").next().unwrap_or(version).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_a_srvr_reply_are_found_by_key() {
        let reply = "Zookeeper version: 3.8.0-abc, built on 2024-12-29 17:54 UTC\n\
                     Latency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(field(reply, "Mode"), Some("follower"));
        assert_eq!(
            field(reply, "Zookeeper version"),
            Some("3.8.0-abc, built on 2024-12-29 17:54 UTC")
        );
        assert_eq!(field(reply, "Zxid"), None);
    }

    #[test]
    fn versions_lose_only_an_unexpanded_placeholder() {
        let debian =
            "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n";
        assert_eq!(version(debian).as_deref(), Some("3.8.0"));
        let upstream = "Zookeeper version: 3.9.2-e454e8c7, built on 2024-02-12\n";
        assert_eq!(version(upstream).as_deref(), Some("3.9.2-e454e8c7"));
    }

    #[tokio::test]
    async fn a_closed_port_is_an_error_not_a_hang() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port());
        let addr = format!("127.0.0.1:{}", port.expect("free port"));
        assert!(four_letter_word(&addr, "ruok").await.is_err());
    }
}
