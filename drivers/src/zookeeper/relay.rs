//! A pausable TCP relay on 127.0.0.1 for one ZooKeeper session, so the session can be
//! frozen ([`crate::Session::freeze`]) although the client's session task sends its pings
//! itself.
//!
//! One listener per server endpoint; the session's connect string names the listeners, so
//! the client still fails over between servers as it would directly. Each accepted
//! connection is forwarded to its server. While the [`FreezeGate`] is shut, nothing is
//! forwarded either way and no new connection reaches the server, but every connection
//! stays open, as if the client process were stopped: the server hears nothing and expires
//! the session after its timeout. When the gate opens, what was held back flows in order,
//! then whatever the server did meanwhile (closing the expired session's connection) reaches
//! the client.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::FreezeGate;

const CHUNK: usize = 16 * 1024;

/// A running relay; dropping it closes its listeners and every connection through it.
pub(crate) struct Relay {
    listen: Vec<SocketAddr>,
    gate: FreezeGate,
    listeners: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Listens on a fresh 127.0.0.1 port for each of `servers` (`host:port`).
    pub(crate) async fn start(servers: &[String]) -> std::io::Result<Relay> {
        let gate = FreezeGate::default();
        let mut listen = Vec::with_capacity(servers.len());
        let mut listeners = Vec::with_capacity(servers.len());
        for server in servers {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            listen.push(listener.local_addr()?);
            listeners.push(tokio::spawn(serve(listener, server.clone(), gate.clone())));
        }
        Ok(Relay {
            listen,
            gate,
            listeners,
        })
    }

    /// The connect string that reaches the servers through this relay.
    pub(crate) fn connect_string(&self) -> String {
        let addrs: Vec<String> = self.listen.iter().map(SocketAddr::to_string).collect();
        addrs.join(",")
    }

    /// The switch that freezes every connection through the relay.
    pub(crate) fn gate(&self) -> &FreezeGate {
        &self.gate
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Each listener task owns its connections' tasks (a JoinSet), which end with it.
        for listener in &self.listeners {
            listener.abort();
        }
    }
}

/// Accepts connections and forwards each to `server`.
async fn serve(listener: TcpListener, server: String, gate: FreezeGate) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(relay_connection(client, server.clone(), gate.clone()));
                }
                // Out of descriptors, say: try again shortly rather than spin.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            },
            // Reap finished connections so the set does not grow over a long run.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Connects to the server once the gate is open, then forwards both ways until both end.
/// A server that cannot be reached closes the client's connection, as a refused connect
/// would, and the client tries its next server.
async fn relay_connection(client: TcpStream, server: String, gate: FreezeGate) {
    gate.thawed().await;
    let Ok(upstream) = TcpStream::connect(&server).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = upstream.into_split();
    tokio::join!(
        pump(client_read, server_write, &gate),
        pump(server_read, client_write, &gate),
    );
}

/// Copies one direction, holding bytes (and the end of the stream) while the gate is shut.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, gate: &FreezeGate) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        // Not reading while frozen leaves the bytes in the kernel's buffers (and pushes back
        // on the sender once they fill), as with a stopped process.
        gate.thawed().await;
        let n = from.read(&mut buf).await.unwrap_or(0);
        // A chunk that arrived as the freeze began waits for it to end too.
        gate.thawed().await;
        if n == 0 {
            // Pass the half-close on: the other side learns the stream ended.
            let _ = to.shutdown().await;
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A relay to a fresh listener, a client connected through it, and the server's end.
    async fn connected() -> (Relay, TcpStream, TcpStream) {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = server.local_addr().unwrap().to_string();
        let relay = Relay::start(&[target]).await.unwrap();
        let client = TcpStream::connect(relay.connect_string()).await.unwrap();
        let (server_end, _) = tokio::time::timeout(Duration::from_secs(5), server.accept())
            .await
            .expect("the relay connects to the server")
            .unwrap();
        (relay, client, server_end)
    }

    /// Reads exactly `n` bytes within a bound.
    async fn read_n(stream: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut buf))
            .await
            .expect("bytes arrive")
            .unwrap();
        buf
    }

    /// Nothing arrives on `stream` within `d`.
    async fn silent_for(stream: &mut TcpStream, d: Duration) {
        let mut buf = [0u8; 64];
        match tokio::time::timeout(d, stream.read(&mut buf)).await {
            Err(_) => {}
            Ok(read) => panic!("read {read:?} through a frozen relay"),
        }
    }

    #[tokio::test]
    async fn bytes_flow_both_ways_when_not_frozen() {
        let (_relay, mut client, mut server) = connected().await;
        client.write_all(b"ping").await.unwrap();
        assert_eq!(read_n(&mut server, 4).await, b"ping");
        server.write_all(b"pong").await.unwrap();
        assert_eq!(read_n(&mut client, 4).await, b"pong");
    }

    #[tokio::test]
    async fn a_frozen_relay_forwards_nothing_either_way_then_everything_in_order() {
        let (relay, mut client, mut server) = connected().await;
        relay.gate().freeze_for(Duration::from_millis(400));
        client.write_all(b"one,").await.unwrap();
        client.write_all(b"two").await.unwrap();
        server.write_all(b"reply").await.unwrap();
        silent_for(&mut server, Duration::from_millis(250)).await;
        silent_for(&mut client, Duration::from_millis(50)).await;
        // Resumed: what was held back arrives, in order, and the connection is still open.
        assert_eq!(read_n(&mut server, 7).await, b"one,two");
        assert_eq!(read_n(&mut client, 5).await, b"reply");
        client.write_all(b"after").await.unwrap();
        assert_eq!(read_n(&mut server, 5).await, b"after");
    }

    #[tokio::test]
    async fn a_close_during_a_freeze_reaches_the_other_side_only_after_it() {
        let (relay, mut client, server) = connected().await;
        relay.gate().freeze_for(Duration::from_millis(300));
        drop(server);
        silent_for(&mut client, Duration::from_millis(200)).await;
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf))
            .await
            .expect("the close arrives after the freeze");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }

    #[tokio::test]
    async fn a_connection_opened_while_frozen_reaches_the_server_only_after_it() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay::start(&[server.local_addr().unwrap().to_string()])
            .await
            .unwrap();
        relay.gate().freeze_for(Duration::from_millis(300));
        let _client = TcpStream::connect(relay.connect_string()).await.unwrap();
        let early = tokio::time::timeout(Duration::from_millis(200), server.accept()).await;
        assert!(early.is_err(), "the server was reached during the freeze");
        tokio::time::timeout(Duration::from_secs(5), server.accept())
            .await
            .expect("the server is reached after the freeze")
            .unwrap();
    }
}
