//! One client connection, from its first bytes to its close (after the TLS handshake
//! when the server serves TLS).
//!
//! The first 4 bytes are either a four-letter word (answered, then closed) or the length
//! of a ConnectRequest. After the handshake, the connection's requests are read and served
//! one at a time in arrival order (ZooKeeper's FIFO order per session: a read never passes
//! an earlier write); a writer task drains the connection's outbound queue, where replies
//! and watch notifications meet. A malformed or oversized frame closes this connection
//! only.

use std::net::SocketAddr;
use std::sync::Arc;

use coordbench_node::Replicator;
use coordbench_tls::tokio_rustls::TlsAcceptor;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

use crate::auth::ConnAuth;
use crate::core::Core;
use crate::four_letter;
use crate::frame::{self, Opening};
use crate::handler::{ConnCtx, Flow};
use crate::jute::{Reader, Writer};
use crate::proto::{ConnectRequest, ConnectResponse};
use crate::request;
use crate::sessions::{handshake, Handshake};
use crate::state_machine::TreeStateMachine;
use crate::stats::Stats;

fn response_frame(r: &ConnectResponse) -> Vec<u8> {
    let mut w = Writer::frame();
    r.encode(&mut w);
    w.into_frame()
}

/// Serves one accepted connection: over TLS when the server is configured for it (the
/// handshake bounded by the I/O timeout), else in plain TCP.
pub(crate) async fn serve<R: Replicator<TreeStateMachine>>(
    core: Arc<Core<R>>,
    stream: TcpStream,
    peer: SocketAddr,
) {
    let _ = stream.set_nodelay(true);
    let Some(tls) = core.options.tls.clone() else {
        let (rd, wr) = stream.into_split();
        return serve_halves(core, rd, wr, peer).await;
    };
    let handshake = tokio::select! {
        () = core.shutdown.cancelled() => return,
        r = timeout(core.options.io_timeout, TlsAcceptor::from(tls).accept(stream)) => r,
    };
    match handshake {
        Ok(Ok(stream)) => {
            let (rd, wr) = tokio::io::split(stream);
            serve_halves(core, rd, wr, peer).await
        }
        Ok(Err(e)) => tracing::info!(%peer, error = %e, "TLS handshake failed; closing"),
        Err(_) => tracing::info!(%peer, "no TLS handshake within the I/O timeout; closing"),
    }
}

async fn serve_halves<R, Rd, Wr>(core: Arc<Core<R>>, mut rd: Rd, mut wr: Wr, peer: SocketAddr)
where
    R: Replicator<TreeStateMachine>,
    Rd: AsyncRead + Unpin,
    Wr: AsyncWrite + Unpin + Send + 'static,
{
    let io = core.options.io_timeout;
    let max = core.options.max_frame_bytes;
    let Some(response) = open(&core, &mut rd, &mut wr, peer).await else {
        return;
    };
    let session = response.session_id;
    let mut rd = BufReader::new(rd);
    let (tx, rx) = mpsc::channel(core.options.outbound_queue.max(2));
    let close = core.shutdown.child_token();
    // The response goes first: nothing else is queued before registration.
    if tx.try_send(response_frame(&response)).is_err() {
        return;
    }
    let auth = Arc::new(ConnAuth::default());
    let ids = {
        let auth = auth.clone();
        Arc::new(move || auth.ids(&peer))
    };
    let id = core
        .router
        .register(session, tx.clone(), close.clone(), ids);
    let writer = tokio::spawn(write_loop(
        wr,
        rx,
        core.stats.clone(),
        core.shutdown.clone(),
        io,
    ));
    let ctx = ConnCtx {
        core: core.clone(),
        id,
        session,
        peer,
        tx,
        auth,
    };
    loop {
        let next = tokio::select! {
            () = close.cancelled() => break,
            f = frame::read_frame(&mut rd, max) => f,
        };
        let payload = match next {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "bad frame; closing");
                break;
            }
        };
        core.stats.received();
        core.mark_active(session);
        let (header, req) = match request::decode(&payload) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "malformed request; closing");
                break;
            }
        };
        let started = core.stats.begin();
        let flow = tokio::select! {
            () = close.cancelled() => Flow::Close,
            f = ctx.handle(header, req) => f,
        };
        core.stats.end(started);
        if flow == Flow::Close {
            break;
        }
    }
    core.router.unregister(id);
    drop(ctx);
    // The writer ends once every sender is gone and the queue is drained.
    let _ = timeout(io, writer).await;
}

/// The opening: a four-letter word (answered; `None`), or a ConnectRequest and its
/// handshake: the attached session's response, or `None` when the connection is done
/// (refused, expired, malformed, shutting down). Unbuffered: a connection that never
/// completes a handshake holds no read buffer (see `frame::read_payload`).
async fn open<R, Rd, Wr>(
    core: &Core<R>,
    rd: &mut Rd,
    wr: &mut Wr,
    peer: SocketAddr,
) -> Option<ConnectResponse>
where
    R: Replicator<TreeStateMachine>,
    Rd: AsyncRead + Unpin,
    Wr: AsyncWrite + Unpin,
{
    let io = core.options.io_timeout;
    let first = tokio::select! {
        () = core.shutdown.cancelled() => return None,
        r = timeout(io, frame::read_prefix(rd)) => r.ok()?.ok()??,
    };
    let len = match frame::opening(first, core.options.max_frame_bytes) {
        Ok(Opening::FourLetter(word)) => {
            let answer = four_letter::answer(core, word);
            let _ = timeout(io, async {
                wr.write_all(answer.as_bytes()).await?;
                wr.shutdown().await
            })
            .await;
            return None;
        }
        Ok(Opening::Frame(len)) => len,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "bad opening; closing");
            return None;
        }
    };
    let payload = tokio::select! {
        () = core.shutdown.cancelled() => return None,
        r = timeout(io, frame::read_payload(rd, len)) => r.ok()?.ok()?,
    };
    // Trailing bytes after the optional readOnly flag are tolerated, as ZooKeeper does.
    let Ok(connect) = ConnectRequest::decode(&mut Reader::new(&payload)) else {
        tracing::debug!(%peer, "malformed ConnectRequest; closing");
        return None;
    };
    core.stats.received();
    let response = tokio::select! {
        () = core.shutdown.cancelled() => return None,
        r = handshake(core, &connect) => r,
    };
    match response {
        Ok(Handshake::Attached(r)) => Some(r),
        Ok(Handshake::Expired) => {
            let frame = response_frame(&ConnectResponse::expired());
            let _ = timeout(io, async {
                wr.write_all(&frame).await?;
                wr.shutdown().await
            })
            .await;
            core.stats.sent();
            None
        }
        Ok(Handshake::Behind) | Err(_) => None,
    }
}

/// Writes queued frames (replies and notifications, each counted as a packet sent),
/// flushing whenever the queue runs dry.
async fn write_loop<Wr: AsyncWrite + Unpin>(
    wr: Wr,
    mut rx: mpsc::Receiver<Vec<u8>>,
    stats: Arc<Stats>,
    shutdown: CancellationToken,
    io: std::time::Duration,
) {
    let mut wr = BufWriter::new(wr);
    loop {
        let frame = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            f = rx.recv() => f,
        };
        let Some(frame) = frame else { break };
        let batch = async {
            wr.write_all(&frame).await?;
            stats.sent();
            while let Ok(more) = rx.try_recv() {
                wr.write_all(&more).await?;
                stats.sent();
            }
            wr.flush().await
        };
        match timeout(io, batch).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
    let _ = timeout(io, async {
        wr.flush().await?;
        wr.shutdown().await
    })
    .await;
}
