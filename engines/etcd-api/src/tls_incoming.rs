//! The gRPC listener over TLS: connections accepted and handshaken by coordbench-tls's
//! accept loop (bounded handshakes, client certificates verified against the configured
//! CA), handed to tonic as its incoming stream.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use coordbench_tls::rustls::ServerConfig;
use coordbench_tls::tokio_rustls::server::TlsStream;
use coordbench_tls::{accept, Accepted};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::Stream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// tonic's incoming connections: the handshaken TLS streams of one listener.
pub(crate) struct TlsIncoming {
    accepted: Accepted,
}

impl TlsIncoming {
    /// Starts accepting on `listener` (inside the runtime).
    pub(crate) fn new(listener: TcpListener, config: Arc<ServerConfig>) -> Self {
        TlsIncoming {
            accepted: accept(listener, config, HANDSHAKE_TIMEOUT),
        }
    }
}

impl Stream for TlsIncoming {
    type Item = Result<TlsConn, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.accepted
            .connections
            .poll_recv(cx)
            .map(|next| next.map(|(tls, peer)| Ok(TlsConn::new(tls, peer))))
    }
}

/// One client's TLS connection, with the addresses tonic hands to services.
pub(crate) struct TlsConn {
    tls: TlsStream<TcpStream>,
    info: TcpConnectInfo,
}

impl TlsConn {
    fn new(tls: TlsStream<TcpStream>, peer: std::net::SocketAddr) -> Self {
        let info = TcpConnectInfo {
            local_addr: tls.get_ref().0.local_addr().ok(),
            remote_addr: Some(peer),
        };
        TlsConn { tls, info }
    }
}

impl Connected for TlsConn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tls.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}
