//! [`TcpTransport`]: envelopes over TCP between the members of a cluster.
//!
//! Each node listens on its own address and keeps one outbound connection per peer, fed
//! by a bounded queue (full: the message is dropped) and re-established with exponential
//! backoff when it breaks; while a peer is unreachable its queue is discarded rather than
//! replayed late. Frames are `[len: u32 BE][tag][body]` (see `chunk`): an envelope that does
//! not fit one frame (a snapshot install) goes as a run of chunks, interleaved with the
//! connection's other messages so heartbeats keep flowing, and is reassembled by the
//! receiver up to `max_snapshot_bytes`. A frame above the size limit or one that does not
//! decode closes that connection only.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use coordbench_raft::NodeId;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::chunk::{self, Frame, Outgoing, Reassembly};
use crate::envelope::{Envelope, Payload};
use crate::transport::Transport;

/// Tuning of [`TcpTransport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpOptions {
    /// Largest frame sent or accepted; larger envelopes travel in chunks of this size.
    pub max_frame_bytes: usize,
    /// Largest envelope reassembled from chunks (a snapshot install); a larger one is
    /// discarded by the receiver, and not sent by the sender.
    pub max_snapshot_bytes: u64,
    /// Outbound queue per peer, in messages.
    pub queue_capacity: usize,
    pub connect_timeout: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Inbound connections accepted at once (peers reconnecting leave old ones behind).
    pub max_inbound: usize,
}

impl Default for TcpOptions {
    fn default() -> Self {
        Self {
            max_frame_bytes: 64 << 20,
            max_snapshot_bytes: 4 << 30,
            queue_capacity: 4096,
            connect_timeout: Duration::from_secs(1),
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(500),
            max_inbound: 64,
        }
    }
}

/// Frames written per flush at most (keeps latency bounded under a burst).
const WRITE_BATCH: usize = 256;
/// Attempts to bind the listening address (a just-stopped incarnation may still hold it).
const BIND_ATTEMPTS: u32 = 50;

pub struct TcpTransport {
    id: NodeId,
    queues: HashMap<NodeId, mpsc::Sender<Envelope>>,
    local: SocketAddr,
    // Dropping the transport aborts its listener, readers and writers.
    _tasks: JoinSet<()>,
}

impl TcpTransport {
    /// Listens on `listen`, delivers inbound envelopes to `inbox`, and connects to `peers`
    /// (every other member; `id` itself is skipped).
    pub async fn start(
        id: NodeId,
        listen: SocketAddr,
        peers: &HashMap<NodeId, SocketAddr>,
        inbox: mpsc::Sender<Envelope>,
        opts: TcpOptions,
    ) -> io::Result<Self> {
        let listener = bind(listen).await?;
        let local = listener.local_addr()?;
        let mut tasks = JoinSet::new();
        tasks.spawn(accept_loop(listener, inbox, opts));
        let mut queues = HashMap::new();
        for (&peer, &addr) in peers {
            if peer == id {
                continue;
            }
            let (tx, rx) = mpsc::channel(opts.queue_capacity.max(1));
            queues.insert(peer, tx);
            tasks.spawn(writer(peer, addr, rx, opts));
        }
        Ok(Self {
            id,
            queues,
            local,
            _tasks: tasks,
        })
    }

    /// The address actually listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Transport for TcpTransport {
    fn send(&self, env: Envelope) -> bool {
        if env.from != self.id {
            return false;
        }
        match self.queues.get(&env.to) {
            Some(q) => q.try_send(env).is_ok(),
            None => false,
        }
    }
}

async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let mut last = None;
    for _ in 0..BIND_ATTEMPTS {
        match TcpListener::bind(addr).await {
            Ok(l) => return Ok(l),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("bind failed")))
}

async fn accept_loop(listener: TcpListener, inbox: mpsc::Sender<Envelope>, opts: TcpOptions) {
    let mut readers = JoinSet::new();
    loop {
        while readers.try_join_next().is_some() {}
        match listener.accept().await {
            Ok((stream, addr)) => {
                if readers.len() >= opts.max_inbound {
                    tracing::warn!(%addr, "too many inbound connections; refusing");
                    continue;
                }
                let _ = stream.set_nodelay(true);
                readers.spawn(reader(stream, addr, inbox.clone(), opts));
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        if inbox.is_closed() {
            return;
        }
    }
}

async fn reader(
    stream: TcpStream,
    addr: SocketAddr,
    inbox: mpsc::Sender<Envelope>,
    opts: TcpOptions,
) {
    // Once a peer has spoken on this connection, its end is news: the peer's process died
    // or the link broke (or it stopped). Cores may act on that before their timeouts do.
    if let Some((from, to)) = read_frames(stream, addr, &inbox, opts).await {
        let payload = Payload::Disconnected;
        let _ = inbox.send(Envelope { from, to, payload }).await;
    }
}

/// Delivers the connection's envelopes until it ends; returns the sender and addressee of
/// the last one (none if no valid envelope came).
async fn read_frames(
    stream: TcpStream,
    addr: SocketAddr,
    inbox: &mpsc::Sender<Envelope>,
    opts: TcpOptions,
) -> Option<(NodeId, NodeId)> {
    let max = opts.max_frame_bytes;
    let mut r = BufReader::with_capacity(64 << 10, stream);
    let mut buf = Vec::new();
    let mut reassembly = Reassembly::new(opts.max_snapshot_bytes);
    let mut last = None;
    // Until the connection is closed or broken.
    while let Ok(len) = r.read_u32().await {
        let len = len as usize;
        if len > max {
            tracing::warn!(%addr, len, max, "oversized frame; closing connection");
            break;
        }
        buf.clear();
        // Read through `take` so a lying length cannot make us allocate it up front.
        match (&mut r).take(len as u64).read_to_end(&mut buf).await {
            Ok(n) if n == len => {}
            _ => break,
        }
        let env = match chunk::decode(&buf) {
            Ok(Frame::Whole(env)) => env,
            Ok(Frame::Chunk(header, data)) => match reassembly.accept(header, data) {
                Ok(None) => continue,
                Ok(Some(bytes)) => match Envelope::decode(&bytes) {
                    Ok(env) => env,
                    Err(e) => {
                        tracing::warn!(%addr, error = %e, "malformed chunked envelope; closing");
                        break;
                    }
                },
                Err(e) => {
                    tracing::warn!(%addr, error = %e, "chunked transfer discarded");
                    continue;
                }
            },
            Err(e) => {
                tracing::warn!(%addr, error = %e, "malformed frame; closing connection");
                break;
            }
        };
        last = Some((env.from, env.to));
        // Waiting here pushes back on the peer through TCP instead of queueing more.
        if inbox.send(env).await.is_err() {
            return None;
        }
    }
    if let Some((got, total)) = reassembly.in_progress() {
        tracing::warn!(%addr, got, total, "connection ended mid-transfer; discarded");
    }
    last
}

async fn writer(
    peer: NodeId,
    addr: SocketAddr,
    mut rx: mpsc::Receiver<Envelope>,
    opts: TcpOptions,
) {
    let mut backoff = opts.backoff_min;
    loop {
        if rx.is_closed() {
            return;
        }
        match tokio::time::timeout(opts.connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                backoff = opts.backoff_min;
                let _ = stream.set_nodelay(true);
                match pump(stream, &mut rx, opts).await {
                    Ok(()) => return, // the node is gone
                    Err(e) => tracing::debug!(peer, error = %e, "connection lost"),
                }
            }
            Ok(Err(e)) => tracing::trace!(peer, error = %e, "connect failed"),
            Err(_) => tracing::trace!(peer, "connect timed out"),
        }
        // Messages queued for an unreachable peer would be stale by the time it is back.
        while rx.try_recv().is_ok() {}
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(opts.backoff_max);
    }
}

/// Sends queued envelopes until the queue closes (`Ok`) or the connection breaks. One
/// oversized envelope at a time goes out in chunks, a chunk per round between the queued
/// messages; another oversized one arriving meanwhile is dropped (cores retransmit).
async fn pump(
    stream: TcpStream,
    rx: &mut mpsc::Receiver<Envelope>,
    opts: TcpOptions,
) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(64 << 10, stream);
    let mut sender = ChunkSender::new(opts);
    loop {
        if !sender.busy() {
            let Some(env) = rx.recv().await else {
                return Ok(());
            };
            sender.write(&mut w, &env).await?;
        }
        for _ in 0..WRITE_BATCH {
            match rx.try_recv() {
                Ok(env) => sender.write(&mut w, &env).await?,
                Err(_) => break,
            }
        }
        sender.write_next_chunk(&mut w).await?;
        w.flush().await?;
    }
}

/// One connection's writing side: whole frames, and the oversized envelope in flight.
struct ChunkSender {
    opts: TcpOptions,
    next_transfer: u64,
    outgoing: Option<Outgoing>,
}

impl ChunkSender {
    fn new(opts: TcpOptions) -> Self {
        ChunkSender {
            opts,
            next_transfer: 0,
            outgoing: None,
        }
    }

    fn busy(&self) -> bool {
        self.outgoing.is_some()
    }

    /// Writes `env` as one frame, or starts its chunked transfer.
    async fn write(&mut self, w: &mut BufWriter<TcpStream>, env: &Envelope) -> io::Result<()> {
        let bytes = match env.encode() {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(kind = env.kind(), error = %e, "cannot encode; dropped");
                return Ok(());
            }
        };
        let max = self.opts.max_frame_bytes;
        if bytes.len() < max {
            w.write_u32(bytes.len() as u32 + 1).await?;
            w.write_u8(chunk::WHOLE).await?;
            return w.write_all(&bytes).await;
        }
        let (len, limit) = (bytes.len(), self.opts.max_snapshot_bytes);
        if len as u64 > limit || self.busy() || max <= chunk::CHUNK_OVERHEAD {
            let why = if self.busy() {
                "another in flight"
            } else {
                "above the limits"
            };
            tracing::warn!(kind = env.kind(), len, limit, why, "large message dropped");
            return Ok(());
        }
        let chunk_size = max - chunk::CHUNK_OVERHEAD;
        self.outgoing = Some(Outgoing::new(self.next_transfer, bytes, chunk_size));
        self.next_transfer += 1;
        Ok(())
    }

    /// Writes the in-flight transfer's next chunk, if any.
    async fn write_next_chunk(&mut self, w: &mut BufWriter<TcpStream>) -> io::Result<()> {
        let Some(out) = &mut self.outgoing else {
            return Ok(());
        };
        let Some((header, data)) = out.next_chunk() else {
            self.outgoing = None;
            return Ok(());
        };
        let prefix = chunk::chunk_prefix(&header);
        w.write_u32((prefix.len() + data.len()) as u32).await?;
        w.write_all(&prefix).await?;
        w.write_all(data).await?;
        if header.offset + data.len() as u64 == header.total {
            self.outgoing = None;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Payload;

    fn env(from: NodeId, to: NodeId, request_id: u64) -> Envelope {
        Envelope {
            from,
            to,
            payload: Payload::ReadIndexRequest { request_id },
        }
    }

    async fn recv(rx: &mut mpsc::Receiver<Envelope>) -> Option<Envelope> {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test]
    async fn delivers_and_survives_garbage_on_another_connection() -> io::Result<()> {
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        let (tx2, mut rx2) = mpsc::channel(16);
        let t2 = TcpTransport::start(2, any, &HashMap::new(), tx2, TcpOptions::default()).await?;
        let addr2 = t2.local_addr();
        let (tx1, _rx1) = mpsc::channel(16);
        let peers = HashMap::from([(2, addr2)]);
        let t1 = TcpTransport::start(1, any, &peers, tx1, TcpOptions::default()).await?;
        assert!(t1.send(env(1, 2, 7)));
        assert_eq!(recv(&mut rx2).await, Some(env(1, 2, 7)));

        // An oversized frame and a malformed one each close only their own connection.
        let mut bad = TcpStream::connect(addr2).await?;
        bad.write_u32(u32::MAX).await?;
        let mut n = [0u8; 1];
        let closed = tokio::time::timeout(Duration::from_secs(5), bad.read(&mut n)).await;
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "oversized frame closes"
        );
        let mut bad = TcpStream::connect(addr2).await?;
        bad.write_u32(3).await?;
        bad.write_all(&[0xff, 0xff, 0xff]).await?;
        let closed = tokio::time::timeout(Duration::from_secs(5), bad.read(&mut n)).await;
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "malformed frame closes"
        );

        assert!(t1.send(env(1, 2, 8)));
        assert_eq!(recv(&mut rx2).await, Some(env(1, 2, 8)));
        assert!(!t1.send(env(1, 3, 9)), "unknown peer");

        // The sender goes away: the receiver hears that its connection closed, as a note
        // from it (the garbage connections, which named no sender, said nothing).
        drop(t1);
        let gone = Envelope {
            from: 1,
            to: 2,
            payload: Payload::Disconnected,
        };
        assert_eq!(recv(&mut rx2).await, Some(gone));
        Ok(())
    }

    #[tokio::test]
    async fn reconnects_after_the_peer_restarts() -> io::Result<()> {
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        let (tx2, _rx2) = mpsc::channel(16);
        let t2 = TcpTransport::start(2, any, &HashMap::new(), tx2, TcpOptions::default()).await?;
        let addr2 = t2.local_addr();
        let (tx1, _rx1) = mpsc::channel(16);
        let t1 = TcpTransport::start(
            1,
            any,
            &HashMap::from([(2, addr2)]),
            tx1,
            TcpOptions::default(),
        )
        .await?;
        drop(t2);
        // Keep sending while the peer is down and after it is back on the same port.
        let (tx2, mut rx2) = mpsc::channel(16);
        let _t2 =
            TcpTransport::start(2, addr2, &HashMap::new(), tx2, TcpOptions::default()).await?;
        for k in 0..200 {
            t1.send(env(1, 2, k));
            if let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(50), rx2.recv()).await {
                assert_eq!(e.from, 1);
                return Ok(());
            }
        }
        panic!("no message got through after the peer restarted");
    }

    fn small_frames() -> TcpOptions {
        TcpOptions {
            max_frame_bytes: 64 << 10,
            ..TcpOptions::default()
        }
    }

    fn forward(from: NodeId, to: NodeId, len: usize) -> Envelope {
        let command = (0..len).map(|i| (i % 251) as u8).collect();
        Envelope {
            from,
            to,
            payload: Payload::Forward {
                request_id: 1,
                command,
            },
        }
    }

    /// A raw frame: length, then `body`.
    async fn write_raw(s: &mut TcpStream, body: &[u8]) -> io::Result<()> {
        s.write_u32(body.len() as u32).await?;
        s.write_all(body).await
    }

    #[tokio::test]
    async fn large_envelopes_go_in_chunks_between_small_ones() -> io::Result<()> {
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        let (tx2, mut rx2) = mpsc::channel(64);
        let t2 = TcpTransport::start(2, any, &HashMap::new(), tx2, small_frames()).await?;
        let (tx1, _rx1) = mpsc::channel(16);
        let peers = HashMap::from([(2, t2.local_addr())]);
        let t1 = TcpTransport::start(1, any, &peers, tx1, small_frames()).await?;
        let big = forward(1, 2, 1 << 20);
        assert!(t1.send(big.clone()));
        for k in 0..5 {
            assert!(t1.send(env(1, 2, k)));
        }
        // The small ones, queued after the big one, overtake it: they are not held up
        // behind sixteen chunks.
        for k in 0..5 {
            assert_eq!(recv(&mut rx2).await, Some(env(1, 2, k)));
        }
        assert_eq!(recv(&mut rx2).await, Some(big));
        Ok(())
    }

    #[tokio::test]
    async fn a_transfer_broken_off_is_discarded_and_whole_ones_pass_between_chunks(
    ) -> io::Result<()> {
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        let (tx2, mut rx2) = mpsc::channel(64);
        let t2 = TcpTransport::start(2, any, &HashMap::new(), tx2, small_frames()).await?;
        let whole = |e: &Envelope| {
            let mut body = vec![chunk::WHOLE];
            body.extend(e.encode().expect("encodes"));
            body
        };
        let big = forward(1, 2, 100_000).encode().expect("encodes");
        let mut out = Outgoing::new(0, big.clone(), 40_000);
        let mut parts = Vec::new();
        while let Some((h, d)) = out.next_chunk() {
            let mut body = chunk::chunk_prefix(&h);
            body.extend_from_slice(d);
            parts.push(body);
        }
        assert_eq!(parts.len(), 3);

        // The connection breaks after two of three chunks: nothing is delivered but the
        // note that the sender's connection closed.
        let mut broken = TcpStream::connect(t2.local_addr()).await?;
        write_raw(&mut broken, &whole(&env(1, 2, 1))).await?;
        write_raw(&mut broken, &parts[0]).await?;
        write_raw(&mut broken, &parts[1]).await?;
        drop(broken);
        assert_eq!(recv(&mut rx2).await, Some(env(1, 2, 1)));
        let gone = Envelope {
            from: 1,
            to: 2,
            payload: Payload::Disconnected,
        };
        assert_eq!(recv(&mut rx2).await, Some(gone));

        // On a new connection the same chunks, with a whole envelope between them, arrive.
        let mut s = TcpStream::connect(t2.local_addr()).await?;
        write_raw(&mut s, &parts[0]).await?;
        write_raw(&mut s, &whole(&env(1, 2, 2))).await?;
        write_raw(&mut s, &parts[1]).await?;
        write_raw(&mut s, &parts[2]).await?;
        assert_eq!(recv(&mut rx2).await, Some(env(1, 2, 2)));
        assert_eq!(recv(&mut rx2).await, Some(forward(1, 2, 100_000)));
        Ok(())
    }
}
