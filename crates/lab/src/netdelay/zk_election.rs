//! ZooKeeper's election handshake, as it must cross the proxy.
//!
//! A server that dials a peer's election port first sends its protocol version, its id
//! and its own election address(es) (QuorumCnxManager's initial message: i64 version
//! -65536 or -65535, i64 id, i32 length, `host:port[|host:port...]`). A peer with a higher
//! id keeps only connections it dialed itself: it closes this one and dials back the
//! address the message named (3.5 and later). That address is where the dialer listens,
//! so the connection back would bypass the proxy, its delay and its partitions. The proxy
//! therefore rewrites the address to the route of the reverse link.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const PROTOCOL_V1: i64 = -65536;
const PROTOCOL_V2: i64 = -65535;
/// ZooKeeper's own bound on the address list is far larger; real lists are tens of bytes.
const MAX_ADDRESSES: usize = 4096;
/// The dialer sends its handshake as soon as it connected.
const READ_BOUND: Duration = Duration::from_secs(5);

/// Reads the dialer's handshake from `inbound` and returns the bytes to send upstream in
/// its place: the address replaced by `back`. Other first bytes (the pre-3.5 handshake,
/// which is only the id, or anything unexpected) are returned unchanged.
pub async fn rewrite_handshake(inbound: &mut TcpStream, back: SocketAddr) -> io::Result<Vec<u8>> {
    tokio::time::timeout(READ_BOUND, read_and_rewrite(inbound, back))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no election handshake"))?
}

async fn read_and_rewrite(inbound: &mut TcpStream, back: SocketAddr) -> io::Result<Vec<u8>> {
    let mut head = [0u8; 20];
    inbound.read_exact(&mut head[..8]).await?;
    let version = i64::from_be_bytes(head[..8].try_into().expect("8 bytes"));
    if version != PROTOCOL_V1 && version != PROTOCOL_V2 {
        return Ok(head[..8].to_vec());
    }
    inbound.read_exact(&mut head[8..]).await?;
    let length = i32::from_be_bytes(head[16..20].try_into().expect("4 bytes"));
    let Some(length) = usize::try_from(length)
        .ok()
        .filter(|n| (1..=MAX_ADDRESSES).contains(n))
    else {
        return Ok(head.to_vec());
    };
    let mut addresses = vec![0u8; length];
    inbound.read_exact(&mut addresses).await?;
    Ok(handshake(&head[..16], back))
}

/// Version and id as received, then `back` as the only address.
fn handshake(version_and_id: &[u8], back: SocketAddr) -> Vec<u8> {
    let address = back.to_string().into_bytes();
    let mut out = version_and_id.to_vec();
    out.extend_from_slice(&(address.len() as i32).to_be_bytes());
    out.extend_from_slice(&address);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    async fn through(sent: Vec<u8>, back: SocketAddr) -> (Vec<u8>, Vec<u8>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut dialer = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut inbound, _) = listener.accept().await.unwrap();
        dialer.write_all(&sent).await.unwrap();
        dialer.write_all(b"rest").await.unwrap();
        let first = rewrite_handshake(&mut inbound, back).await.unwrap();
        let mut rest = [0u8; 4];
        inbound.read_exact(&mut rest).await.unwrap();
        (first, rest.to_vec())
    }

    fn initial_message(version: i64, id: i64, addresses: &str) -> Vec<u8> {
        let mut m = version.to_be_bytes().to_vec();
        m.extend_from_slice(&id.to_be_bytes());
        m.extend_from_slice(&(addresses.len() as i32).to_be_bytes());
        m.extend_from_slice(addresses.as_bytes());
        m
    }

    #[tokio::test]
    async fn the_dialers_own_address_becomes_the_reverse_route() {
        let back: SocketAddr = "127.0.0.1:40123".parse().unwrap();
        for version in [PROTOCOL_V1, PROTOCOL_V2] {
            let sent = initial_message(version, 2, "127.0.0.1:3888|10.0.0.2:3888");
            let (first, rest) = through(sent, back).await;
            assert_eq!(first, initial_message(version, 2, "127.0.0.1:40123"));
            assert_eq!(rest, b"rest", "what follows the handshake is untouched");
        }
        // Before 3.5 the handshake is the id alone: nothing to rewrite.
        let (first, rest) = through(3i64.to_be_bytes().to_vec(), back).await;
        assert_eq!(
            (first, rest),
            (3i64.to_be_bytes().to_vec(), b"rest".to_vec())
        );
    }
}
