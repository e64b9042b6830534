//! ZooKeeper's four-letter-word admin commands (`ruok`, `srvr`, `mntr`, ...) over plain TCP
//! or, on a secure client port, over TLS: readiness checks when a cluster starts, leader
//! detection, server metrics later.
//!
//! The server answers a four-letter word on the client port and closes the connection, so
//! the reply is everything read until end of stream. Servers only answer the words in their
//! `4lw.commands.whitelist`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use coordbench_tls::rustls::pki_types::ServerName;
use coordbench_tls::rustls::ClientConfig;
use coordbench_tls::tokio_rustls::TlsConnector;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::tls::ZkTls;

/// Bound on connecting and on the whole exchange: a local server answers in milliseconds,
/// and a stalled one (paused, or still starting) must not stall its caller.
const TIMEOUT: Duration = Duration::from_secs(1);
/// Replies are a few KiB (`mntr`, `conf`); anything larger is not a four-letter reply.
const MAX_REPLY: u64 = 1 << 20;

/// Sends `cmd` (e.g. "ruok") to the server at `addr` ("127.0.0.1:2181"), over TLS when
/// `tls` is given, and returns its reply. An empty reply means the word is not
/// whitelisted (or the server is not serving).
pub async fn four_letter_word(addr: &str, cmd: &str, tls: Option<&ZkTls>) -> io::Result<String> {
    over(addr, cmd, tls.map(ZkTls::config)).await
}

/// Why TLS to the server at `addr` fails, in one line naming the flag to fix; `None` when
/// a four-letter word over TLS is answered (or fails for a reason that is not TLS's).
/// A session's failed handshake says only that the connection broke, so this is how a
/// refused or missing client certificate is told apart.
pub async fn diagnose_tls(addr: &str, tls: &ZkTls) -> Option<String> {
    let (config, seen) = coordbench_tls::noting_client_auth(&tls.config());
    match over(addr, "ruok", Some(config)).await {
        Ok(reply) if !reply.is_empty() => None,
        Ok(_) => coordbench_tls::describe_after_handshake(&seen),
        Err(e) => {
            coordbench_tls::describe(&e).or_else(|| coordbench_tls::describe_after_handshake(&seen))
        }
    }
}

/// A four-letter word, over TLS with `tls` when given.
async fn over(addr: &str, cmd: &str, tls: Option<Arc<ClientConfig>>) -> io::Result<String> {
    let exchange = async {
        let tcp = TcpStream::connect(addr).await?;
        match tls {
            None => exchange(tcp, cmd).await,
            Some(tls) => {
                let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
                let name = ServerName::try_from(host.to_string())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                let stream = TlsConnector::from(tls).connect(name, tcp).await?;
                exchange(stream, cmd).await
            }
        }
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

/// Writes the word and reads the reply until the server closes.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    cmd: &str,
) -> io::Result<String> {
    stream.write_all(cmd.as_bytes()).await?;
    stream.flush().await?;
    let mut reply = Vec::new();
    match (&mut stream).take(MAX_REPLY).read_to_end(&mut reply).await {
        Ok(_) => {}
        // A server that closes without TLS's close_notify (ZooKeeper's Netty) still
        // answered in full.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !reply.is_empty() => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
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
    let version = version.split("-${").next().unwrap_or(version);
    // Release builds append their git commit ("3.9.5-293c895a8d96..."): the release is
    // what a person compares; the commit says nothing more once the release is known.
    let release = match version.split_once('-') {
        Some((release, commit))
            if commit.len() >= 7 && commit.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            release
        }
        _ => version,
    };
    Some(release.to_string())
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
    fn versions_lose_an_unexpanded_placeholder_and_a_builds_commit() {
        let debian =
            "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n";
        assert_eq!(version(debian).as_deref(), Some("3.8.0"));
        let upstream = "Zookeeper version: 3.9.2-e454e8c7, built on 2024-02-12\n";
        assert_eq!(version(upstream).as_deref(), Some("3.9.2"));
        let full = "Zookeeper version: 3.9.5-293c895a8d966a3ecb92872be4a1daf87d725da2, built on 2026-02-11\n";
        assert_eq!(version(full).as_deref(), Some("3.9.5"));
        // zab's own suffix is a name, not a commit: it stays.
        let zab = "Zookeeper version: 3.8.0-coordbench, built on (coordbench)\n";
        assert_eq!(version(zab).as_deref(), Some("3.8.0-coordbench"));
    }

    #[tokio::test]
    async fn a_closed_port_is_an_error_not_a_hang() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port());
        let addr = format!("127.0.0.1:{}", port.expect("free port"));
        assert!(four_letter_word(&addr, "ruok", None).await.is_err());
    }
}
